/**
 * CPU inference sessions on either of two packages that share onnxruntime-common's InferenceSession and
 * Tensor API: onnxruntime-node (native CPU execution provider) or onnxruntime-web (wasm execution provider).
 * Also a reader for the declared inputs of an .onnx file that needs no session.
 *
 * Nothing happens on import, and neither package is imported until a session of it is asked for:
 * `configureOnnxRuntime` fixes the process-wide thread count once, before the first session, and
 * `openPocketSessions` creates the sessions of a bundle explicitly.
 *
 * Tensors must come from the package that made the session. Feeds are duck-typed, so a foreign Tensor
 * happens to run, but `run(feeds, fetches)` recognises preallocated outputs with `instanceof` on the
 * session's own Tensor class (onnxruntime-common inference-session-impl), and each package carries its own
 * copy of that class (onnxruntime-web bundles onnxruntime-common). So every session travels with its
 * package's Tensor class (`OnnxSession.Tensor`), and the stages build their tensors from it.
 *
 * Threads (measured on a 2-core machine, onnxruntime-web 1.30.0, Bun 1.4.5 and Deno 2.9.6): with
 * `numThreads` 2 both runtimes spawn one worker and produce identical results, but 16 one-latent calls
 * of the full-size Mimi decoder took 0.75–0.79 s with 1 thread vs 0.87–0.88 s with 2 under Bun, and
 * 1.27 s vs 1.17 s under Deno; the tiny graphs are dominated by call overhead. One thread is the default
 * (KR1 also caps intra-op threads at 4 because the small sequential matmuls do not scale, §3.7), and
 * onnxruntime-node gets the same count as its intra-op thread pool so the two providers compare fairly.
 */
import { open, readFile, type FileHandle } from "node:fs/promises";
// Types only: both packages re-export onnxruntime-common's declarations, so these describe either one.
import type * as ort from "onnxruntime-web";
import type { PocketBundle, StateEntry } from "./bundle.ts";
import { rewriteCacheWrites, type CacheWritePlan, type RewriteOptions } from "./cache-writes.ts";
import { FLOW_LM_POSITIONS_AXIS } from "./stages.ts";

export type CpuProvider = "onnxruntime-node" | "onnxruntime-web";
export type CpuProviderChoice = "auto" | CpuProvider;

/**
 * The order "auto" tries the providers in: the faster first, the other as the fallback where it does not
 * load (no prebuilt binary for the platform, or Deno without --allow-ffi). onnxruntime-node was the faster
 * under every runtime measured, so the order does not depend on the runtime. bench/pocket-providers.ts on
 * a 2-core x86-64 machine (onnxruntime 1.30.0, 1 thread, min / median of 3 runs), node vs web:
 * - pocket-tiny, 30-word sentence, EOS disabled, fp32 RTF: Bun 0.026 / 0.027 vs 0.047 / 0.048,
 *   Deno 0.028 / 0.028 vs 0.045 / 0.045 (int8: Bun 0.027 vs 0.051, Deno 0.031 vs 0.040);
 * - the real-size Mimi decoder (fixtures/mimi-full), ms per one-latent call, fp32: Bun 22.5 vs 43.6,
 *   Deno 19.6 vs 38.3 (int8: Bun 20.1 vs 39.7, Deno 17.3 vs 36.7);
 * - real-size FlowLM main step (../shared/docs/anchors.md), ms per frame: Bun 109 vs 206; under Node the
 *   whole loop runs at RTF 1.11 vs 1.23.
 * Repeated passes on the shared machine moved single cells by up to ~40% but never changed the order.
 */
export const AUTO_PROVIDER_ORDER: readonly CpuProvider[] = ["onnxruntime-node", "onnxruntime-web"];

/** What the stages use of a package; both packages' module namespaces satisfy it. */
export interface OnnxRuntimePackage {
  InferenceSession: typeof ort.InferenceSession;
  Tensor: typeof ort.Tensor;
  env: ort.Env;
}

/** Imports a provider's package; tests inject one that fails to simulate a missing native binding. */
export type OnnxPackageLoader = (provider: CpuProvider) => Promise<OnnxRuntimePackage>;

/**
 * The packages' own dynamic imports. onnxruntime-node loads its native binding while being imported, so a
 * platform without a prebuilt binary, or Deno without --allow-ffi, fails here rather than at the first run.
 */
export const importOnnxPackage: OnnxPackageLoader = (provider) => (provider === "onnxruntime-node" ? import("onnxruntime-node") : import("onnxruntime-web"));

export interface OnnxProviderOptions {
  /** Which package runs the sessions; "auto" takes the first of AUTO_PROVIDER_ORDER that loads. Default "auto". */
  provider?: CpuProviderChoice;
  loader?: OnnxPackageLoader;
}

/** A session together with the provider that made it and that provider's Tensor class. */
export type OnnxSession = ort.InferenceSession & {
  readonly provider: CpuProvider;
  readonly Tensor: typeof ort.Tensor;
};

export interface OnnxRuntimeOptions {
  /** Intra-op threads: onnxruntime-web runs workers beyond 1 (needs SharedArrayBuffer). Default 1. */
  threads?: number;
}

let configuredThreads: number | undefined;

/**
 * Sets the process-wide thread count. onnxruntime-web reads it once, when the first session initialises
 * its wasm backend, so a later call with a different count is an error rather than silently ignored.
 */
export function configureOnnxRuntime(options: OnnxRuntimeOptions = {}): void {
  const threads = options.threads ?? 1;
  if (!Number.isInteger(threads) || threads < 1) throw new RangeError(`onnxruntime threads must be a positive integer, got ${threads}`);
  if (configuredThreads !== undefined) {
    if (configuredThreads !== threads) throw new Error(`onnxruntime is already configured with ${configuredThreads} thread(s); it cannot switch to ${threads}`);
    return;
  }
  configuredThreads = threads;
}

/** A loaded provider: its package, ready to create sessions. */
export interface OnnxRuntime {
  readonly provider: CpuProvider;
  /** `model`: the file's bytes, already read (and possibly rewritten); `path` then only names it. */
  createSession(path: string, model?: Uint8Array): Promise<OnnxSession>;
}

/**
 * Loads the chosen provider's package. An explicit provider that fails to load is an error; "auto" tries
 * the faster provider, then the other, and reports both failures if neither loads.
 */
export async function loadOnnxRuntime(options: OnnxProviderOptions = {}): Promise<OnnxRuntime> {
  const choice = options.provider ?? "auto";
  const loader = options.loader ?? importOnnxPackage;
  const candidates = choice === "auto" ? AUTO_PROVIDER_ORDER : [choice];
  const failures: string[] = [];
  for (const provider of candidates) {
    let ortPackage: OnnxRuntimePackage;
    try {
      ortPackage = await loader(provider);
    } catch (error) {
      failures.push(`${provider}: ${(error as Error).message}`);
      continue;
    }
    return providerRuntime(provider, ortPackage);
  }
  throw new Error(`onnxruntime could not be loaded (${failures.join("; ")})`);
}

function providerRuntime(provider: CpuProvider, ortPackage: OnnxRuntimePackage): OnnxRuntime {
  if (configuredThreads === undefined) configureOnnxRuntime();
  const threads = configuredThreads!;
  const Tensor = ortPackage.Tensor;
  if (provider === "onnxruntime-web") {
    ortPackage.env.wasm.numThreads = threads;
    // The .wasm and its loader .mjs sit beside the package entry point; pointing there keeps every load
    // local (no CDN fetch) in any runtime.
    ortPackage.env.wasm.wasmPaths = new URL(".", import.meta.resolve("onnxruntime-web")).href;
  }
  const sessionOptions: ort.InferenceSession.SessionOptions =
    provider === "onnxruntime-web"
      ? { executionProviders: ["wasm"], graphOptimizationLevel: "all" }
      : { executionProviders: ["cpu"], graphOptimizationLevel: "all", intraOpNumThreads: threads };
  return {
    provider,
    async createSession(path, model) {
      try {
        // onnxruntime-node reads the file natively; onnxruntime-web takes bytes in every runtime.
        const session =
          provider === "onnxruntime-node" && !model
            ? await ortPackage.InferenceSession.create(path, sessionOptions)
            : await ortPackage.InferenceSession.create(model ?? (await readFile(path)), sessionOptions);
        return Object.assign(session, { provider, Tensor });
      } catch (error) {
        throw new Error(`${provider} could not load ${path}: ${(error as Error).message}`, { cause: error });
      }
    },
  };
}

/** Creates a CPU session from a file on the chosen provider. */
export async function createOnnxSession(path: string, options: OnnxProviderOptions = {}): Promise<OnnxSession> {
  return (await loadOnnxRuntime(options)).createSession(path);
}

/** One session per graph of a bundle; shared by all requests (sessions hold no per-request state). */
export interface PocketSessions {
  /** The package every session below was made by. */
  provider: CpuProvider;
  textConditioner: OnnxSession;
  voiceEncoder: OnnxSession | null;
  flowLmMain: OnnxSession;
  /** How flow_lm_main's cache outputs are rebuilt on our side (cache-writes.ts); empty: fetched whole. */
  flowLmCacheWrites: CacheWritePlan[];
  /** flow_lm_main's inputs declared with a symbolic positions axis (cache-writes.ts). */
  flowLmWindowedInputs: string[];
  flowLmFlow: OnnxSession;
  mimiDecoder: OnnxSession;
  mimiCacheWrites: CacheWritePlan[];
}

export async function openPocketSessions(bundle: PocketBundle, options: OnnxProviderOptions = {}): Promise<PocketSessions> {
  const runtime = await loadOnnxRuntime(options);
  const { graphs } = bundle;
  const [textConditioner, voiceEncoder, flowLm, flowLmFlow, mimi] = await Promise.all([
    runtime.createSession(graphs.textConditioner.path),
    graphs.voiceEncoder ? runtime.createSession(graphs.voiceEncoder.path) : Promise.resolve(null),
    createCacheWritingSession(runtime, graphs.flowLmMain.path, bundle.flowLmStateManifest, { positionsAxis: FLOW_LM_POSITIONS_AXIS }),
    runtime.createSession(graphs.flowLmFlow.path),
    createCacheWritingSession(runtime, graphs.mimiDecoder.path, bundle.mimiStateManifest),
  ]);
  return {
    provider: runtime.provider,
    textConditioner,
    voiceEncoder,
    flowLmMain: flowLm.session,
    flowLmCacheWrites: flowLm.cacheWrites,
    flowLmWindowedInputs: flowLm.windowed,
    flowLmFlow,
    mimiDecoder: mimi.session,
    mimiCacheWrites: mimi.cacheWrites,
  };
}

/**
 * A session of a stateful graph whose float KV caches are rebuilt on our side when the graph writes them
 * with ScatterND (cache-writes.ts); other graphs load unchanged.
 */
export async function createCacheWritingSession(
  runtime: OnnxRuntime,
  path: string,
  manifest: readonly StateEntry[],
  options: RewriteOptions = {},
): Promise<{ session: OnnxSession; cacheWrites: CacheWritePlan[]; windowed: string[] }> {
  const model = await readFile(path);
  // Only float caches: the rewritten outputs are declared float, and the small int64 counters cost nothing to fetch.
  const rewritten = rewriteCacheWrites(model, manifest.filter((entry) => entry.dtype === "float32" && entry.key === "cache"), options);
  return { session: await runtime.createSession(path, rewritten?.model ?? model), cacheWrites: rewritten?.plans ?? [], windowed: rewritten?.windowed ?? [] };
}

export async function closePocketSessions(sessions: PocketSessions): Promise<void> {
  const { textConditioner, voiceEncoder, flowLmMain, flowLmFlow, mimiDecoder } = sessions;
  await Promise.all([textConditioner, voiceEncoder, flowLmMain, flowLmFlow, mimiDecoder].map((session) => session?.release()));
}

// ---------------------------------------------------------------------------------------------------
// Declared graph inputs, read from the protobuf without loading the weights

export interface OnnxGraphInput {
  name: string;
  /** ONNX TensorProto.DataType name in lower case: float, int64, bool, … */
  elementType: string;
  /** A number for a fixed dimension, the symbol's name for a symbolic one. */
  dims: (number | string)[];
}

/** onnx.proto TensorProto.DataType values. */
const ELEMENT_TYPES: Readonly<Record<number, string>> = {
  1: "float",
  2: "uint8",
  3: "int8",
  4: "uint16",
  5: "int16",
  6: "int32",
  7: "int64",
  8: "string",
  9: "bool",
  10: "float16",
  11: "double",
  12: "uint32",
  13: "uint64",
  16: "bfloat16",
};

/** Field numbers in onnx.proto. */
const MODEL_GRAPH_FIELD = 7;
const GRAPH_INPUT_FIELD = 11;
const VALUE_INFO_NAME_FIELD = 1;
const VALUE_INFO_TYPE_FIELD = 2;
const TYPE_TENSOR_FIELD = 1;
const TENSOR_TYPE_ELEMENT_FIELD = 1;
const TENSOR_TYPE_SHAPE_FIELD = 2;
const SHAPE_DIM_FIELD = 1;
const DIM_VALUE_FIELD = 1;
const DIM_PARAM_FIELD = 2;

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
export const WIRE_LENGTH_DELIMITED = 2;
const WIRE_FIXED32 = 5;
const READ_WINDOW_BYTES = 1 << 16;

/**
 * The graph's declared inputs (`ModelProto.graph.input`). Initializers (the weights) are skipped by
 * length, so a 1.2 GB graph costs a few small reads per node and weight rather than a full read. The
 * January and sherpa layouts have no manifest, so this is where their state shapes come from (§3.2, §3.4).
 */
export async function readOnnxGraphInputs(path: string): Promise<OnnxGraphInput[]> {
  const handle = await open(path, "r");
  try {
    const reader = new PositionedReader(handle, (await handle.stat()).size);
    const inputs: OnnxGraphInput[] = [];
    for await (const field of reader.fields(0, reader.sizeBytes)) {
      if (field.number !== MODEL_GRAPH_FIELD || field.wireType !== WIRE_LENGTH_DELIMITED) continue;
      for await (const graphField of reader.fields(field.payloadStart, field.next)) {
        if (graphField.number !== GRAPH_INPUT_FIELD || graphField.wireType !== WIRE_LENGTH_DELIMITED) continue;
        inputs.push(parseValueInfo(await reader.bytes(graphField.payloadStart, graphField.next - graphField.payloadStart)));
      }
    }
    if (inputs.length === 0) throw new Error("no graph inputs found");
    return inputs;
  } catch (error) {
    throw new Error(`${path} is not a readable ONNX model: ${(error as Error).message}`, { cause: error });
  } finally {
    await handle.close();
  }
}

/** One protobuf field header: for length-delimited fields the payload is bytes [payloadStart, next). */
interface ProtoField {
  number: number;
  wireType: number;
  /** The value of a varint field. */
  value: number;
  payloadStart: number;
  /** Offset just past the field. */
  next: number;
}

/** Parses the field starting at `offset` of `bytes`; the payload of a length-delimited field may lie beyond `bytes`. */
function readFieldHeader(bytes: Uint8Array, offset: number): ProtoField {
  const tag = readVarint(bytes, offset);
  const field: ProtoField = { number: Math.floor(tag.value / 8), wireType: tag.value % 8, value: 0, payloadStart: tag.next, next: tag.next };
  if (field.wireType === WIRE_VARINT) {
    const varint = readVarint(bytes, tag.next);
    field.value = varint.value;
    field.next = varint.next;
  } else if (field.wireType === WIRE_LENGTH_DELIMITED) {
    const length = readVarint(bytes, tag.next);
    field.payloadStart = length.next;
    field.next = length.next + length.value;
  } else if (field.wireType === WIRE_FIXED64) {
    field.next = tag.next + 8;
  } else if (field.wireType === WIRE_FIXED32) {
    field.next = tag.next + 4;
  } else {
    throw new Error(`unsupported protobuf wire type ${field.wireType}`);
  }
  return field;
}

/** Decodes a varint as a JS number (exact below 2^53, which covers every length and dim here). */
function readVarint(bytes: Uint8Array, offset: number): { value: number; next: number } {
  let value = 0;
  let scale = 1;
  for (let index = offset; index < bytes.length && index < offset + 10; index++) {
    const byte = bytes[index]!;
    value += (byte & 0x7f) * scale;
    scale *= 128;
    if ((byte & 0x80) === 0) return { value, next: index + 1 };
  }
  throw new Error("truncated varint");
}

/** Walks the fields of a message stored in a file, reading only field headers and what the caller asks for. */
class PositionedReader {
  private window = new Uint8Array(0);
  private windowStart = 0;

  constructor(
    private readonly handle: FileHandle,
    readonly sizeBytes: number,
  ) {}

  async bytes(position: number, length: number): Promise<Uint8Array> {
    if (position < this.windowStart || position + length > this.windowStart + this.window.length) {
      const windowBytes = Math.min(Math.max(length, READ_WINDOW_BYTES), this.sizeBytes - position);
      const buffer = new Uint8Array(windowBytes);
      let filled = 0;
      while (filled < windowBytes) {
        const { bytesRead } = await this.handle.read(buffer, filled, windowBytes - filled, position + filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      this.window = buffer.subarray(0, filled);
      this.windowStart = position;
      if (filled < length) throw new Error(`file ends at byte ${position + filled}, needed ${position + length}`);
    }
    return this.window.subarray(position - this.windowStart, position - this.windowStart + length);
  }

  /** Fields of the message occupying [start, end) of the file, with absolute offsets. */
  async *fields(start: number, end: number): AsyncGenerator<ProtoField> {
    let position = start;
    while (position < end) {
      // A tag and a length are at most 10 bytes each.
      const field = readFieldHeader(await this.bytes(position, Math.min(20, end - position)), 0);
      const absolute = { ...field, payloadStart: position + field.payloadStart, next: position + field.next };
      if (absolute.next > end) throw new Error(`field ${field.number} at byte ${position} runs past its parent's end ${end}`);
      position = absolute.next;
      yield absolute;
    }
  }
}

/** Fields of a message held in memory, each with its payload and the offset of its tag (`start`). */
export function* messageFields(bytes: Uint8Array): Generator<ProtoField & { payload: Uint8Array; start: number }> {
  let position = 0;
  while (position < bytes.length) {
    const field = readFieldHeader(bytes, position);
    if (field.next > bytes.length) throw new Error(`field ${field.number} runs past the end of its message`);
    yield { ...field, payload: bytes.subarray(field.payloadStart, field.next), start: position };
    position = field.next;
  }
}

function parseValueInfo(bytes: Uint8Array): OnnxGraphInput {
  const input: OnnxGraphInput = { name: "", elementType: "undefined", dims: [] };
  const text = new TextDecoder();
  for (const field of messageFields(bytes)) {
    if (field.number === VALUE_INFO_NAME_FIELD) input.name = text.decode(field.payload);
    if (field.number !== VALUE_INFO_TYPE_FIELD) continue;
    for (const typeField of messageFields(field.payload)) {
      if (typeField.number !== TYPE_TENSOR_FIELD) continue;
      for (const tensorField of messageFields(typeField.payload)) {
        if (tensorField.number === TENSOR_TYPE_ELEMENT_FIELD) input.elementType = ELEMENT_TYPES[tensorField.value] ?? `type${tensorField.value}`;
        if (tensorField.number !== TENSOR_TYPE_SHAPE_FIELD) continue;
        for (const dimField of messageFields(tensorField.payload)) {
          if (dimField.number !== SHAPE_DIM_FIELD) continue;
          let dim: number | string = "?";
          for (const valueField of messageFields(dimField.payload)) {
            if (valueField.number === DIM_VALUE_FIELD) dim = valueField.value;
            if (valueField.number === DIM_PARAM_FIELD) dim = text.decode(valueField.payload);
          }
          input.dims.push(dim);
        }
      }
    }
  }
  return input;
}
