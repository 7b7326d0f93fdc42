/**
 * G.711 μ-law and A-law (ITU-T G.711): one byte per sample, 8 kHz mono, no header. This is what telephony
 * carries (Twilio media streams send μ-law, most European trunks A-law), so a caller bridging to a phone line
 * plays these bytes as they come.
 *
 * Library: alawmulaw, the reference tables of G.711 in plain JavaScript (no wasm), so it loads the same in Bun
 * and Deno (see alawmulaw.d.ts for why its modules are imported by path). Each sample is coded on its own, so
 * a stream's chunks are a file's bytes cut anywhere.
 */
import { encode as encodeALaw } from "alawmulaw/lib/alaw.js";
import { encode as encodeMuLaw } from "alawmulaw/lib/mulaw.js";
import { floatToInt16 } from "./wav.ts";

/** G.711 is defined at 8 kHz; the speech service resamples to it. */
export const G711_SAMPLE_RATE_HZ = 8000;

export type G711Law = "ulaw" | "alaw";

/** Mono samples in [-1, 1] (clipped beyond) as G.711 bytes of `law`. */
export function encodeG711(samples: Float32Array, law: G711Law): Uint8Array {
  const pcm = floatToInt16(samples);
  return law === "ulaw" ? encodeMuLaw(pcm) : encodeALaw(pcm);
}
