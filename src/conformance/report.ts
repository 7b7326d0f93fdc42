/**
 * What a conformance run reports, and how one comparison becomes a case: tensors pass at
 * relRms = rms(actual − golden) / rms(golden) ≤ RELATIVE_RMS_TOLERANCE, everything else (token ids, texts, EOS
 * decisions, step counts, lengths) must match exactly.
 */
import type { CpuProvider } from "../onnx/runtime.ts";

export type ConformanceDecoder = "onnx" | "wgsl";
export type ConformanceStage = "tokenizer" | "text_conditioner" | "encoder" | "flow_lm" | "flow_head" | "decoder" | "end_to_end";

export interface ConformanceCase {
  case: string;
  stage: ConformanceStage;
  /** max |actual − golden|; for exact comparisons the number of mismatching items. Null when nothing was compared. */
  maxAbs: number | null;
  relRms: number | null;
  pass: boolean;
  /** False for golden intermediates that the chosen decoder path has no way to expose. */
  observable?: boolean;
  detail?: string;
}

export interface ConformanceReport {
  fixture: string;
  decoder: ConformanceDecoder;
  /** The onnxruntime package that ran the graphs; absent when no case needed a session. */
  provider?: CpuProvider;
  /** Where the language-model graphs ran; absent when no case opened the bundle's sessions. */
  executionProvider?: "cpu" | "webgpu";
  /** Streams per model call (`--batch`); absent: the stages as they are. */
  batch?: number;
  pass: boolean;
  cases: ConformanceCase[];
}

export const RELATIVE_RMS_TOLERANCE = 1e-4;

/** relRms and maxAbs of two float tensors; positions where both are NaN (BOS rows) count as equal. */
export function compareTensors(actual: ArrayLike<number>, expected: ArrayLike<number>): { maxAbs: number; relRms: number } {
  if (actual.length !== expected.length) return { maxAbs: Infinity, relRms: Infinity };
  let maxAbs = 0;
  let squaredError = 0;
  let squaredReference = 0;
  for (let index = 0; index < expected.length; index++) {
    const a = actual[index]!;
    const b = expected[index]!;
    if (Number.isNaN(a) && Number.isNaN(b)) continue;
    const difference = Math.abs(a - b);
    if (Number.isNaN(difference)) return { maxAbs: NaN, relRms: NaN };
    maxAbs = Math.max(maxAbs, difference);
    squaredError += difference * difference;
    squaredReference += b * b;
  }
  const relRms = squaredError === 0 ? 0 : squaredReference === 0 ? Infinity : Math.sqrt(squaredError / squaredReference);
  return { maxAbs, relRms };
}

export function tensorCase(name: string, stage: ConformanceStage, actual: ArrayLike<number>, expected: ArrayLike<number>, detail?: string): ConformanceCase {
  const { maxAbs, relRms } = compareTensors(actual, expected);
  const lengthDetail = actual.length === expected.length ? undefined : `length ${actual.length}, golden ${expected.length}`;
  const notes = [lengthDetail, detail].filter((note) => note !== undefined);
  return { case: name, stage, maxAbs, relRms, pass: relRms <= RELATIVE_RMS_TOLERANCE, ...(notes.length > 0 ? { detail: notes.join("; ") } : {}) };
}

export function exactCase<T>(name: string, stage: ConformanceStage, actual: readonly T[], expected: readonly T[]): ConformanceCase {
  let mismatches = Math.abs(actual.length - expected.length);
  for (let index = 0; index < Math.min(actual.length, expected.length); index++) if (actual[index] !== expected[index]) mismatches++;
  const detail = mismatches === 0 ? undefined : `got ${JSON.stringify(actual)}, golden ${JSON.stringify(expected)}`;
  return { case: name, stage, maxAbs: mismatches, relRms: null, pass: mismatches === 0, ...(detail ? { detail } : {}) };
}

export function unobservable(name: string, stage: ConformanceStage, reason: string): ConformanceCase {
  return { case: name, stage, maxAbs: null, relRms: null, pass: true, observable: false, detail: reason };
}

/** Runs `body`, or marks each of `names` failed with the reason it could not run. */
export async function orNotRun(names: readonly string[], stage: ConformanceStage, body: () => Promise<ConformanceCase[]>): Promise<ConformanceCase[]> {
  try {
    return await body();
  } catch (error) {
    return names.map((name) => ({ case: name, stage, maxAbs: null, relRms: null, pass: false, detail: `not run: ${(error as Error).message}` }));
  }
}
