/**
 * Latency of a 10-word sentence through the HTTP API on the configured engine (the offline classic one
 * on a machine without weights): time to first audio byte and total, for a file, a raw stream and SSE.
 *   bun bench/latency.ts [--runs 7]
 */
import { parseArgs } from "node:util";
import { createApp } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { ModelHost } from "../src/engine/host.ts";
import { loadModel } from "../src/models/registry.ts";
import { createLogger, silentLogger } from "../src/log/logger.ts";
import { loadRuntime } from "../src/runtime/serve.ts";
import { FolderVoiceStore } from "../src/voices/folder-store.ts";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const { values } = parseArgs({ options: { runs: { type: "string", default: "7" } } });
const runs = Number(values.runs);
const SENTENCE = "The quick brown fox jumps over the lazy sleeping dog.";

const config = loadConfig({ host: "127.0.0.1", port: "0" }, {});
const host = ModelHost.load(() => loadModel(config, createLogger("warn")));
await host.loaded;
const voices = await FolderVoiceStore.open({ dir: mkdtempSync(join(tmpdir(), "voxedge-bench-voices-")), maxVoices: 10, logger: silentLogger });
const runtime = await loadRuntime();
const { app } = createApp({ config, host, logger: silentLogger, voices, runtime });
const server = runtime.serve(app.fetch, config.host, config.port);

interface Timing {
  firstByteMs: number;
  totalMs: number;
}

async function timeOnce(body: Record<string, unknown>, firstAudioMarker: (text: string) => boolean): Promise<Timing> {
  const start = performance.now();
  const response = await fetch(`${server.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: SENTENCE, ...body }) });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let firstByteMs = Number.NaN;
  let seen = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    if (Number.isNaN(firstByteMs)) {
      seen += decoder.decode(value, { stream: true });
      if (firstAudioMarker(seen)) firstByteMs = performance.now() - start;
    }
  }
  return { firstByteMs, totalMs: performance.now() - start };
}

const modes: [string, Record<string, unknown>, (text: string) => boolean][] = [
  ["file (wav)", { response_format: "wav" }, () => true],
  // The raw wav stream's first 44 bytes are the header, sent before any audio exists.
  ["raw stream (pcm)", { stream_format: "audio", response_format: "pcm" }, () => true],
  ["SSE", { stream: true }, (text) => text.includes("speech.audio.delta")],
];

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
console.log(`engine: ${host.model!.capabilities.description}; ${runs} runs after 1 warm-up; "${SENTENCE}" (10 words)`);
console.log("| mode | first audio ms (min / median) | total ms (min / median) |");
console.log("|---|---|---|");
for (const [name, body, marker] of modes) {
  await timeOnce(body, marker);
  const timings: Timing[] = [];
  for (let run = 0; run < runs; run++) timings.push(await timeOnce(body, marker));
  const first = timings.map((timing) => timing.firstByteMs);
  const total = timings.map((timing) => timing.totalMs);
  console.log(`| ${name} | ${Math.min(...first).toFixed(1)} / ${median(first).toFixed(1)} | ${Math.min(...total).toFixed(1)} / ${median(total).toFixed(1)} |`);
}
await server.stop();
await host.close();
