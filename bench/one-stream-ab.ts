/**
 * One stream's first audio and RTF on two servers side by side (A and B: two checkouts, two flag sets, two
 * environments), their requests alternating so that the machine's noise falls on both alike. Each server gets
 * the benches' synthetic voice as "bench"; two warm-up streams each, then `--runs` streams of the 30-word
 * sentence (100 frames) on each; medians.
 *
 *   bun bench/one-stream-ab.ts --a <server> --b <server> [--runs 12]
 */
import { parseArgs } from "node:util";
import { BENCH_SENTENCE } from "./pocket-timing.ts";
import { uploadBenchVoice } from "./support/streams.ts";

const { values } = parseArgs({ options: { a: { type: "string" }, b: { type: "string" }, runs: { type: "string", default: "12" } } });
if (!values.a || !values.b) throw new Error("--a <server> and --b <server> are required");
const servers = { A: values.a.replace(/\/$/, ""), B: values.b.replace(/\/$/, "") };
for (const base of Object.values(servers)) await uploadBenchVoice(base);

async function once(base: string): Promise<{ firstAudioMs: number; rtf: number }> {
  const start = performance.now();
  const response = await fetch(`${base}/v1/audio/speech`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input: BENCH_SENTENCE, voice: "bench", response_format: "pcm", stream_format: "audio", max_new_tokens: 100, seed: 1 }),
  });
  if (response.status !== 200) throw new Error(`${base}: HTTP ${response.status} ${await response.text()}`);
  let firstAudioMs = Number.NaN;
  let bytes = 0;
  for await (const chunk of response.body!) {
    if (Number.isNaN(firstAudioMs)) firstAudioMs = performance.now() - start;
    bytes += chunk.byteLength;
  }
  // pcm: 16-bit mono at 24 kHz.
  return { firstAudioMs, rtf: (performance.now() - start) / 1000 / (bytes / 2 / 24000) };
}

for (const base of Object.values(servers)) for (let warmUp = 0; warmUp < 2; warmUp++) await once(base);
const results = { A: [] as { firstAudioMs: number; rtf: number }[], B: [] as { firstAudioMs: number; rtf: number }[] };
for (let run = 0; run < Number(values.runs); run++) for (const side of ["A", "B"] as const) results[side].push(await once(servers[side]));
const median = (list: number[]) => [...list].sort((x, y) => x - y)[Math.floor(list.length / 2)]!;
console.log(`| server | first audio ms | RTF |  (${values.runs} streams each, medians)`);
console.log("|---|---|---|");
for (const side of ["A", "B"] as const) console.log(`| ${side} ${servers[side]} | ${median(results[side].map((r) => r.firstAudioMs)).toFixed(0)} | ${median(results[side].map((r) => r.rtf)).toFixed(3)} |`);
