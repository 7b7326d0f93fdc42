/** pcm: headerless 16-bit little-endian mono samples (../wav.ts converts them), a stream's chunks as they come. */
import { concatBytes } from "../../lib/concat.ts";
import { encodeSamplesInSlices, sampleByteStream, type Codec } from "../codec.ts";
import { pcm16Bytes } from "../wav.ts";

export const pcmCodec: Codec<"pcm"> = {
  name: "pcm",
  contentType: "audio/pcm",
  streamEncodesOn: "calling-thread",
  encodeFile: async (samples, _sampleRateHz, _options, pause) => concatBytes(await encodeSamplesInSlices(samples, pcm16Bytes, pause)),
  createStream: async () => sampleByteStream(pcm16Bytes),
};
