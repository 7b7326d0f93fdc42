/**
 * The sampling parameters of `extra_params` that a speech model may read, with the ranges every request is
 * held to whichever model serves it: a value outside them is a caller's mistake (a threshold that disables
 * EOS, say), answered with a 400 naming `extra_params.<key>` even by a model that would ignore the key.
 * Ranges, from Pocket TTS, whose parameters these are (docs/pocket-tts.md §1.11, §1.12), wide around
 * upstream's defaults but closed where a value would only make generation slower or endless:
 * - temperature is the variance of the flow's starting noise, which it learnt to map from at 1 (upstream
 *   speaks at 0.7); 2 doubles that, and 0 starts from the noise's mean.
 * - lsd_steps Euler steps cost one flow-net run each per frame; the most any runtime uses is 10 (KR1).
 * - eos_threshold is compared with the raw EOS logit: speech ends at the first frame whose logit passes it.
 *   Upstream's −4 (p ≈ 0.018) is where the published weights were tuned to stop; −10 (p ≈ 0.00005) stops at
 *   once. Above 0 the head must be more sure than even odds, which a head trained to fire one frame per chunk
 *   need never be: at 10 the tiny bundle never stopped (460 s of audio for 4,090 characters, against 17 s),
 *   so every chunk ran to its frame cap. 0 is the highest threshold that still asks only that the head
 *   think the end likelier than not.
 * - frames_after_eos: models recommend 3 to 8; 25 frames are 2 s of trailing audio per chunk.
 */
import { z } from "zod";

function numberIn(key: string, min: number, max: number) {
  const message = `${key} must be a number in ${min}..${max}`;
  return z.number({ error: message }).min(min, message).max(max, message).optional();
}

function integerIn(key: string, min: number, max: number) {
  const message = `${key} must be an integer in ${min}..${max}`;
  return z.number({ error: message }).int(message).min(min, message).max(max, message).optional();
}

export const samplingParamsSchema = z.object({
  temperature: numberIn("temperature", 0, 2),
  lsd_steps: integerIn("lsd_steps", 1, 16),
  eos_threshold: numberIn("eos_threshold", -10, 0),
  frames_after_eos: integerIn("frames_after_eos", 0, 25),
});
