/** Mimi decoder on ONNX (docs/pocket-tts.md §1.3, §3.1): latents [1, n, 32] ─▶ 1920·n samples, the state a value of the request. */
import { readFile } from "node:fs/promises";
import type { StateEntry } from "../bundle/pocket-bundle.ts";
import type { CacheWritePlan } from "../../../onnx/cache-writes.ts";
import { dropPassThroughStates } from "../../../onnx/pass-through-states.ts";
import { resizeRingCaches } from "../../../onnx/ring-caches.ts";
import { operatorsOf } from "../../../onnx/proto.ts";
import type { OnnxRuntime, OnnxSession, SessionChoices } from "../../../onnx/runtime.ts";
import { type MimiState, StateOutputs, float32Output, initialStateTensors, stateFeeds } from "./state.ts";
import type { StepOptions } from "./state.ts";

export interface MimiDecoderConfig {
  latentDim: number;
  samplesPerFrame: number;
}

/** Positions the Mimi transformer attends over (docs/pocket-tts.md §1.4: 250 at 200 Hz). */
export const MIMI_CONTEXT_POSITIONS = 250;
/**
 * The decoder's ring when it can be resized (ring-caches.ts). Exports write a call's new keys into the ring
 * before attending over it, so the ring must hold the context behind a call's first position plus all the
 * positions the call writes: 250 + 16 · 8 latents (the largest decode the runner sends) fits in 384.
 */
export const MIMI_RING_POSITIONS = 384;
/** Mimi transformer positions per latent (200 Hz over 12.5 Hz). */
const POSITIONS_PER_LATENT = 16;
/** The axis of the decoder's KV caches ([2, 1, H, T, Dh]) that holds positions (§3.1). */
const MIMI_CACHE_POSITIONS_AXIS = 3;

/**
 * What generation and conformance need of a Mimi decoder, whichever runs it: this module's MimiDecoder
 * (in-process), WorkerMimiDecoder (decoder/worker-client.ts) or our WGSL kernels (src/models/pocket/mimi-wgsl/decoder.ts).
 * Normalised latents [n, latentDim] → 1920·n samples; any split into calls gives the same audio.
 */
export interface LatentDecoder<State> {
  readonly config: MimiDecoderConfig;
  /**
   * True when a decode runs off the JS thread (a worker, a GPU), so it can overlap the sampling of the next
   * latents (runner.ts `decodesOverlap`); in-process runs of either onnxruntime package block the thread
   * (onnxruntime-web also refuses a second run while one is in progress), so there latents are sampled and
   * decoded in turn.
   */
  readonly concurrent: boolean;
  emptyState(): State;
  decode(state: State, latents: Float32Array, options?: StepOptions): Promise<{ state: State; audio: Float32Array }>;
  /** Frees a state the caller is done with, where states hold resources beyond memory it owns. */
  release?(state: State): void;
}

export class MimiDecoder implements LatentDecoder<MimiState> {
  private readonly states: StateOutputs;
  /** Runs block the JS thread (see LatentDecoder.concurrent). */
  readonly concurrent: boolean = false;
  /**
   * Latents one graph run takes: a run writes 16 positions a latent into the ring before attending over it,
   * so a run of more than (ring − context) / 16 latents would overwrite keys its own first queries still see.
   * Longer inputs are split into runs (any split gives the same audio).
   */
  readonly #latentsPerRun: number;

  constructor(
    private readonly session: OnnxSession,
    readonly manifest: readonly StateEntry[],
    readonly config: MimiDecoderConfig,
    cacheWrites: readonly CacheWritePlan[] = [],
  ) {
    this.states = new StateOutputs(session, manifest, cacheWrites, "mimi_decoder");
    const ring = manifest.find((entry) => entry.key === "cache" && entry.shape.length === 5)?.shape[MIMI_CACHE_POSITIONS_AXIS];
    this.#latentsPerRun = ring === undefined ? Infinity : Math.max(1, Math.floor((ring - MIMI_CONTEXT_POSITIONS) / POSITIONS_PER_LATENT));
  }

  /** Releases the session; the decoder is unusable after. */
  close(): Promise<void> {
    return this.session.release();
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
    if (frames <= this.#latentsPerRun) return this.#run(state, latents, frames, options);
    const audio = new Float32Array(frames * this.config.samplesPerFrame);
    let current = state;
    for (let first = 0; first < frames; first += this.#latentsPerRun) {
      const count = Math.min(this.#latentsPerRun, frames - first);
      const part = await this.#run(current, latents.subarray(first * this.config.latentDim, (first + count) * this.config.latentDim), count, options);
      audio.set(part.audio, first * this.config.samplesPerFrame);
      current = part.state;
    }
    return { state: current, audio };
  }

  async #run(state: MimiState, latents: Float32Array, frames: number, options: StepOptions): Promise<{ state: MimiState; audio: Float32Array }> {
    const outputs = await this.session.run(stateFeeds(this.manifest, state, { latent: new this.session.Tensor("float32", latents, [1, frames, this.config.latentDim]) }), this.states.fetches);
    const audio = float32Output(outputs, "audio_frame", "mimi_decoder").data;
    if (audio.length !== frames * this.config.samplesPerFrame) throw new Error(`mimi_decoder returned ${audio.length} samples for ${frames} latents`);
    return { state: { tensors: this.states.next(state, outputs, options), frames: state.frames + frames }, audio };
  }
}

/** Largest difference a resized ring may make, relative to the largest sample (the order keys are summed in changes). */
export const RING_RESIZE_TOLERANCE = 1e-5;
/**
 * The same for a graph that quantizes its activations as it runs (DynamicQuantizeLinear): there a last-bit
 * difference can move a value across a rounding step. Measured on the real-size int8 bundle's decoder: the
 * resized ring 1.2e-4 from the export's, where the int8 graph itself is 1.8e-2 from the fp32 one.
 */
export const QUANTIZED_RING_RESIZE_TOLERANCE = 1e-3;
/** Operators of a graph that quantizes activations at run time (the int8 exports, shared/tools/quantize_int8.py). */
const RUN_TIME_QUANTIZATION = new Set(["DynamicQuantizeLinear", "MatMulInteger", "ConvInteger"]);
/** Latents per run of the probe: 40 latents are 640 positions, so the resized ring wraps once the context is in it. */
const RING_PROBE_RUNS = [1, 2, 4, 8, 8, 8, 8, 1];

/** The ring the decoder session runs with: resized, and how far the probe's audio differed, or the export's, and why. */
export type MimiRing = { positions: number; relativeDifference: number } | { positions: number; reason: string };

export interface OpenedMimiDecoder {
  session: OnnxSession;
  /** The states the session keeps, their shapes as the session takes them. */
  manifest: StateEntry[];
  ring: MimiRing;
}

/**
 * A session of mimi_decoder.onnx without the states it only hands back (the encoder's, onnx/pass-through-
 * states.ts), its transformer's KV rings resized to MIMI_RING_POSITIONS (onnx/ring-caches.ts) where the
 * graph allows it, the session runs on onnxruntime-node's CPU EP (where states are this process's memory)
 * and a probe decoded through both graphs agrees within RING_RESIZE_TOLERANCE (QUANTIZED_RING_RESIZE_TOLERANCE
 * for an int8 graph), and the manifest of the
 * states it keeps: what MimiDecoder is built on. A stream's decoder state is then 3.0 MiB instead of 8.3 at
 * full size.
 */
export async function openMimiDecoderSession(runtime: OnnxRuntime, path: string, manifest: readonly StateEntry[], config: MimiDecoderConfig, choices?: SessionChoices): Promise<OpenedMimiDecoder> {
  const model = new Uint8Array(await readFile(path));
  const dropped = dropPassThroughStates(model, manifest);
  const kept = dropped ? manifest.filter((entry) => !dropped.removed.has(entry.inputName)) : [...manifest];
  const graph = dropped?.model ?? model;
  const caches = kept.filter((entry) => entry.key === "cache" && entry.shape.length === 5);
  const exportedPositions = caches[0]?.shape[MIMI_CACHE_POSITIONS_AXIS];
  const published = await runtime.createSession(path, graph, choices);
  const keepPublished = (reason: string): OpenedMimiDecoder => ({ session: published, manifest: kept, ring: { positions: exportedPositions ?? 0, reason } });
  if (exportedPositions === undefined) return keepPublished("the decoder has no transformer KV cache");
  // The states live in this process's memory only on onnxruntime-node's CPU EP; on a WebGPU device they are
  // the device's, and a software adapter takes seconds for the probe.
  if (runtime.provider !== "onnxruntime-node" || runtime.executionProvider !== "cpu") return keepPublished(`the ring is resized only on onnxruntime-node's CPU EP, not ${runtime.provider} (${runtime.executionProvider})`);
  if (exportedPositions <= MIMI_RING_POSITIONS) return keepPublished(`the export's ring of ${exportedPositions} positions is already small`);
  const resizedGraph = resizeRingCaches(graph, caches, { positionsAxis: MIMI_CACHE_POSITIONS_AXIS, exportedPositions, positions: MIMI_RING_POSITIONS });
  if (!resizedGraph) return keepPublished("the graph's ring arithmetic is not one the rewrite knows");
  const resizedManifest = kept.map((entry) => (caches.includes(entry) ? { ...entry, shape: entry.shape.map((dim, axis) => (axis === MIMI_CACHE_POSITIONS_AXIS ? MIMI_RING_POSITIONS : dim)) } : entry));
  let resized: OnnxSession | undefined;
  try {
    resized = await runtime.createSession(path, resizedGraph, choices);
    const relativeDifference = await probeDifference(new MimiDecoder(published, kept, config), new MimiDecoder(resized, resizedManifest, config), config.latentDim);
    const tolerance = [...operatorsOf(graph)].some((op) => RUN_TIME_QUANTIZATION.has(op)) ? QUANTIZED_RING_RESIZE_TOLERANCE : RING_RESIZE_TOLERANCE;
    if (!(relativeDifference <= tolerance)) {
      await resized.release();
      return keepPublished(`a ring of ${MIMI_RING_POSITIONS} positions changed the probe's audio by ${relativeDifference.toExponential(2)} (relative)`);
    }
    await published.release();
    return { session: resized, manifest: resizedManifest, ring: { positions: MIMI_RING_POSITIONS, relativeDifference } };
  } catch (error) {
    await resized?.release();
    return keepPublished(`a ring of ${MIMI_RING_POSITIONS} positions failed: ${(error as Error).message}`);
  }
}

/** The largest difference between two decoders' audio for the same latents, relative to the largest sample. */
async function probeDifference(expected: MimiDecoder, actual: MimiDecoder, latentDim: number): Promise<number> {
  let [expectedState, actualState] = [expected.emptyState(), actual.emptyState()];
  let [difference, scale, first] = [0, 0, 0];
  for (const latents of RING_PROBE_RUNS) {
    const input = Float32Array.from({ length: latents * latentDim }, (_, index) => Math.sin((first * latentDim + index) * 0.37) * 0.9);
    const [want, got] = [await expected.decode(expectedState, input), await actual.decode(actualState, input)];
    [expectedState, actualState] = [want.state, got.state];
    for (let sample = 0; sample < want.audio.length; sample++) {
      scale = Math.max(scale, Math.abs(want.audio[sample]!));
      difference = Math.max(difference, Math.abs(want.audio[sample]! - got.audio[sample]!));
    }
    first += latents;
  }
  return scale === 0 ? difference : difference / scale;
}
