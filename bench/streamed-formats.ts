/**
 * What streaming a compressed format costs against pcm: one raw stream (`stream_format: "audio"`) of the
 * 30-word sentence in each response format, the formats taking turns round after round so that the machine's
 * noise falls on all of them alike. Per format, the median of the runs: first audio (the first byte of audio
 * after the request), the whole stream, and its real-time factor.
 *
 *   bun bench/streamed-formats.ts --url <server> [--runs 5] [--upload-voice] [--max-new-tokens 100] [-- extra JSON fields]
 *
 * `--upload-voice` uploads the benches' synthetic voice as "bench" first (for a bundle with no built-in voice)
 * and speaks with it; its prompt is encoded by a warm-up request before any timing.
 */
import { parseArgs } from "node:util";
import { BENCH_SENTENCE } from "./pocket-timing.ts";
import { uploadBenchVoice } from "./support/streams.ts";

const { values } = parseArgs({
  options: { url: { type: "string" }, runs: { type: "string", default: "5" }, "upload-voice": { type: "boolean", default: false }, "max-new-tokens": { type: "string", default: "100" } },
});
if (!values.url) throw new Error("--url <server> is required");
const base = values.url.replace(/\/$/, "");
const FORMATS = ["pcm", "wav", "mp3", "opus", "flac", "aac"] as const;
const fields: Record<string, unknown> = { max_new_tokens: Number(values["max-new-tokens"]), seed: 1 };
if (values["upload-voice"]) {
  await uploadBenchVoice(base);
  fields.voice = "bench";
}

interface Run {
  firstAudioMs: number;
  totalMs: number;
  bytes: number;
}

async function streamOnce(format: string): Promise<Run> {
  const start = performance.now();
  const response = await fetch(`${base}/v1/audio/speech`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input: BENCH_SENTENCE, response_format: format, stream_format: "audio", ...fields }),
  });
  if (response.status !== 200) throw new Error(`${format}: HTTP ${response.status} ${await response.text()}`);
  let firstAudioMs = Number.NaN;
  let bytes = 0;
  for await (const chunk of response.body!) {
    if (chunk.byteLength > 0 && Number.isNaN(firstAudioMs)) firstAudioMs = performance.now() - start;
    bytes += chunk.byteLength;
  }
  return { firstAudioMs, totalMs: performance.now() - start, bytes };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};

// Warm-up: every codec loaded, the voice's prompt encoded.
for (const format of FORMATS) await streamOnce(format);
const runs = new Map<string, Run[]>(FORMATS.map((format) => [format, []]));
for (let round = 0; round < Number(values.runs); round++) for (const format of FORMATS) runs.get(format)!.push(await streamOnce(format));

// The audio's length, from a pcm stream: 16-bit mono at 24 kHz (pcm's rate) over the same frames.
const audioSeconds = median(runs.get("pcm")!.map((run) => run.bytes)) / 2 / 24000;
const pcmFirst = median(runs.get("pcm")!.map((run) => run.firstAudioMs));
console.log(`${values.runs} runs per format, ${audioSeconds.toFixed(2)} s of audio a stream, medians`);
console.log("| format | first audio ms | vs pcm | whole stream ms | RTF | bytes |");
console.log("|---|---|---|---|---|---|");
for (const format of FORMATS) {
  const list = runs.get(format)!;
  const first = median(list.map((run) => run.firstAudioMs));
  const total = median(list.map((run) => run.totalMs));
  console.log(`| ${format} | ${first.toFixed(0)} | ${format === "pcm" ? "–" : `${first - pcmFirst >= 0 ? "+" : ""}${(first - pcmFirst).toFixed(0)}`} | ${total.toFixed(0)} | ${(total / 1000 / audioSeconds).toFixed(3)} | ${median(list.map((run) => run.bytes))} |`);
}
