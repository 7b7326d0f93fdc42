/** Voice encoder (docs/pocket-tts.md §1.2, §2.1, §3.1): 24 kHz audio ─▶ voice conditioning [1, T(+1), D]. */
import type { OnnxSession } from "../../../onnx/runtime.ts";
import { type Float32Tensor, float32Output } from "./state.ts";

export interface VoiceEncoderConfig {
  samplesPerFrame: number;
  conditioningDim: number;
  /** `flow_lm.bos_before_voice` [D] for v2 models, null for v1. */
  bosBeforeVoice: Float32Array | null;
}

/**
 * Seconds of reference audio a voice is made from; the rest of a longer clip is left out. sherpa-onnx's Pocket
 * runtime conditions on the first 10 s as well (upstream's own `truncate` cuts at 30 s, our upload maximum).
 * Encoding costs ~0.15 s a second of audio on one core (real-size bundle), and every stream cloned from the
 * voice carries its positions in its FlowLM cache; a 30 s clip took 15 s and 6.8 GB through the whole graph.
 */
export const MAX_VOICE_SECONDS = 10;
/**
 * Frames encoded per run of the graph, and frames of audio before them that each run sees again. The encoder
 * is causal with a finite receptive field: two transformer layers attending 250 steps (1.25 s) back at 200 Hz,
 * behind SEANet's convolutions, ≈ 2.7 s. Runs that see 4 s of context give the whole-clip result (measured on
 * the real-size bundle: max |Δ| 1.2e-5 against 6.7; 2 s of context is not enough, 1.3e-2). The graph's
 * attention is quadratic in its input, so windows keep its memory flat whatever the clip's length.
 */
const WINDOW_FRAMES = 50;
const CONTEXT_FRAMES = 50;

/** One run of the encoder graph: in-process, or in a worker thread (encoder/worker-client.ts). */
export type EncoderGraphRun = (audio: Float32Array) => Promise<Float32Tensor>;

/** Largest |Δ| at which the encoder's row 0 counts as the stored BOS: it is a copy, so only rounding may differ. */
const BOS_MATCH_TOLERANCE = 1e-6;

export class VoiceEncoder {
  /** Where runs go instead of the in-process session (a worker thread), while it works. */
  #offThread: { run: EncoderGraphRun; failed(): boolean } | undefined;

  /** The in-process session: null while runs go off-thread, reopened by `#reopen` if that fails. */
  #session: OnnxSession | null;
  #reopen: (() => Promise<OnnxSession>) | undefined;
  #reopening: Promise<OnnxSession> | undefined;

  private constructor(
    session: OnnxSession,
    private readonly config: VoiceEncoderConfig,
    /** Whether the graph emits `bos_before_voice` as row 0 itself (the LM v2 wrapper) or not (KR2 prepends it). */
    readonly bosBakedIn: boolean,
  ) {
    this.#session = session;
  }

  /**
   * Runs the graph off the JS thread from now on; an in-process session takes over if that fails. Given
   * `reopen`, the in-process session is released now and opened again only then.
   */
  async runOffThread(offThread: { run: EncoderGraphRun; failed(): boolean }, reopen?: () => Promise<OnnxSession>): Promise<void> {
    this.#offThread = offThread;
    if (!reopen) return;
    this.#reopen = reopen;
    const session = this.#session;
    this.#session = null;
    await session?.release();
  }

  /** Whether the in-process session is open now. */
  get inProcessSessionOpen(): boolean {
    return this.#session !== null;
  }

  /** Releases the in-process session, if it is open. */
  async close(): Promise<void> {
    const session = this.#session;
    this.#session = null;
    await session?.release();
  }

  /** Whether an encode leaves the JS thread free (so it need not wait for a gap between engine ticks). */
  get offThread(): boolean {
    return this.#offThread !== undefined && !this.#offThread.failed();
  }

  /** Frames of a clip of `sampleCount` samples that encode() keeps. */
  keptFrames(sampleCount: number): number {
    return Math.min(Math.ceil(sampleCount / this.config.samplesPerFrame), Math.round(MAX_VOICE_SECONDS * (24_000 / this.config.samplesPerFrame)));
  }

  async #run(audio: Float32Array): Promise<Float32Tensor> {
    if (this.offThread) return this.#offThread!.run(audio);
    return runEncoder(await this.#inProcessSession(), audio.slice(), this.config.conditioningDim);
  }

  #inProcessSession(): Promise<OnnxSession> {
    if (this.#session) return Promise.resolve(this.#session);
    this.#reopening ??= this.#reopen!().then((session) => {
      this.#session = session;
      this.#reopening = undefined;
      return session;
    }, (error: unknown) => {
      this.#reopening = undefined;
      throw error;
    });
    return this.#reopening;
  }

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
   * 24 kHz mono samples → voice conditioning [1, T (+1 with the v2 BOS), D], T = ceil(N / 1920) up to
   * MAX_VOICE_SECONDS, ready for `FlowLm.prefill`. The audio is zero-padded to a multiple of 1920 here because
   * published encoders may have the padding frozen to the trace length (§3.1), and encoded in windows.
   */
  async encode(samples: Float32Array): Promise<Float32Tensor> {
    if (samples.length === 0) throw new RangeError("voice audio is empty");
    const { samplesPerFrame, conditioningDim } = this.config;
    const frames = this.keptFrames(samples.length);
    const padded = new Float32Array(frames * samplesPerFrame);
    padded.set(samples.subarray(0, padded.length));
    const bos = this.config.bosBeforeVoice;
    const leadingRows = this.bosBakedIn || bos ? 1 : 0;
    const conditioning = new Float32Array((leadingRows + frames) * conditioningDim);
    if (bos && !this.bosBakedIn) conditioning.set(bos);
    for (let first = 0; first < frames; first += WINDOW_FRAMES) {
      const end = Math.min(frames, first + WINDOW_FRAMES);
      const start = Math.max(0, first - CONTEXT_FRAMES);
      const encoded = await this.#run(padded.subarray(start * samplesPerFrame, end * samplesPerFrame));
      const rows = encoded.dims[1]!;
      const expectedRows = (this.bosBakedIn ? 1 : 0) + end - start;
      if (rows !== expectedRows || encoded.dims[2] !== conditioningDim) throw new Error(`mimi_encoder returned [${encoded.dims.join(", ")}] for ${end - start} frames, expected [1, ${expectedRows}, ${conditioningDim}]`);
      // v2 puts the learned BOS before the voice tokens only (§2.1 step 4, §6.4): a baked-in one is row 0 of every run.
      if (this.bosBakedIn && first === 0) conditioning.set(encoded.data.subarray(0, conditioningDim));
      conditioning.set(encoded.data.subarray((rows - (end - first)) * conditioningDim), (leadingRows + first) * conditioningDim);
    }
    return { data: conditioning, dims: [1, leadingRows + frames, conditioningDim] };
  }
}

export async function runEncoder(session: OnnxSession, padded: Float32Array, conditioningDim: number): Promise<Float32Tensor> {
  const outputs = await session.run({ audio: new session.Tensor("float32", padded, [1, 1, padded.length]) });
  const name = session.outputNames[0]!;
  const latents = float32Output(outputs, name, "mimi_encoder");
  if (latents.dims.length !== 3 || latents.dims[2] !== conditioningDim) throw new Error(`mimi_encoder returned [${latents.dims.join(", ")}], expected [1, T, ${conditioningDim}]`);
  return latents;
}
