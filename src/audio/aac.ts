/**
 * AAC-LC in ADTS frames (the raw ".aac" stream the speech API returns), 64 kbps mono.
 *
 * Library: @ffmpeg/core, the whole ffmpeg CLI compiled to single-threaded wasm, running ffmpeg's
 * native AAC encoder on a WAV written to its in-memory file system. The maintained alternative,
 * @mediabunny/aac-encoder (the same libavcodec encoder in 1 MB of wasm), works under Deno but hangs
 * under Bun 1.4.5: its worker waits for messages on `self`, and a Bun worker_threads worker has a
 * `self` that never receives them. The price of @ffmpeg/core is a 32 MB wasm that takes 0.2–0.4 s
 * to compile on first use (it is loaded lazily, once) and its GPL-2.0-or-later licence.
 *
 * Runtime trick: the build targets browser workers and reads `self.location.href` once while its
 * factory runs synchronously. Bun and Deno have no `location`, so a stand-in is defined for exactly
 * that call and removed before anything else can run. The wasm bytes are read from node_modules
 * and handed over directly, so the loader never tries to fetch them.
 *
 * Length: ADTS cannot declare the encoder's 1024-sample priming. ffmpeg therefore decodes the input
 * plus 1024 samples of priming at the start plus under 1024 samples of end padding (FAAD2 drops its
 * first output frame, which absorbs the priming).
 *
 * Concurrency: the module has one ffmpeg instance and fixed file names. Each call writes the input,
 * runs ffmpeg and reads the output without an `await`, so calls never interleave on it.
 */
import type { FfmpegCore } from "@ffmpeg/core";
import { readFile } from "node:fs/promises";
import { encodeWav } from "./wav.ts";

const BITRATE = "64k";
const INPUT_FILE = "input.wav";
const OUTPUT_FILE = "output.aac";

let ffmpeg: Promise<FfmpegCore> | undefined;
/** ffmpeg's messages from the current run, for the error when it fails. */
let runLog: string[] = [];

async function loadFfmpeg(): Promise<FfmpegCore> {
  const coreUrl = import.meta.resolve("@ffmpeg/core");
  const wasmBinary = await readFile(new URL("ffmpeg-core.wasm", coreUrl));
  const { default: createFFmpegCore } = await import("@ffmpeg/core");

  const global = globalThis as { location?: { href: string } };
  const needsLocation = global.location === undefined;
  if (needsLocation) global.location = { href: coreUrl };
  let instance: Promise<FfmpegCore>;
  try {
    instance = createFFmpegCore({ wasmBinary });
  } finally {
    if (needsLocation) delete global.location;
  }
  const core = await instance;
  core.setLogger(({ message }) => void runLog.push(message));
  return core;
}

export async function encodeAdtsAac(samples: Float32Array, sampleRateHz: number): Promise<Uint8Array> {
  ffmpeg ??= loadFfmpeg();
  const core = await ffmpeg;
  runLog = [];
  core.FS.writeFile(INPUT_FILE, encodeWav(samples, sampleRateHz));
  try {
    const exitCode = core.exec("-hide_banner", "-loglevel", "error", "-i", INPUT_FILE, "-c:a", "aac", "-b:a", BITRATE, "-f", "adts", OUTPUT_FILE);
    if (exitCode !== 0) {
      throw new Error(`ffmpeg (wasm) could not encode AAC at ${sampleRateHz} Hz (exit ${exitCode}): ${runLog.join(" ").trim()}`);
    }
    return core.FS.readFile(OUTPUT_FILE);
  } finally {
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
