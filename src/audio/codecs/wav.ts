/**
 * wav: mono 16-bit PCM in a RIFF/WAVE file (../wav.ts writes the header and the samples). A stream sends the
 * streaming header first (both sizes 0xFFFFFFFF, "until EOF"), then the samples as they come.
 */
import { concatBytes } from "../../lib/concat.ts";
import { encodeSamplesInSlices, type Codec } from "../codec.ts";
import { pcm16Bytes, wavHeader } from "../wav.ts";

const EMPTY = new Uint8Array(0);

export const wavCodec: Codec<"wav"> = {
  name: "wav",
  contentType: "audio/wav",
  streamEncodesOn: "calling-thread",
  encodeFile: async (samples, sampleRateHz, _options, pause) =>
    concatBytes([wavHeader(sampleRateHz, samples.length * 2), ...(await encodeSamplesInSlices(samples, pcm16Bytes, pause))]),
  createStream: async (sampleRateHz) => {
    let headerSent = false;
    return {
      push: async (samples) => {
        const pcm = pcm16Bytes(samples);
        if (headerSent) return pcm;
        headerSent = true;
        return concatBytes([wavHeader(sampleRateHz, "streaming"), pcm]);
      },
      end: async () => (headerSent ? EMPTY : ((headerSent = true), wavHeader(sampleRateHz, "streaming"))),
      close: () => undefined,
    };
  },
};
