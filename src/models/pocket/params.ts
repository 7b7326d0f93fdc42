/**
 * Pocket TTS's generation parameters, their upstream defaults, and the `extra_params` that set them, as the
 * schema the speech service checks every request with before any work (a bad value is a 400 naming
 * `extra_params.<key>`): the sampling parameters and their ranges (api/sampling-params.ts says why each
 * range). Keys it does not name are ignored.
 */
import { samplingParamsSchema } from "../../api/sampling-params.ts";

export interface GenerationParams {
  /** Noise variance: x0 ~ N(0, temperature) (docs/pocket-tts.md §1.11). Upstream default 0.7. */
  temperature: number;
  /** Euler steps of the LSD decode (§1.11). Upstream default 1. */
  lsdSteps: number;
  /** EOS when the raw logit exceeds this (§1.7). Upstream default −4.0. */
  eosThreshold: number;
  /** Replaces every chunk's own frames-after-EOS (model recommendation or guess + 2, §1.12). */
  framesAfterEos?: number;
  /** Lowers the per-chunk frame cap below the upstream ceil((n_tokens/3 + 2)·12.5). */
  maxFramesPerChunk?: number;
  /** Most latents per decoder call once a chunk's first frame is out (1 = frame by frame). */
  decodeBatchFrames: number;
}

/** Upstream defaults at HEAD (§1.12). */
export const DEFAULT_GENERATION_PARAMS: Readonly<GenerationParams> = Object.freeze({ temperature: 0.7, lsdSteps: 1, eosThreshold: -4.0, decodeBatchFrames: 8 });

export const pocketParamsSchema = samplingParamsSchema;

/** The generation parameters a job's extra_params set; the ones absent keep the defaults. */
export function generationParams(extraParams: Record<string, unknown>): Partial<GenerationParams> {
  const { temperature, lsd_steps: lsdSteps, eos_threshold: eosThreshold, frames_after_eos: framesAfterEos } = pocketParamsSchema.parse(extraParams);
  const params: Partial<GenerationParams> = {};
  if (temperature !== undefined) params.temperature = temperature;
  if (lsdSteps !== undefined) params.lsdSteps = lsdSteps;
  if (eosThreshold !== undefined) params.eosThreshold = eosThreshold;
  if (framesAfterEos !== undefined) params.framesAfterEos = framesAfterEos;
  return params;
}
