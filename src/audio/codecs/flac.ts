/**
 * FLAC (native container, 16-bit mono, libFLAC compression level 5) from mono float samples.
 *
 * Library: libflacjs, libFLAC compiled with emscripten. We load its self-contained JavaScript build
 * (dist/libflac.js, wasm2js output) rather than the wasm one: the wasm build's loader sees that `fetch`
 * exists (Bun and Deno both have it), tries to fetch its .wasm from a bare file path and fails, and it
 * offers no hook to hand it the bytes instead. The JavaScript build still encodes 10 s of speech in
 * tens of milliseconds (bench/encoders.ts). @mediabunny/flac-encoder (also libFLAC) was tried and
 * rejected: it encodes in a worker that never answers under Bun 1.4.
 *
 * libFLAC writes to a callback that cannot seek, so it cannot go back to fill STREAMINFO once the last
 * frame is known. We pass the sample count up front and afterwards patch the frame-size bounds and the
 * MD5 of the audio, which libFLAC reports through its metadata callback, into the header ourselves:
 * without them `flac -t` cannot verify a file and seeking decoders lose a hint.
 *
 * Length: lossless and sample-exact.
 *
 * Streaming: STREAMINFO with the length unknown (0, which the format allows for streams), then one frame per
 * 1920 samples as each is complete.
 *
 * Concurrency: all encoders share one emscripten heap. Each call runs from create to delete without an
 * `await`, so calls never interleave on it.
 */
import type { StreamMetadata } from "libflacjs/dist/libflac.js";
import { concatBytes } from "../../lib/concat.ts";
import { lazyLoad } from "../../lib/lazy-load.ts";
import { floatToInt16 } from "../wav.ts";
import type { Codec, StreamEncoder } from "../codec.ts";
import type { Pause } from "../pause.ts";

/** libFLAC's default preset: nearly all of level 8's compression at a fraction of its CPU. */
const COMPRESSION_LEVEL = 5;
const BITS_PER_SAMPLE = 16;
/** Bounds the copy of input that libflacjs makes on the emscripten heap for each call. */
const CHUNK_SAMPLES = 1 << 16;

// Byte offsets inside the file: "fLaC", then the 4-byte header of STREAMINFO, then its fields.
const STREAMINFO_START = 8;
const MIN_FRAME_BYTES_AT = STREAMINFO_START + 4;
const MAX_FRAME_BYTES_AT = STREAMINFO_START + 7;
const MD5_AT = STREAMINFO_START + 18;

type Flac = typeof import("libflacjs/dist/libflac.js");
const loadFlac = lazyLoad(async (): Promise<Flac> => {
  const module = (await import("libflacjs/dist/libflac.js")) as Flac & { default?: Flac };
  // CommonJS interop: Bun and Deno expose module.exports as the default export.
  const library = module.default ?? module;
  if (!library.isReady()) await new Promise<void>((resolve) => library.on("ready", () => resolve()));
  return library;
});

async function encodeFlac(samples: Float32Array, sampleRateHz: number, pause: Pause): Promise<Uint8Array> {
  const library = await loadFlac();
  const pcm = floatToInt16(samples);

  const encoder = library.create_libflac_encoder(sampleRateHz, 1, BITS_PER_SAMPLE, COMPRESSION_LEVEL, pcm.length, false, 0);
  if (!encoder) throw new Error(`libFLAC refused to create an encoder for ${sampleRateHz} Hz mono`);
  const parts: Uint8Array[] = [];
  let streamInfo: StreamMetadata | undefined;
  try {
    const initStatus = library.init_encoder_stream(
      encoder,
      (data) => void parts.push(data),
      (metadata) => void (streamInfo = metadata ?? streamInfo),
    );
    if (initStatus !== 0) throw new Error(`libFLAC encoder init failed with status ${initStatus}`);

    const block = new Int32Array(CHUNK_SAMPLES);
    for (let start = 0; start < pcm.length; start += CHUNK_SAMPLES) {
      if (start > 0) await pause();
      const count = Math.min(CHUNK_SAMPLES, pcm.length - start);
      block.set(pcm.subarray(start, start + count));
      if (!library.FLAC__stream_encoder_process_interleaved(encoder, block, count)) {
        throw new Error(`libFLAC encoding failed in state ${library.FLAC__stream_encoder_get_state(encoder)}`);
      }
    }
    if (!library.FLAC__stream_encoder_finish(encoder)) {
      throw new Error(`libFLAC could not finish the stream in state ${library.FLAC__stream_encoder_get_state(encoder)}`);
    }
  } finally {
    library.FLAC__stream_encoder_delete(encoder);
  }

  const file = concatBytes(parts);
  if (streamInfo) patchStreamInfo(file, streamInfo);
  return file;
}

function patchStreamInfo(file: Uint8Array, streamInfo: StreamMetadata): void {
  const writeUint24 = (offset: number, value: number) => {
    file[offset] = (value >>> 16) & 0xff;
    file[offset + 1] = (value >>> 8) & 0xff;
    file[offset + 2] = value & 0xff;
  };
  writeUint24(MIN_FRAME_BYTES_AT, streamInfo.min_framesize);
  writeUint24(MAX_FRAME_BYTES_AT, streamInfo.max_framesize);
  for (let i = 0; i < 16; i++) file[MD5_AT + i] = Number.parseInt(streamInfo.md5sum.slice(2 * i, 2 * i + 2), 16);
}

/** One FLAC frame per this many samples: 80 ms at 24 kHz, the engine's chunk, so each chunk leaves at once. */
const FLAC_STREAM_BLOCK_SAMPLES = 1920;

async function flacStreamEncoder(sampleRateHz: number): Promise<StreamEncoder> {
  const library = await loadFlac();
  const encoder = library.create_libflac_encoder(sampleRateHz, 1, BITS_PER_SAMPLE, COMPRESSION_LEVEL, 0, false, FLAC_STREAM_BLOCK_SAMPLES);
  if (!encoder) throw new Error(`libFLAC refused to create an encoder for ${sampleRateHz} Hz mono`);
  const parts: Uint8Array[] = [];
  const status = library.init_encoder_stream(encoder, (data) => void parts.push(data.slice()), () => undefined);
  if (status !== 0) {
    library.FLAC__stream_encoder_delete(encoder);
    throw new Error(`libFLAC encoder init failed with status ${status}`);
  }
  let open = true;
  const take = () => {
    const out = concatBytes(parts);
    parts.length = 0;
    return out;
  };
  const release = () => {
    if (!open) return;
    open = false;
    library.FLAC__stream_encoder_delete(encoder);
  };
  return {
    push: async (samples) => {
      if (!open) throw new Error("the FLAC stream encoder is closed");
      if (samples.length > 0 && !library.FLAC__stream_encoder_process_interleaved(encoder, Int32Array.from(floatToInt16(samples)), samples.length)) {
        throw new Error(`libFLAC encoding failed in state ${library.FLAC__stream_encoder_get_state(encoder)}`);
      }
      return take();
    },
    end: async () => {
      if (!open) throw new Error("the FLAC stream encoder is closed");
      const finished = library.FLAC__stream_encoder_finish(encoder);
      const rest = take();
      release();
      if (!finished) throw new Error("libFLAC could not finish the stream");
      return rest;
    },
    close: release,
  };
}

export const flacCodec: Codec<"flac"> = {
  name: "flac",
  contentType: "audio/flac",
  streamEncodesOn: "encoder-worker",
  encodeFile: (samples, sampleRateHz, _options, pause) => encodeFlac(samples, sampleRateHz, pause),
  createStream: (sampleRateHz) => flacStreamEncoder(sampleRateHz),
};
