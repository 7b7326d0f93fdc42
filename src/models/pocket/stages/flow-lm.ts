/**
 * FlowLM backbone (docs/pocket-tts.md §1.7, §2.2, §3.1): prefill and one AR step over the request's KV caches, and the
 * predefined voice states that load into them (§2.1).
 */
import type * as ort from "onnxruntime-web";
import { decodeSafetensorsWithInt64, type DecodedTensor } from "../../../formats/safetensors.ts";
import type { StateEntry } from "../bundle/pocket-bundle.ts";
import type { CacheWritePlan } from "../../../onnx/cache-writes.ts";
import type { OnnxSession } from "../../../onnx/runtime.ts";
import { FLOW_LM_POSITIONS_AXIS, StateOutputs, float32Output, initialStateTensors, stateFeeds, type Float32Tensor, type FlowLmState, type StepOptions } from "./state.ts";

export interface FlowLmConfig {
  latentDim: number;
  conditioningDim: number;
  /** Static KV cache length (1000): the slice-assign write is unguarded in the graph (§3.1, §6.10). */
  cachePositions: number;
}


export interface FlowLmStepResult {
  state: FlowLmState;
  /** out_norm of the new position: the flow head's condition `c` [D]. */
  conditioning: Float32Array;
  /** Raw EOS logit; EOS when it exceeds the threshold (−4.0, §1.7). */
  eosLogit: number;
}

/** Windowed caches grow and shrink in blocks of this many positions. */
const CACHE_WINDOW_BLOCK = 64;

export class FlowLm {
  private readonly stepIndex: number;
  private readonly states: StateOutputs;
  private readonly isCache: boolean[];
  /**
   * True when the graph takes caches of any length and gives the same results for them (checked by
   * `create`): caches then hold only the rows in use, in blocks of 64, instead of all 1000. Every step
   * copies its caches inside the runtime (the ScatterND writes), so this is what a step costs: a full-size
   * int8 step at 100 positions took 22.7 ms with 1000 rows and 8.7 ms with 128 (Bun, onnxruntime-node).
   */
  private windowed = false;

  constructor(
    private readonly session: OnnxSession,
    readonly manifest: readonly StateEntry[],
    readonly config: FlowLmConfig,
    cacheWrites: readonly CacheWritePlan[] = [],
  ) {
    const stepIndex = manifest.findIndex((entry) => entry.key === "step");
    if (stepIndex < 0) throw new Error("FlowLM manifest has no step state");
    this.stepIndex = stepIndex;
    this.states = new StateOutputs(session, manifest, cacheWrites, "flow_lm_main");
    this.isCache = manifest.map((entry) => entry.key === "cache" && entry.dtype === "float32" && entry.shape.length === 5);
  }

  /**
   * A FlowLM whose caches are windowed when `windowedInputs` (the cache inputs declared with a symbolic
   * positions axis, cache-writes.ts) is not empty and a probe step gives identical outputs with a full and
   * a windowed cache; otherwise caches keep their full 1000 rows.
   */
  static async create(session: OnnxSession, manifest: readonly StateEntry[], config: FlowLmConfig, cacheWrites: readonly CacheWritePlan[] = [], windowedInputs: readonly string[] = []): Promise<FlowLm> {
    const flowLm = new FlowLm(session, manifest, config, cacheWrites);
    const caches = manifest.filter((_, index) => flowLm.isCache[index]);
    if (caches.length > 0 && caches.every((entry) => windowedInputs.includes(entry.inputName))) flowLm.windowed = await flowLm.windowMatchesFullCache();
    return flowLm;
  }

  /** Whether caches hold only the rows in use (see `windowed`). */
  get windowedCaches(): boolean {
    return this.windowed;
  }

  /** Rows of a cache that must hold `positions` positions. */
  capacityFor(positions: number): number {
    if (!this.windowed) return this.config.cachePositions;
    return Math.min(this.config.cachePositions, Math.max(CACHE_WINDOW_BLOCK, Math.ceil(positions / CACHE_WINDOW_BLOCK) * CACHE_WINDOW_BLOCK));
  }

  private async windowMatchesFullCache(): Promise<boolean> {
    const filledRows = 5;
    const latent = Float32Array.from({ length: this.config.latentDim }, (_, index) => Math.cos(index * 0.7));
    try {
      const full = await this.step(this.probeState(this.config.cachePositions, filledRows), latent);
      const windowed = await this.step(this.probeState(CACHE_WINDOW_BLOCK, filledRows), latent);
      const sameRows = this.manifest.every((_, index) => {
        if (!this.isCache[index]) return true;
        const writtenRows = (tensor: ort.Tensor) => cacheRows(tensor.data as Float32Array, tensor.dims, filledRows + 1, filledRows + 1);
        return arraysEqual(writtenRows(full.state.tensors[index]!), writtenRows(windowed.state.tensors[index]!));
      });
      return sameRows && full.eosLogit === windowed.eosLogit && arraysEqual(full.conditioning, windowed.conditioning);
    } catch {
      return false;
    }
  }

  /** A state with `filledRows` deterministic rows in caches of `capacity` rows. */
  private probeState(capacity: number, filledRows: number): FlowLmState {
    const empty = initialStateTensors(this.manifest, this.session.Tensor, capacity);
    const tensors = empty.map((tensor, index) => {
      const entry = this.manifest[index]!;
      if (entry.key === "step") return new this.session.Tensor("int64", BigInt64Array.of(BigInt(filledRows)), [...entry.shape]);
      if (!this.isCache[index]) return tensor;
      const data = tensor.data as Float32Array;
      const [planes, rowValues] = [tensor.dims[0]! * tensor.dims[1]!, tensor.dims[3]! * tensor.dims[4]!];
      for (let plane = 0; plane < planes; plane++) {
        for (let value = 0; value < filledRows * rowValues; value++) data[plane * capacity * rowValues + value] = Math.sin(plane * 1.3 + value * 0.01 + index);
      }
      return tensor;
    });
    return { tensors, positions: filledRows };
  }

  /**
   * The state with every cache resized to `capacityFor(needed)` rows when it is too small for `needed`
   * positions, or more than a block too large (a voice state read from a 1000-row file); otherwise the
   * same state. A resized state is a fresh copy.
   */
  private fitCaches(state: FlowLmState, needed: number): FlowLmState {
    if (!this.windowed) return state;
    const capacity = this.capacityFor(needed);
    const fits = this.manifest.every((_, index) => {
      if (!this.isCache[index]) return true;
      const rows = state.tensors[index]!.dims[FLOW_LM_POSITIONS_AXIS]!;
      return rows >= needed && rows <= capacity + CACHE_WINDOW_BLOCK;
    });
    if (fits) return state;
    const tensors = state.tensors.map((tensor, index) => {
      if (!this.isCache[index]) return tensor;
      const dims = [...tensor.dims];
      dims[FLOW_LM_POSITIONS_AXIS] = capacity;
      return new this.session.Tensor("float32", cacheRows(tensor.data as Float32Array, tensor.dims, capacity, state.positions), dims);
    });
    return { tensors, positions: state.positions };
  }

  /** The Tensor class of this stage's provider, for states built outside a run (voice files). */
  get Tensor(): typeof ort.Tensor {
    return this.session.Tensor;
  }

  /** An empty cache, from the manifest fills (§3.3: cache NaN, current_end empty, step 0). */
  emptyState(): FlowLmState {
    return { tensors: initialStateTensors(this.manifest, this.session.Tensor, this.capacityFor(0)), positions: 0 };
  }

  /**
   * Appends conditioning rows [1, n, D] (voice or text) with an empty latent sequence; the graph's
   * `conditioning`/`eos_logit` outputs of such a call are meaningless and dropped (§3.1).
   */
  async prefill(state: FlowLmState, conditioning: Float32Tensor, options: StepOptions = {}): Promise<FlowLmState> {
    const rows = conditioning.dims[1]!;
    if (conditioning.dims.length !== 3 || conditioning.dims[2] !== this.config.conditioningDim) throw new Error(`prefill conditioning is [${conditioning.dims.join(", ")}], expected [1, n, ${this.config.conditioningDim}]`);
    const sequence = new this.session.Tensor("float32", new Float32Array(0), [1, 0, this.config.latentDim]);
    const text = new this.session.Tensor("float32", conditioning.data, [1, rows, this.config.conditioningDim]);
    return (await this.run(state, sequence, text, rows, options)).state;
  }

  /**
   * One AR step (§2.2 steps 2–3): feeds `inputLatent` [latentDim] (normalised), or null for BOS, which
   * goes in as an all-NaN row that the graph replaces by `bos_emb` (§6.3: never zeros).
   */
  async step(state: FlowLmState, inputLatent: Float32Array | null, options: StepOptions = {}): Promise<FlowLmStepResult> {
    const latent = inputLatent ?? new Float32Array(this.config.latentDim).fill(NaN);
    if (latent.length !== this.config.latentDim) throw new Error(`AR input latent has ${latent.length} values, expected ${this.config.latentDim}`);
    const sequence = new this.session.Tensor("float32", latent, [1, 1, this.config.latentDim]);
    const text = new this.session.Tensor("float32", new Float32Array(0), [1, 0, this.config.conditioningDim]);
    return this.run(state, sequence, text, 1, options);
  }

  private async run(state: FlowLmState, sequence: ort.Tensor, text: ort.Tensor, addedPositions: number, options: StepOptions): Promise<FlowLmStepResult> {
    const positions = state.positions + addedPositions;
    if (positions > this.config.cachePositions) {
      throw new RangeError(`FlowLM cache overflow: ${state.positions} + ${addedPositions} positions exceed ${this.config.cachePositions} (voice + text + frames must fit, §6.10)`);
    }
    const fitted = this.fitCaches(state, positions);
    const outputs = await this.session.run(stateFeeds(this.manifest, fitted, { sequence, text_embeddings: text }), this.states.fetches);
    // A resized state is already a copy of its own, so it is written in place.
    const tensors = this.states.next(fitted, outputs, { reuseState: options.reuseState || fitted !== state });
    const graphStep = Number((tensors[this.stepIndex]!.data as BigInt64Array)[0]);
    if (graphStep !== positions) throw new Error(`flow_lm_main step counter is ${graphStep}, expected ${positions}`);
    return {
      state: { tensors, positions },
      conditioning: float32Output(outputs, "conditioning", "flow_lm_main").data,
      eosLogit: float32Output(outputs, "eos_logit", "flow_lm_main").data[0]!,
    };
  }
}

// Predefined voice states (§2.1)

/**
 * Loads an upstream predefined-voice safetensors file into a FlowLM state. Formats, newest first (§2.1):
 * - `<module>/cache` f32 [2, 1, L, H, Dh] with `<module>/offset` int64 [1] (embeddings_v3) or
 *   `<module>/step`: copied into rows 0..L−1 of the static cache; step = offset;
 * - `<module>/cache` with `<module>/current_end` [L] (embeddings_v2): the step is the *length* of current_end;
 * - `audio_prompt` [1, L, D] (the original format): projected voice tokens, run through a FlowLM prefill.
 * States map onto the graph by manifest module and key, never by position (§3.3).
 */
export async function voiceStateFromSafetensors(bytes: Uint8Array, flowLm: FlowLm): Promise<FlowLmState> {
  const tensors = decodeSafetensorsWithInt64(bytes);
  const audioPrompt = tensors.audio_prompt;
  if (audioPrompt) {
    if (audioPrompt.dtype !== "F32") throw new Error("audio_prompt must be a float tensor");
    return flowLm.prefill(flowLm.emptyState(), { data: audioPrompt.data, dims: audioPrompt.shape });
  }
  const empty = flowLm.emptyState();
  let positions: number | undefined;
  const stateTensors = flowLm.manifest.map((entry, index) => {
    const initial = empty.tensors[index]!;
    if (entry.key === "current_end") return initial;
    const source = tensors[`${entry.module}/cache`];
    if (!source || source.dtype !== "F32") throw new Error(`voice state has no float tensor ${entry.module}/cache`);
    const step = voiceStateStep(tensors, entry.module);
    if (positions !== undefined && positions !== step) throw new Error(`voice state layers disagree on the step (${positions} vs ${step})`);
    positions = step;
    if (entry.key === "step") return new flowLm.Tensor("int64", BigInt64Array.of(BigInt(step)), [...entry.shape]);
    if (entry.key === "cache") {
      const shape = [...entry.shape];
      shape[FLOW_LM_POSITIONS_AXIS] = flowLm.capacityFor(step);
      return new flowLm.Tensor("float32", copyCacheRows(source, { ...entry, shape }, step), shape);
    }
    throw new Error(`FlowLM state ${entry.module}/${entry.key} has no counterpart in a voice state`);
  });
  if (positions === undefined) throw new Error("voice state holds no layer");
  return { tensors: stateTensors, positions };
}

function voiceStateStep(tensors: Record<string, DecodedTensor>, module: string): number {
  const counter = tensors[`${module}/offset`] ?? tensors[`${module}/step`];
  if (counter) {
    if (counter.dtype !== "I64" || counter.data.length !== 1) throw new Error(`${module} offset/step must be int64 [1]`);
    return Number(counter.data[0]!);
  }
  const currentEnd = tensors[`${module}/current_end`];
  if (currentEnd) return currentEnd.shape[0]!;
  throw new Error(`voice state has no ${module}/offset, /step or /current_end`);
}

/** [2, 1, L, H, Dh] → the manifest's [2, 1, T, H, Dh], rows ≥ step left at the manifest fill. */
function copyCacheRows(source: DecodedTensor & { dtype: "F32" }, entry: StateEntry, step: number): Float32Array {
  const [kv, batch, capacity, heads, headDim] = entry.shape as [number, number, number, number, number];
  const [sourceKv, sourceBatch, sourceRows, sourceHeads, sourceHeadDim] = source.shape;
  if (source.shape.length !== 5 || sourceKv !== kv || sourceBatch !== batch || sourceHeads !== heads || sourceHeadDim !== headDim) {
    throw new Error(`${entry.module}/cache is [${source.shape.join(", ")}], expected [${kv}, ${batch}, L, ${heads}, ${headDim}]`);
  }
  if (step > sourceRows! || step > capacity) throw new Error(`${entry.module}: step ${step} exceeds the ${sourceRows} stored rows or the ${capacity}-row cache`);
  return cacheRows(source.data, source.shape, capacity, step, entry.fill === "nan" ? NaN : 0);
}

/**
 * Rows [0, keptRows) of each K/V plane of a cache [2, 1, rows, H, Dh], in a cache of `capacity` rows whose
 * other rows hold `fill` (NaN, the caches' fill, §3.3: rows past the step are never read).
 */
function cacheRows(data: Float32Array, dims: readonly number[], capacity: number, keptRows: number, fill = NaN): Float32Array {
  const [kv, batch, rows, heads, headDim] = dims as [number, number, number, number, number];
  const rowValues = heads * headDim;
  const kept = Math.min(keptRows, rows, capacity);
  const target = new Float32Array(kv * batch * capacity * rowValues).fill(fill);
  for (let plane = 0; plane < kv * batch; plane++) target.set(data.subarray(plane * rows * rowValues, (plane * rows + kept) * rowValues), plane * capacity * rowValues);
  return target;
}

function arraysEqual(a: Float32Array, b: Float32Array): boolean {
  return a.length === b.length && a.every((value, index) => Object.is(value, b[index]));
}
