/** Shaping the core's audio for delivery: a stream in a response format, a whole file's bytes, pcm16 read back. */
import { createStreamEncoder } from "../audio/stream-encoder.ts";
import type { EncodingOptions, ResponseFormat } from "../audio/encoders.ts";
import { concatBytes } from "../lib/concat.ts";

/**
 * The audio in its response format, each chunk's bytes as soon as the format can give them: the joined
 * bytes are one file (a WAV's header carries sizes 0xFFFFFFFF, which players read as "until EOF"), and a
 * player can start on the first.
 */
export async function* encodedStream(prepared: { responseFormat: ResponseFormat; outputSampleRateHz: number; encoding: EncodingOptions }, pcm: AsyncIterable<Float32Array>, signal: AbortSignal): AsyncGenerator<Uint8Array, void, undefined> {
  const encoder = await createStreamEncoder(prepared.responseFormat, prepared.outputSampleRateHz, prepared.encoding);
  let ended = false;
  try {
    for await (const samples of pcm) {
      const bytes = await encoder.push(samples);
      if (bytes.byteLength > 0) yield bytes;
    }
    if (signal.aborted) return;
    ended = true;
    const rest = await encoder.end();
    if (rest.byteLength > 0) yield rest;
  } finally {
    if (!ended) encoder.close();
  }
}

/** All of `audio`'s pieces as one array: a file, or a whole stream. */
export async function wholeAudio(audio: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const pieces: Uint8Array[] = [];
  for await (const piece of audio) pieces.push(piece);
  return pieces.length === 1 ? pieces[0]! : concatBytes(pieces);
}

/** pcm16 little-endian as float samples. */
export function int16Samples(bytes: Uint8Array): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const samples = new Float32Array(bytes.byteLength >> 1);
  for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(2 * i, true) / 32768;
  return samples;
}
