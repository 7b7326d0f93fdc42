/**
 * The `extra_params` Pocket TTS reads, as the schema the speech service checks every request with before any
 * work (a bad value is a 400 naming `extra_params.<key>`): the sampling parameters and their ranges
 * (api/sampling-params.ts says why each range). Keys it does not name are ignored.
 */
import { samplingParamsSchema } from "../../api/sampling-params.ts";
import type { GenerationParams } from "./loop.ts";

export const pocketParamsSchema = samplingParamsSchema;

/** The generation parameters a job's extra_params set; the ones absent keep the loop's defaults. */
export function generationParams(extraParams: Record<string, unknown>): Partial<GenerationParams> {
  const { temperature, lsd_steps: lsdSteps, eos_threshold: eosThreshold, frames_after_eos: framesAfterEos } = pocketParamsSchema.parse(extraParams);
  const params: Partial<GenerationParams> = {};
  if (temperature !== undefined) params.temperature = temperature;
  if (lsdSteps !== undefined) params.lsdSteps = lsdSteps;
  if (eosThreshold !== undefined) params.eosThreshold = eosThreshold;
  if (framesAfterEos !== undefined) params.framesAfterEos = framesAfterEos;
  return params;
}
