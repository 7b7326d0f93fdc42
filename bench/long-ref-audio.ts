/**
 * One long ref_audio against a running server: how long the request takes, how long /health takes while it
 * runs, and the server's resident memory before it and at its highest while it runs (both sampled every 100 ms).
 *
 *   bun run voxedge serve --model /tmp/pocket-full --port 8123 &
 *   bun bench/long-ref-audio.ts --url http://127.0.0.1:8123 --pid <server pid> --seconds 29.5
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { encodeWav } from "../src/audio/wav.ts";

const { values } = parseArgs({ options: { url: { type: "string", default: "http://127.0.0.1:8123" }, pid: { type: "string" }, seconds: { type: "string", default: "29.5" } } });
const seconds = Number(values.seconds);
const rateHz = 24_000;
const clip = new Float32Array(Math.round(seconds * rateHz));
for (let index = 0; index < clip.length; index++) clip[index] = 0.3 * Math.sin((2 * Math.PI * 180 * index) / rateHz) * (1 + 0.5 * Math.sin(index / 3000));
const refAudio = `data:audio/wav;base64,${Buffer.from(encodeWav(clip, rateHz)).toString("base64")}`;

const memoryMiB = (field: "VmRSS" | "VmHWM") => {
  if (!values.pid) return NaN;
  const match = readFileSync(`/proc/${values.pid}/status`, "utf-8").match(new RegExp(`${field}:\\s+(\\d+) kB`));
  return match ? Number(match[1]) / 1024 : NaN;
};

const rssBefore = memoryMiB("VmRSS");
let running = true;
const healthMs: number[] = [];
let peakRss = rssBefore;
// Apart from the /health probe, which a blocked server holds up.
const memorySampler = setInterval(() => (peakRss = Math.max(peakRss, memoryMiB("VmRSS"))), 100);
const probe = (async () => {
  while (running) {
    const started = performance.now();
    await fetch(`${values.url}/health`);
    healthMs.push(performance.now() - started);
    await Bun.sleep(100);
  }
})();
const started = performance.now();
const response = await fetch(`${values.url}/v1/audio/speech`, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ input: "Hello there, this is a cloned voice speaking.", ref_audio: refAudio, response_format: "wav", max_new_tokens: 40, seed: 1 }),
});
const audioBytes = (await response.arrayBuffer()).byteLength;
const totalMs = performance.now() - started;
running = false;
clearInterval(memorySampler);
await probe;
const sorted = [...healthMs].sort((a, b) => a - b);
console.log("| ref_audio s | status | answered whole ms | /health p50 / max ms | RSS before → peak while it runs, MiB |");
console.log("|---|---|---|---|---|");
console.log(`| ${seconds} | ${response.status} (${audioBytes} B) | ${totalMs.toFixed(0)} | ${sorted[Math.floor(sorted.length / 2)]?.toFixed(0)} / ${sorted.at(-1)?.toFixed(0)} | ${rssBefore.toFixed(0)} → ${peakRss.toFixed(0)} |`);
