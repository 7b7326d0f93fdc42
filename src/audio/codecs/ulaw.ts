/** ulaw: G.711 μ-law (../g711.ts), one byte per sample at 8 kHz, no header: what Twilio's media streams carry. */
import { concatBytes } from "../../lib/concat.ts";
import { encodeSamplesInSlices, sampleByteStream, type Codec } from "../codec.ts";
import { encodeG711, G711_SAMPLE_RATE_HZ } from "../g711.ts";

const encodeMuLaw = (samples: Float32Array) => encodeG711(samples, "ulaw");

export const ulawCodec: Codec<"ulaw"> = {
  name: "ulaw",
  // RFC 2045 / RFC 3551 names: raw G.711 at 8 kHz.
  contentType: "audio/basic",
  fixedRateHz: G711_SAMPLE_RATE_HZ,
  streamEncodesOn: "calling-thread",
  encodeFile: async (samples, _sampleRateHz, _options, pause) => concatBytes(await encodeSamplesInSlices(samples, encodeMuLaw, pause)),
  createStream: async () => sampleByteStream(encodeMuLaw),
};
