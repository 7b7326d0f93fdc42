/** Voice encoder (§1.2, §2.1, §3.1): 24 kHz audio ─▶ voice conditioning [1, T(+1), D]. */
import type { OnnxSession } from "../../../onnx/runtime.ts";
import { type Float32Tensor, float32Output } from "./state.ts";

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
