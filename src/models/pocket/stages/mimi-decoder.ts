/** Mimi decoder on ONNX (docs/pocket-tts.md §1.3, §3.1): latents [1, n, 32] ─▶ 1920·n samples, the state a value of the request. */
import { readFile } from "node:fs/promises";
import type { StateEntry } from "../bundle/pocket-bundle.ts";
import type { CacheWritePlan } from "../../../onnx/cache-writes.ts";
import { dropPassThroughStates } from "../../../onnx/pass-through-states.ts";
import type { OnnxRuntime, OnnxSession, SessionChoices } from "../../../onnx/runtime.ts";
import { type MimiState, StateOutputs, float32Output, initialStateTensors, stateFeeds } from "./state.ts";
import type { StepOptions } from "./state.ts";

export interface MimiDecoderConfig {
  latentDim: number;
  samplesPerFrame: number;
}

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

  constructor(
    private readonly session: OnnxSession,
    readonly manifest: readonly StateEntry[],
    readonly config: MimiDecoderConfig,
    cacheWrites: readonly CacheWritePlan[] = [],
  ) {
    this.states = new StateOutputs(session, manifest, cacheWrites, "mimi_decoder");
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
    const outputs = await this.session.run(stateFeeds(this.manifest, state, { latent: new this.session.Tensor("float32", latents, [1, frames, this.config.latentDim]) }), this.states.fetches);
    const audio = float32Output(outputs, "audio_frame", "mimi_decoder").data;
    if (audio.length !== frames * this.config.samplesPerFrame) throw new Error(`mimi_decoder returned ${audio.length} samples for ${frames} latents`);
    return { state: { tensors: this.states.next(state, outputs, options), frames: state.frames + frames }, audio };
  }
}

/**
 * A session of mimi_decoder.onnx without the states it only hands back (the encoder's, onnx/pass-through-
 * states.ts), and the manifest of the states it keeps: what MimiDecoder is built on.
 */
export async function openMimiDecoderSession(runtime: OnnxRuntime, path: string, manifest: readonly StateEntry[], choices?: SessionChoices): Promise<{ session: OnnxSession; manifest: StateEntry[] }> {
  const model = new Uint8Array(await readFile(path));
  const rewritten = dropPassThroughStates(model, manifest);
  return {
    session: await runtime.createSession(path, rewritten?.model ?? model, choices),
    manifest: rewritten ? manifest.filter((entry) => !rewritten.removed.has(entry.inputName)) : [...manifest],
  };
}
