/**
 * Encode cost of each response format for 10 s of 24 kHz speech-band audio.
 * "first call" includes importing and compiling the codec library (what the first request of that
 * format pays); "median" is over the following runs. "× realtime" is audio seconds per CPU second.
 *   bun bench/encoders.ts [--runs 7]
 *   deno run -A bench/encoders.ts [--runs 7]
 */
import { parseArgs } from "node:util";
import { encodeAudio, type ResponseFormat } from "../src/audio/encoders.ts";

const { values } = parseArgs({ options: { runs: { type: "string", default: "7" } } });
const runs = Number(values.runs);

const SAMPLE_RATE_HZ = 24000;
const DURATION_SECONDS = 10;
const FORMATS: ResponseFormat[] = ["wav", "pcm", "mp3", "flac", "opus", "aac"];

// 220 Hz with harmonics up to 6 kHz and a slow glide: broadband enough that no codec has it easy.
const input = new Float32Array(DURATION_SECONDS * SAMPLE_RATE_HZ);
let phase = 0;
for (let i = 0; i < input.length; i++) {
  phase += (220 + 30 * Math.sin((2 * Math.PI * 0.5 * i) / SAMPLE_RATE_HZ)) / SAMPLE_RATE_HZ;
  let value = 0;
  for (let harmonic = 1; harmonic * 250 < 6000; harmonic++) value += Math.sin(2 * Math.PI * harmonic * phase) / harmonic;
  input[i] = 0.3 * value;
}

const column = (text: string, width: number) => text.padStart(width);
console.log(`${navigator.userAgent}; ${DURATION_SECONDS} s of ${SAMPLE_RATE_HZ} Hz mono; median of ${runs} runs\n`);
console.log(`${"format".padEnd(8)}${column("first call ms", 15)}${column("median ms", 11)}${column("× realtime", 12)}${column("kB", 8)}`);
for (const format of FORMATS) {
  const firstStartMs = performance.now();
  const encoded = await encodeAudio(input, SAMPLE_RATE_HZ, format);
  const firstCallMs = performance.now() - firstStartMs;
  const timesMs: number[] = [];
  for (let run = 0; run < runs; run++) {
    const startMs = performance.now();
    await encodeAudio(input, SAMPLE_RATE_HZ, format);
    timesMs.push(performance.now() - startMs);
  }
  timesMs.sort((a, b) => a - b);
  const medianMs = timesMs[Math.floor(timesMs.length / 2)]!;
  console.log(
    `${format.padEnd(8)}${column(firstCallMs.toFixed(1), 15)}${column(medianMs.toFixed(1), 11)}` +
      `${column(`${Math.round((DURATION_SECONDS * 1000) / medianMs)}×`, 12)}${column((encoded.length / 1000).toFixed(1), 8)}`,
  );
}
