/** alaw: G.711 A-law (../g711.ts), one byte per sample at 8 kHz, no header: what most European trunks carry. */
import { concatBytes } from "../../lib/concat.ts";
import { encodeSamplesInSlices, sampleByteStream, type Codec } from "../codec.ts";
import { encodeG711, G711_SAMPLE_RATE_HZ } from "../g711.ts";

const encodeALaw = (samples: Float32Array) => encodeG711(samples, "alaw");

export const alawCodec: Codec<"alaw"> = {
  name: "alaw",
  // RFC 2045 / RFC 3551 names: raw G.711 at 8 kHz.
  contentType: "audio/x-alaw-basic",
  fixedRateHz: G711_SAMPLE_RATE_HZ,
  streamEncodesOn: "calling-thread",
  encodeFile: async (samples, _sampleRateHz, _options, pause) => concatBytes(await encodeSamplesInSlices(samples, encodeALaw, pause)),
  createStream: async () => sampleByteStream(encodeALaw),
};
