/**
 * CPU cost of the audio DSP on 10 s of 24 kHz speech-band audio: resampling to each output rate,
 * streamed in 1920-sample (80 ms) chunks versus one-shot, and tempo change at speed 0.5 and 2.0.
 * Reports the median of the runs, after one warm-up run that loads the wasm and lets the JIT settle.
 * "× realtime" is audio seconds per CPU second: for the streamed run, and for the speed change.
 *   bun bench/resampler.ts [--runs 7]
 *   deno run -A bench/resampler.ts [--runs 7]
 */
import { parseArgs } from "node:util";
import { createStreamingResampler, resample } from "../src/audio/resampler.ts";
import { changeSpeed } from "../src/audio/speed.ts";

const { values } = parseArgs({ options: { runs: { type: "string", default: "7" } } });
const runs = Number(values.runs);

const SOURCE_RATE_HZ = 24000;
const DURATION_SECONDS = 10;
const CHUNK_SAMPLES = 1920;
const TARGET_RATES_HZ = [8000, 16000, 22050, 44100, 48000];
const SPEEDS = [0.5, 2.0];

// 220 Hz with harmonics up to 6 kHz and a slow glide: broadband enough to exercise the whole filter.
const input = new Float32Array(DURATION_SECONDS * SOURCE_RATE_HZ);
let phase = 0;
for (let i = 0; i < input.length; i++) {
  phase += (220 + 30 * Math.sin((2 * Math.PI * 0.5 * i) / SOURCE_RATE_HZ)) / SOURCE_RATE_HZ;
  let value = 0;
  for (let harmonic = 1; harmonic * 250 < 6000; harmonic++) value += Math.sin(2 * Math.PI * harmonic * phase) / harmonic;
  input[i] = 0.3 * value;
}

async function medianMs(task: () => Promise<unknown>): Promise<number> {
  await task();
  const timesMs: number[] = [];
  for (let run = 0; run < runs; run++) {
    const startMs = performance.now();
    await task();
    timesMs.push(performance.now() - startMs);
  }
  timesMs.sort((a, b) => a - b);
  return timesMs[Math.floor(timesMs.length / 2)]!;
}

async function streamInChunks(toHz: number): Promise<void> {
  const resampler = await createStreamingResampler(SOURCE_RATE_HZ, toHz);
  try {
    for (let offset = 0; offset < input.length; offset += CHUNK_SAMPLES) resampler.push(input.subarray(offset, offset + CHUNK_SAMPLES));
    resampler.flush();
  } finally {
    resampler.close();
  }
}

const format = (ms: number) => ms.toFixed(1).padStart(10);
const realTimeFactor = (ms: number) => `${Math.round((DURATION_SECONDS * 1000) / ms)}×`.padStart(12);

console.log(`${navigator.userAgent}; ${DURATION_SECONDS} s of ${SOURCE_RATE_HZ} Hz mono; median of ${runs} runs\n`);
console.log(`${"resample to".padEnd(14)}${"stream ms".padStart(10)}${"one-shot ms".padStart(12)}${"× realtime".padStart(12)}`);
for (const toHz of TARGET_RATES_HZ) {
  const streamedMs = await medianMs(() => streamInChunks(toHz));
  const oneShotMs = await medianMs(() => resample(input, SOURCE_RATE_HZ, toHz));
  console.log(`${`${toHz} Hz`.padEnd(14)}${format(streamedMs)}${format(oneShotMs).padStart(12)}${realTimeFactor(streamedMs)}`);
}
console.log(`\n${"speed".padEnd(14)}${"ms".padStart(10)}${"".padStart(12)}${"× realtime".padStart(12)}`);
for (const speed of SPEEDS) {
  const speedMs = await medianMs(() => changeSpeed(input, SOURCE_RATE_HZ, speed));
  console.log(`${speed.toFixed(1).padEnd(14)}${format(speedMs)}${"".padStart(12)}${realTimeFactor(speedMs)}`);
}
