/**
 * Soak of the offline classic engine through a real server process: mixed traffic (files in every format,
 * raw and SSE streams, speed and resampling, voice uploads that run the FLAC/Ogg/MP3 decoders) for N sentences, printing per
 * window the median time a sentence takes, the server's open file descriptors and its RSS. A leak shows
 * as a rising descriptor count; a slowdown as a rising median.
 *   bun bench/offline-engine-soak.ts [--sentences 2000] [--window 200]
 * Linux only (descriptors and RSS are read from /proc of the server process).
 */
import { parseArgs } from "node:util";
import { encodeAudio } from "../src/audio/encoders.ts";
import { startChildServer } from "./support/child-server.ts";

const { values } = parseArgs({ options: { sentences: { type: "string", default: "2000" }, window: { type: "string", default: "200" } } });
const totalSentences = Number(values.sentences);
const windowSize = Number(values.window);

const SENTENCES = [
  "The quick brown fox jumps over the lazy dog.",
  "Please call Stella and ask her to bring these things with her from the store.",
  "It was a bright cold day in April, and the clocks were striking thirteen.",
  "Numbers like 42 and 1999 are read out loud.",
];
const FILE_FORMATS = ["wav", "mp3", "flac", "opus", "aac"] as const;

function tone(seconds: number, rateHz: number): Float32Array {
  const samples = new Float32Array(Math.round(seconds * rateHz));
  for (let i = 0; i < samples.length; i++) samples[i] = 0.3 * Math.sin((2 * Math.PI * 220 * i) / rateHz);
  return samples;
}

const uploads: { name: string; type: string; bytes: Uint8Array }[] = [
  { name: "v.flac", type: "audio/flac", bytes: await encodeAudio(tone(2, 24000), 24000, "flac") },
  { name: "v.ogg", type: "audio/ogg", bytes: await encodeAudio(tone(2, 24000), 24000, "opus") },
  { name: "v.mp3", type: "audio/mpeg", bytes: await encodeAudio(tone(2, 24000), 24000, "mp3") },
];

const server = await startChildServer(["--engine", "classic"]);
const { base } = server;

async function speak(index: number): Promise<void> {
  const input = SENTENCES[index % SENTENCES.length]!;
  const kind = index % 9;
  const body: Record<string, unknown> = { input };
  if (kind < FILE_FORMATS.length) body.response_format = FILE_FORMATS[kind];
  else if (kind === 5) Object.assign(body, { stream_format: "audio", response_format: "pcm" });
  else if (kind === 6) body.stream = true;
  else if (kind === 7) Object.assign(body, { speed: 1.25, response_format: "pcm" });
  else Object.assign(body, { sample_rate: 48000, response_format: "wav" });
  const response = await fetch(`${base}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  await response.arrayBuffer();
  if (response.status !== 200) throw new Error(`sentence ${index}: HTTP ${response.status}`);
}

async function uploadAndDelete(index: number): Promise<void> {
  const upload = uploads[index % uploads.length]!;
  const form = new FormData();
  form.set("name", `soak${index}`);
  form.set("consent", "soak");
  form.set("audio_sample", new Blob([upload.bytes as Uint8Array<ArrayBuffer>], { type: upload.type }), upload.name);
  const response = await fetch(`${base}/v1/audio/voices`, { method: "POST", body: form });
  await response.arrayBuffer();
  if (response.status !== 200) throw new Error(`upload ${upload.name}: HTTP ${response.status}`);
  await (await fetch(`${base}/v1/audio/voices/soak${index}`, { method: "DELETE" })).arrayBuffer();
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

try {
  console.log(`offline engine soak: ${totalSentences} sentences, mixed formats/streams, a voice upload every 5th sentence`);
  console.log("| sentences | median ms/sentence | open fds | RSS MiB |");
  console.log("|---|---|---|---|");
  console.log(`| 0 | – | ${server.openDescriptors()} | ${server.rssMiB().toFixed(0)} |`);
  let times: number[] = [];
  for (let index = 0; index < totalSentences; index++) {
    if (index % 5 === 0) await uploadAndDelete(index);
    const start = performance.now();
    await speak(index);
    times.push(performance.now() - start);
    if ((index + 1) % windowSize === 0) {
      console.log(`| ${index + 1} | ${median(times).toFixed(1)} | ${server.openDescriptors()} | ${server.rssMiB().toFixed(0)} |`);
      times = [];
    }
  }
} finally {
  server.stop();
}
