/**
 * The Pocket TTS model stages over onnxruntime sessions of either CPU provider (onnx.ts), docs/pocket-tts.md
 * §2, §3.1:
 *
 *   token ids ─ TextConditioner ─▶ text conditioning [1, n, D]
 *   24 kHz audio ─ VoiceEncoder ─▶ voice conditioning [1, T(+1), D] ─ FlowLm.prefill ─▶ voice state
 *   FlowLm.step (state, latent | BOS) ─▶ c [D], EOS logit ─ FlowHead.sample (LSD) ─▶ latent [32]
 *   MimiDecoder (state, latents [1, n, 32]) ─▶ 1920·n samples
 *
 * D is the FlowLM width (1024 released). Stage objects hold only their session and constants, so one set
 * serves every request. Model states (`FlowLmState`, `MimiState`) are values owned by the request: each
 * call returns a new state and leaves its input as it was, so a cached voice state is reused by every
 * chunk without a copy; the one exception is a FlowLM call told `reuseState` by a caller that drops its
 * input state (the generation loop), which then updates the KV caches in place (cache-writes.ts). Tensors are
 * built with the session's own `Tensor` class, never a statically imported one (see onnx.ts).
 */
import type * as ort from "onnxruntime-web";
import { decodeSafetensorsWithInt64, type DecodedTensor, type PocketBundle, type StateEntry } from "./bundle.ts";
import { applyScatterND, type CacheWritePlan } from "../../onnx/cache-writes.ts";
import type { OnnxSession } from "../../onnx/runtime.ts";
import { FLOW_LM_POSITIONS_AXIS, type PocketSessions } from "./sessions.ts";

/** A float32 tensor crossing a stage boundary: `data` in row-major order of `dims`. */
export interface Float32Tensor {
  data: Float32Array;
  dims: readonly number[];
}

/** The state tensors of a stateful graph, in manifest order. */
interface StateTensors {
  readonly tensors: readonly ort.Tensor[];
}

/** FlowLM KV caches and step counters after `positions` conditioning and latent positions (§2.2 table). */
export interface FlowLmState extends StateTensors {
  readonly positions: number;
}

/** Mimi decoder streaming state (§1.3); fresh for every text chunk (§6.13). */
export interface MimiState extends StateTensors {
  /** Latent frames decoded since the state was fresh. */
  readonly frames: number;
}

/**
 * Builds the initial state of a manifest; `cacheRows`, if given, replaces the positions axis of the FlowLM
 * caches (windowed caches, FlowLm).
 */
function initialStateTensors(manifest: readonly StateEntry[], Tensor: typeof ort.Tensor, cacheRows?: number): ort.Tensor[] {
  return manifest.map((entry) => {
    const shape = [...entry.shape];
    if (cacheRows !== undefined && entry.key === "cache" && shape.length === 5) shape[2] = cacheRows;
    const elementCount = shape.reduce((product, dim) => product * dim, 1);
    // `mixed` (a tensor whose exporter-time values were not uniform) starts at zeros: zeros are
    // equivalent to every documented fill (NaN caches, `first` = true flags) for these graphs (§3.1 [RUN]).
    const one = entry.fill === "ones";
    switch (entry.dtype) {
      case "float32":
        return new Tensor("float32", new Float32Array(elementCount).fill(entry.fill === "nan" ? NaN : one ? 1 : 0), shape);
      case "int64":
        return new Tensor("int64", new BigInt64Array(elementCount).fill(one ? 1n : 0n), shape);
      case "bool":
        return new Tensor("bool", new Uint8Array(elementCount).fill(one ? 1 : 0), shape);
    }
  });
}

function stateFeeds(manifest: readonly StateEntry[], state: StateTensors, feeds: Record<string, ort.Tensor>): Record<string, ort.Tensor> {
  manifest.forEach((entry, index) => {
    feeds[entry.inputName] = state.tensors[index]!;
  });
  return feeds;
}

/**
 * The next state of a stateful graph from one run's outputs: each state output is taken as returned, or,
 * for a cache the graph writes with ScatterND (cache-writes.ts), rebuilt from the input cache and the
 * graph's writes, copied first unless the caller gives up the input state (`reuseState`).
 */
class StateOutputs {
  /** Per manifest entry: how its output is rebuilt, or undefined: fetched whole. */
  private readonly plans: (CacheWritePlan | undefined)[];
  /** Everything the graph returns but the rebuilt caches. */
  readonly fetches: string[];

  constructor(
    private readonly session: OnnxSession,
    private readonly manifest: readonly StateEntry[],
    cacheWrites: readonly CacheWritePlan[],
    private readonly graph: string,
  ) {
    this.plans = manifest.map((entry) => (entry.dtype === "float32" ? cacheWrites.find((plan) => plan.outputName === entry.outputName) : undefined));
    const rebuilt = new Set(this.plans.flatMap((plan) => (plan ? [plan.outputName] : [])));
    this.fetches = session.outputNames.filter((name) => !rebuilt.has(name));
  }

  next(state: StateTensors, outputs: ort.InferenceSession.ReturnType, options: StepOptions): ort.Tensor[] {
    return this.manifest.map((entry, index) => {
      const plan = this.plans[index];
      if (!plan) return requiredOutput(outputs, entry.outputName, this.graph);
      const input = state.tensors[index]!;
      const cache = options.reuseState ? (input.data as Float32Array) : new Float32Array(input.data as Float32Array);
      for (const write of plan.writes) {
        const indices = requiredOutput(outputs, write.indices, this.graph);
        const updates = requiredOutput(outputs, write.updates, this.graph);
        applyScatterND(cache, input.dims, indices.data as BigInt64Array, indices.dims, updates.data as Float32Array);
      }
      return options.reuseState ? input : new this.session.Tensor("float32", cache, [...input.dims]);
    });
  }
}

function requiredOutput(outputs: ort.InferenceSession.ReturnType, name: string, graph: string): ort.Tensor {
  const tensor = outputs[name];
  if (!tensor) throw new Error(`${graph} returned no ${name}`);
  return tensor;
}

function float32Output(outputs: ort.InferenceSession.ReturnType, name: string, graph: string): Float32Tensor {
  const tensor = outputs[name];
  if (!tensor || tensor.type !== "float32") throw new Error(`${graph} returned no float32 '${name}'`);
  return { data: tensor.data as Float32Array, dims: tensor.dims };
}

// ---------------------------------------------------------------------------------------------------
// Text conditioner (§1.8, §3.1)

export class TextConditioner {
  constructor(
    private readonly session: OnnxSession,
    private readonly conditioningDim: number,
  ) {}

  /** Token ids (no BOS/EOS, §1.8) → conditioning rows [1, n, D]: raw embedding rows, no projection. */
  async embed(tokenIds: readonly number[]): Promise<Float32Tensor> {
    const ids = BigInt64Array.from(tokenIds, (id) => BigInt(id));
    const outputs = await this.session.run({ token_ids: new this.session.Tensor("int64", ids, [1, ids.length]) });
    const embeddings = float32Output(outputs, "embeddings", "text_conditioner");
    if (embeddings.data.length !== tokenIds.length * this.conditioningDim) throw new Error(`text_conditioner returned [${embeddings.dims.join(", ")}], expected [1, ${tokenIds.length}, ${this.conditioningDim}]`);
    return embeddings;
  }
}

// ---------------------------------------------------------------------------------------------------
// Voice encoder (§1.2, §2.1, §3.1)

export interface VoiceEncoderConfig {
  samplesPerFrame: number;
  conditioningDim: number;
  /** `flow_lm.bos_before_voice` [D] for v2 models, null for v1. */
  bosBeforeVoice: Float32Array | null;
}

/** Largest |Δ| at which the encoder's row 0 counts as the stored BOS: it is a copy, so only rounding may differ. */
const BOS_MATCH_TOLERANCE = 1e-6;

export class VoiceEncoder {
  private constructor(
    private readonly session: OnnxSession,
    private readonly config: VoiceEncoderConfig,
    /** Whether the graph emits `bos_before_voice` as row 0 itself (the LM v2 wrapper) or not (KR2 prepends it). */
    readonly bosBakedIn: boolean,
  ) {}

  /**
   * Probes the graph once with one silent frame (fixture README "BOS detection recipe", §3.1): k+1 rows
   * with row 0 equal to `bos_before_voice` mean the BOS is baked in; k rows mean it must be prepended.
   */
  static async create(session: OnnxSession, config: VoiceEncoderConfig): Promise<VoiceEncoder> {
    const probe = await runEncoder(session, new Float32Array(config.samplesPerFrame), config.conditioningDim);
    const rows = probe.dims[1]!;
    if (rows === 1) return new VoiceEncoder(session, config, false);
    const bos = config.bosBeforeVoice;
    if (rows === 2 && bos) {
      let maxAbsDifference = 0;
      for (let index = 0; index < bos.length; index++) maxAbsDifference = Math.max(maxAbsDifference, Math.abs(probe.data[index]! - bos[index]!));
      if (maxAbsDifference <= BOS_MATCH_TOLERANCE) return new VoiceEncoder(session, config, true);
      throw new Error(`mimi_encoder emits 2 rows for 1 frame, but row 0 differs from bos_before_voice by up to ${maxAbsDifference}`);
    }
    throw new Error(`mimi_encoder emits ${rows} rows for 1 frame${bos ? "" : " and the bundle has no bos_before_voice"}; expected 1${bos ? " or 2" : ""}`);
  }

  /**
   * 24 kHz mono samples → voice conditioning [1, T (+1 with the v2 BOS), D], T = ceil(N / 1920), ready
   * for `FlowLm.prefill`. The audio is zero-padded to a multiple of 1920 here because published encoders
   * may have the padding frozen to the trace length (§3.1).
   */
  async encode(samples: Float32Array): Promise<Float32Tensor> {
    if (samples.length === 0) throw new RangeError("voice audio is empty");
    const frames = Math.ceil(samples.length / this.config.samplesPerFrame);
    const padded = new Float32Array(frames * this.config.samplesPerFrame);
    padded.set(samples);
    const encoded = await runEncoder(this.session, padded, this.config.conditioningDim);
    const expectedRows = this.bosBakedIn ? frames + 1 : frames;
    if (encoded.dims[1] !== expectedRows) throw new Error(`mimi_encoder returned ${encoded.dims[1]} rows for ${frames} frames, expected ${expectedRows}`);
    const bos = this.config.bosBeforeVoice;
    if (this.bosBakedIn || !bos) return encoded;
    // v2 inserts the learned BOS before the voice tokens only (§2.1 step 4, §6.4).
    const withBos = new Float32Array(bos.length + encoded.data.length);
    withBos.set(bos);
    withBos.set(encoded.data, bos.length);
    return { data: withBos, dims: [1, frames + 1, this.config.conditioningDim] };
  }
}

async function runEncoder(session: OnnxSession, padded: Float32Array, conditioningDim: number): Promise<Float32Tensor> {
  const outputs = await session.run({ audio: new session.Tensor("float32", padded, [1, 1, padded.length]) });
  const name = session.outputNames[0]!;
  const latents = float32Output(outputs, name, "mimi_encoder");
  if (latents.dims.length !== 3 || latents.dims[2] !== conditioningDim) throw new Error(`mimi_encoder returned [${latents.dims.join(", ")}], expected [1, T, ${conditioningDim}]`);
  return latents;
}

// ---------------------------------------------------------------------------------------------------
// FlowLM backbone (§1.7, §2.2, §3.1)

export interface FlowLmConfig {
  latentDim: number;
  conditioningDim: number;
  /** Static KV cache length (1000): the slice-assign write is unguarded in the graph (§3.1, §6.10). */
  cachePositions: number;
}

export interface StepOptions {
  /**
   * The caller never uses the input state again, so its KV caches are updated in place instead of copied
   * (the generation loop's own state; never a cached voice state, which every chunk starts from).
   */
  reuseState?: boolean;
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

// ---------------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------------
// Flow head and LSD decode (§1.10, §1.11)

export interface FlowHeadConfig {
  latentDim: number;
  conditioningDim: number;
}

/** One Euler sub-step as seen by the flow head, for tracing against golden values. */
export interface LsdSubstep {
  /** x fed to the flow head [latentDim]. */
  xIn: Float32Array;
  /** flow_dir it returned [latentDim]. */
  flowDirection: Float32Array;
}

export class FlowHead {
  constructor(
    private readonly session: OnnxSession,
    private readonly config: FlowHeadConfig,
  ) {}

  /** flow_dir [B, latentDim] = flow_net(c [B, D], s [B], t [B], x [B, latentDim]). */
  async velocity(c: Float32Array, s: Float32Array, t: Float32Array, x: Float32Array): Promise<Float32Array> {
    const batch = s.length;
    if (c.length !== batch * this.config.conditioningDim || t.length !== batch || x.length !== batch * this.config.latentDim) {
      throw new Error(`flow head inputs disagree on the batch of ${batch}`);
    }
    const outputs = await this.session.run({
      c: new this.session.Tensor("float32", c, [batch, this.config.conditioningDim]),
      s: new this.session.Tensor("float32", s, [batch, 1]),
      t: new this.session.Tensor("float32", t, [batch, 1]),
      x: new this.session.Tensor("float32", x, [batch, this.config.latentDim]),
    });
    return float32Output(outputs, "flow_dir", "flow_lm_flow").data;
  }

  /**
   * LSD decode (§1.11): from x0 = √temperature · z, for i in 0..N−1 with s = i/N and t = (i+1)/N,
   * x += flow_net(c, s, t, x) / N. Float32Array stores round each operation to float32 as PyTorch does.
   * Returns the normalised latent [latentDim]; `x0` is not modified.
   */
  async sample(conditioning: Float32Array, x0: Float32Array, lsdSteps: number, onSubstep?: (substep: LsdSubstep) => void): Promise<Float32Array> {
    if (!Number.isInteger(lsdSteps) || lsdSteps < 1) throw new RangeError(`lsd_steps must be a positive integer, got ${lsdSteps}`);
    const x = Float32Array.from(x0);
    for (let index = 0; index < lsdSteps; index++) {
      const s = Float32Array.of(index / lsdSteps);
      const t = Float32Array.of((index + 1) / lsdSteps);
      const xIn = Float32Array.from(x);
      const direction = await this.velocity(conditioning, s, t, xIn);
      onSubstep?.({ xIn, flowDirection: direction });
      for (let channel = 0; channel < x.length; channel++) x[channel] = x[channel]! + Math.fround(direction[channel]! / lsdSteps);
    }
    return x;
  }
}

// ---------------------------------------------------------------------------------------------------
// Mimi decoder, ONNX (§1.3, §3.1)

export interface MimiDecoderConfig {
  latentDim: number;
  samplesPerFrame: number;
}

/**
 * What generation and conformance need of a Mimi decoder, whichever runs it: this module's MimiDecoder
 * (in-process), WorkerMimiDecoder (worker-decoder.ts) or our WGSL kernels (src/models/pocket/mimi-wgsl/decoder.ts).
 * Normalised latents [n, latentDim] → 1920·n samples; any split into calls gives the same audio.
 */
export interface LatentDecoder<State> {
  readonly config: MimiDecoderConfig;
  /** Whether a decode leaves the JS thread, so it can overlap sampling (generation.ts). */
  readonly concurrent: boolean;
  emptyState(): State;
  decode(state: State, latents: Float32Array, options?: StepOptions): Promise<{ state: State; audio: Float32Array }>;
  /** Frees a state the caller is done with, where states hold resources beyond memory it owns. */
  release?(state: State): void;
}

export class MimiDecoder implements LatentDecoder<MimiState> {
  private readonly states: StateOutputs;
  /** Runs block the JS thread (see LatentBatchDecoder.concurrent in generation.ts). */
  readonly concurrent: boolean = false;

  constructor(
    private readonly session: OnnxSession,
    readonly manifest: readonly StateEntry[],
    readonly config: MimiDecoderConfig,
    cacheWrites: readonly CacheWritePlan[] = [],
  ) {
    this.states = new StateOutputs(session, manifest, cacheWrites, "mimi_decoder");
  }

  /** A fresh streaming state (manifest fills: `first` flags true, buffers zero, `[1, C, 0]` tensors empty). */
  emptyState(): MimiState {
    return { tensors: initialStateTensors(this.manifest, this.session.Tensor), frames: 0 };
  }

  /**
   * Normalised latents [n, latentDim] (the graph denormalises with emb_std/emb_mean itself, §6.2) →
   * raw float PCM [1920·n], unclamped (§6.17). Any split of a sequence into calls gives the same audio.
   */
  async decode(state: MimiState, latents: Float32Array, options: StepOptions = {}): Promise<{ state: MimiState; audio: Float32Array }> {
    const frames = latents.length / this.config.latentDim;
    if (!Number.isInteger(frames) || frames < 1) throw new Error(`Mimi decoder input has ${latents.length} values, not a positive multiple of ${this.config.latentDim}`);
    const outputs = await this.session.run(stateFeeds(this.manifest, state, { latent: new this.session.Tensor("float32", latents, [1, frames, this.config.latentDim]) }), this.states.fetches);
    const audio = float32Output(outputs, "audio_frame", "mimi_decoder").data;
    if (audio.length !== frames * this.config.samplesPerFrame) throw new Error(`mimi_decoder returned ${audio.length} samples for ${frames} latents`);
    return { state: { tensors: this.states.next(state, outputs, options), frames: state.frames + frames }, audio };
  }
}

// ---------------------------------------------------------------------------------------------------

/** All stages of a bundle, built from its sessions. */
export interface PocketStages {
  textConditioner: TextConditioner;
  voiceEncoder: VoiceEncoder | null;
  flowLm: FlowLm;
  flowHead: FlowHead;
  mimiDecoder: MimiDecoder;
}

export async function createPocketStages(bundle: PocketBundle, sessions: PocketSessions): Promise<PocketStages> {
  const { latentDim, conditioningDim, samplesPerFrame, flowLmCachePositions } = bundle.dims;
  return {
    textConditioner: new TextConditioner(sessions.textConditioner, conditioningDim),
    voiceEncoder: sessions.voiceEncoder ? await VoiceEncoder.create(sessions.voiceEncoder, { samplesPerFrame, conditioningDim, bosBeforeVoice: bundle.bosBeforeVoice }) : null,
    flowLm: await FlowLm.create(sessions.flowLmMain, bundle.flowLmStateManifest, { latentDim, conditioningDim, cachePositions: flowLmCachePositions }, sessions.flowLmCacheWrites, sessions.flowLmWindowedInputs),
    flowHead: new FlowHead(sessions.flowLmFlow, { latentDim, conditioningDim }),
    mimiDecoder: new MimiDecoder(sessions.mimiDecoder, bundle.mimiStateManifest, { latentDim, samplesPerFrame }),
  };
}

/** The voice state for cloning (§2.1 steps 2–6): encode, then prefill an empty FlowLM cache with it. */
export async function voiceStateFromAudio(stages: PocketStages, samples24kHz: Float32Array): Promise<FlowLmState> {
  if (!stages.voiceEncoder) throw new Error("this bundle has no mimi_encoder.onnx, so it cannot clone voices");
  const conditioning = await stages.voiceEncoder.encode(samples24kHz);
  return stages.flowLm.prefill(stages.flowLm.emptyState(), conditioning);
}
