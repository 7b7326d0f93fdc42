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
 * factory runs synchronously. Bun and Deno have no `location`, so a stand-in is defined for exactly
 * that call and removed before anything else can run. The wasm is compiled from node_modules and
 * instantiated through the loader's `instantiateWasm` hook, so the loader never tries to fetch it.
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
import { lazyLoad } from "../lib/lazy-load.ts";

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

  const global = globalThis as { location?: { href: string } };
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
