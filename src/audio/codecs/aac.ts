/**
 * AAC-LC in ADTS frames (the raw ".aac" stream the speech API returns), 64 kbps mono.
 *
 * Library: @ffmpeg/core, the whole ffmpeg CLI compiled to single-threaded wasm, running ffmpeg's
 * native AAC encoder on a WAV written to its in-memory file system. The maintained alternative,
 * @mediabunny/aac-encoder (the same libavcodec encoder in 1 MB of wasm), works under Deno but hangs
 * under Bun 1.4.5: its worker waits for messages on `self`, and a Bun worker_threads worker has a
 * `self` that never receives them. The price of @ffmpeg/core is a 32 MB wasm that takes 0.2–0.4 s
 * to compile on first use (it is compiled lazily, once) and its GPL-2.0-or-later licence.
 *
 * Runtime trick: the build targets browser workers and reads `self.location.href` once while its
 * factory runs synchronously. Bun and Deno have no `location`, and a Deno worker_threads worker (where the
 * encoder worker runs it) has no `self`, so stand-ins are defined for exactly that call and removed before
 * anything else can run. The wasm is compiled from node_modules and
 * instantiated through the loader's `instantiateWasm` hook, so the loader never tries to fetch it.
 *
 * Length: ADTS cannot declare the encoder's 1024-sample priming. ffmpeg therefore decodes the input
 * plus 1024 samples of priming at the start plus under 1024 samples of end padding (FAAD2 drops its
 * first output frame, which absorbs the priming).
 *
 * Streaming: ADTS frames. ffmpeg's CLI encodes whole inputs, so each chunk's frames come from an encode of the
 * last few frames' audio and the new one, and only the frames past those already sent are kept: every frame is
 * encoded with the audio around it, and the joined frames decode as one continuous stream (within the codec's
 * own error), not as chunks each with its own priming.
 *
 * Concurrency: the module has one ffmpeg instance and fixed file names. Each call writes the input,
 * runs ffmpeg and reads the output without an `await`, so calls never interleave on it.
 */
import type { FfmpegCore } from "@ffmpeg/core";
import { readFile } from "node:fs/promises";
import { encodeWav } from "../wav.ts";
import { lazyLoad } from "../../lib/lazy-load.ts";
import { concatBytes } from "../../lib/concat.ts";
import type { Codec, StreamEncoder } from "../codec.ts";
import type { Pause } from "../pause.ts";

const BITRATE = "64k";
const INPUT_FILE = "input.wav";
const OUTPUT_FILE = "output.aac";

/**
 * ffmpeg's main() is not made to run many times in one process: one instance traps ("Out of bounds
 * memory access") on its 148th run, and every run after that fails too. So an instance serves at most
 * RUNS_PER_INSTANCE encodes, and is replaced at once after any failure. The compiled module is kept, so a
 * replacement costs an instantiation (tens of ms), not a 32 MB compile.
 */
const RUNS_PER_INSTANCE = 64;

let ffmpeg: { core: Promise<FfmpegCore>; runs: number } | undefined;
/** ffmpeg's messages from the current run, for the error when it fails. */
let runLog: string[] = [];

/** A failed compile is forgotten, so the next encode tries again instead of failing for good. */
const compileFfmpeg = lazyLoad(async (): Promise<{ module: WebAssembly.Module; coreUrl: string }> => {
  const coreUrl = import.meta.resolve("@ffmpeg/core");
  const wasmBinary = await readFile(new URL("ffmpeg-core.wasm", coreUrl));
  return { module: await WebAssembly.compile(wasmBinary), coreUrl };
});

async function loadFfmpeg(): Promise<FfmpegCore> {
  const { module, coreUrl } = await compileFfmpeg();
  const { default: createFFmpegCore } = await import("@ffmpeg/core");

  const global = globalThis as { self?: unknown; location?: { href: string } };
  const needsSelf = global.self === undefined;
  if (needsSelf) global.self = globalThis;
  const needsLocation = global.location === undefined;
  if (needsLocation) global.location = { href: coreUrl };
  let instance: Promise<FfmpegCore>;
  try {
    instance = createFFmpegCore({
      instantiateWasm(imports, receiveInstance) {
        void WebAssembly.instantiate(module, imports).then((created) => receiveInstance(created, module));
        return {};
      },
    });
  } finally {
    if (needsLocation) delete global.location;
    if (needsSelf) delete global.self;
  }
  const core = await instance;
  core.setLogger(({ message }) => void runLog.push(message));
  return core;
}

/** The instance for the next encode: a fresh one after RUNS_PER_INSTANCE runs or a failure. */
function nextInstance(): Promise<FfmpegCore> {
  if (!ffmpeg || ffmpeg.runs >= RUNS_PER_INSTANCE) {
    const core = loadFfmpeg();
    ffmpeg = { core, runs: 0 };
    core.catch(() => {
      if (ffmpeg?.core === core) ffmpeg = undefined;
    });
  }
  ffmpeg.runs++;
  return ffmpeg.core;
}

/** One run of ffmpeg over all of `samples`: its cost and its wasm memory grow with the input (see encodeAacFile). */
export async function encodeAdtsAac(samples: Float32Array, sampleRateHz: number): Promise<Uint8Array> {
  const current = nextInstance();
  const core = await current;
  runLog = [];
  let succeeded = false;
  core.FS.writeFile(INPUT_FILE, encodeWav(samples, sampleRateHz));
  try {
    const exitCode = core.exec("-hide_banner", "-loglevel", "error", "-i", INPUT_FILE, "-c:a", "aac", "-b:a", BITRATE, "-f", "adts", OUTPUT_FILE);
    if (exitCode !== 0) {
      throw new Error(`ffmpeg (wasm) could not encode AAC at ${sampleRateHz} Hz (exit ${exitCode}): ${runLog.join(" ").trim()}`);
    }
    const output = core.FS.readFile(OUTPUT_FILE);
    succeeded = true;
    return output;
  } finally {
    if (!succeeded && ffmpeg?.core === current) ffmpeg = undefined;
    core.reset();
    for (const path of [INPUT_FILE, OUTPUT_FILE]) {
      try {
        core.FS.unlink(path);
      } catch {
        // The output is missing when ffmpeg failed; there is nothing else to clean up.
      }
    }
  }
}

/** AAC-LC codes 1024 samples a frame; ffmpeg's encoder leads with one frame of priming. */
const AAC_FRAME_SAMPLES = 1024;
/** Frames of audio before the first new one that each encode sees again, so the new frames are coded in context. */
const AAC_CONTEXT_FRAMES = 3;
/** Frames past the last one sent that an encode must see (see push). */
const AAC_LOOKAHEAD_FRAMES = 1;
/**
 * After the first, an encode sends at least this many frames (170 ms at 24 kHz): each run of ffmpeg costs
 * ~15 ms whatever its length, so one per 80 ms chunk took a third of a core for one stream.
 */
const AAC_FRAMES_PER_ENCODE = 4;

/** The ADTS frames of `bytes`, in order. */
export function adtsFrames(bytes: Uint8Array): Uint8Array[] {
  const frames: Uint8Array[] = [];
  for (let at = 0; at + 7 <= bytes.length; ) {
    if (bytes[at] !== 0xff || (bytes[at + 1]! & 0xf0) !== 0xf0) throw new Error(`no ADTS sync word at byte ${at}`);
    const length = ((bytes[at + 3]! & 0x03) << 11) | (bytes[at + 4]! << 3) | (bytes[at + 5]! >> 5);
    if (length < 7 || at + length > bytes.length) throw new Error(`an ADTS frame at byte ${at} runs past the end`);
    frames.push(bytes.subarray(at, at + length));
    at += length;
  }
  return frames;
}

/**
 * ADTS frames for a stream of mono samples, as they can be given: each encode runs ffmpeg on the last few
 * frames' audio and the new one, and keeps only the frames past those already sent (the header says why).
 */
async function createAacStreamEncoder(sampleRateHz: number): Promise<StreamEncoder> {
  // The audio not yet behind every frame sent, from the sample `historyStart` of the stream on.
  let history = new Float32Array(0);
  let historyStart = 0;
  let received = 0;
  /** Frames sent so far; frame 0 is the encoder's priming, frame g ≥ 1 codes samples [(g − 1)·1024, g·1024). */
  let sent = 0;

  /** Encodes from a few frames before frame `sent` to the end of what has arrived; keeps frames below `upTo` (all at the end). */
  const encodeFrom = async (upTo: number): Promise<Uint8Array> => {
    if (upTo <= sent) return new Uint8Array(0);
    // The window starts on a frame boundary: its own priming frame stands for the frame before its start.
    const firstFrame = Math.max(0, sent - AAC_CONTEXT_FRAMES);
    const windowStart = firstFrame * AAC_FRAME_SAMPLES;
    const frames = adtsFrames(await encodeAdtsAac(history.subarray(windowStart - historyStart), sampleRateHz));
    // Output frame i of the window is the stream's frame firstFrame + i.
    const kept = frames.slice(sent - firstFrame, upTo - firstFrame);
    sent += kept.length;
    // What the next encode's context needs is kept; the rest is dropped.
    const keepFrom = Math.max(0, sent - AAC_CONTEXT_FRAMES) * AAC_FRAME_SAMPLES;
    if (keepFrom > historyStart) {
      history = history.slice(keepFrom - historyStart);
      historyStart = keepFrom;
    }
    return concatBytes(kept);
  };

  return {
    push: async (samples) => {
      const next = new Float32Array(history.length + samples.length);
      next.set(history);
      next.set(samples, history.length);
      history = next;
      received += samples.length;
      // Frame g is coded from its own audio and frame g + 1's (the transform's second half), and the encoder
      // chooses its window shape looking one frame further: a frame sent before that audio arrived would be
      // coded as the end of the input, and would not join the next encode's frames (SNR 28 → 19 dB).
      const final = Math.floor(received / AAC_FRAME_SAMPLES) - AAC_LOOKAHEAD_FRAMES;
      // The first frames go at once, so a player can start; after that, encodes gather a few frames each.
      if (sent > 0 && final - sent < AAC_FRAMES_PER_ENCODE) return new Uint8Array(0);
      return encodeFrom(final);
    },
    end: async () => {
      if (received === 0) return new Uint8Array(0);
      // The last window's frames run to the end of the file's: the audio, then the encoder's padding.
      return encodeFrom(Infinity);
    },
    close: () => {
      history = new Float32Array(0);
    },
  };
}

/**
 * A longer input is encoded this many frames at a time (5.5 s at 24 kHz, ~80 ms of ffmpeg): one run over a
 * whole long file held the thread for its whole length, and ffmpeg's wasm memory, which never shrinks, grew
 * to hold the input and its copies (a 20-minute file took over a minute).
 */
const AAC_FILE_SEGMENT_FRAMES = 128;

/**
 * A whole file: one run of ffmpeg when it is short, else the stream encoder's windows over segments of it,
 * `pause` between them, so that time and memory stay bounded per run whatever the length. The segments'
 * frames join as the stream's do: every frame coded in context, within the codec's own error of one run.
 */
async function encodeAacFile(samples: Float32Array, sampleRateHz: number, pause: Pause): Promise<Uint8Array> {
  const segmentSamples = AAC_FILE_SEGMENT_FRAMES * AAC_FRAME_SAMPLES;
  if (samples.length <= segmentSamples) return encodeAdtsAac(samples, sampleRateHz);
  const encoder = await createAacStreamEncoder(sampleRateHz);
  const parts: Uint8Array[] = [];
  try {
    for (let start = 0; start < samples.length; start += segmentSamples) {
      if (start > 0) await pause();
      parts.push(await encoder.push(samples.subarray(start, start + segmentSamples)));
    }
    await pause();
    parts.push(await encoder.end());
  } finally {
    encoder.close();
  }
  return concatBytes(parts);
}

export const aacCodec: Codec<"aac"> = {
  name: "aac",
  contentType: "audio/aac",
  streamEncodesOn: "encoder-worker",
  encodeFile: (samples, sampleRateHz, _options, pause) => encodeAacFile(samples, sampleRateHz, pause),
  createStream: (sampleRateHz) => createAacStreamEncoder(sampleRateHz),
};
