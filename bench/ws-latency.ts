/**
 * WebSocket latency on the configured engine: time from sending an input.text that completes the first
 * sentence to the first binary audio frame, and to that sentence's audio.done.
 *   bun bench/ws-latency.ts [--runs 10]
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createApp } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { ModelHost } from "../src/engine/host.ts";
import { loadModel } from "../src/models/registry.ts";
import { createLogger, silentLogger } from "../src/log/logger.ts";
import { loadRuntime } from "../src/runtime/serve.ts";
import { FolderVoiceStore } from "../src/voices/folder-store.ts";

const { values } = parseArgs({ options: { runs: { type: "string", default: "10" } } });
const runs = Number(values.runs);
const FIRST_SENTENCE = "The quick brown fox jumps over the lazy sleeping dog. ";

const config = loadConfig({ host: "127.0.0.1", port: "0" }, {});
const host = ModelHost.load(() => loadModel(config, createLogger("warn")));
await host.loaded;
const runtime = await loadRuntime();
const voices = await FolderVoiceStore.open({ dir: mkdtempSync(join(tmpdir(), "voxedge-bench-voices-")), maxVoices: 10, logger: silentLogger });
const { app } = createApp({ config, host, logger: silentLogger, voices, runtime });
const server = runtime.serve(app.fetch, config.host, config.port);

async function timeOnce(streamAudio: boolean): Promise<{ firstFrameMs: number; sentenceDoneMs: number }> {
  const socket = new WebSocket(`${server.url.replace("http", "ws")}/v1/audio/speech/stream`);
  socket.binaryType = "arraybuffer";
  await new Promise((resolve) => socket.addEventListener("open", resolve, { once: true }));
  socket.send(JSON.stringify({ type: "session.config", stream_audio: streamAudio }));
  // A round trip after the config, so its validation is not counted.
  socket.send(JSON.stringify({ type: "input.done" }));
  await new Promise<void>((resolve) => socket.addEventListener("message", () => resolve(), { once: true }));
  let firstFrameMs = Number.NaN;
  const start = performance.now();
  const done = new Promise<number>((resolve) =>
    socket.addEventListener("message", (event) => {
      if (typeof event.data !== "string" && Number.isNaN(firstFrameMs)) firstFrameMs = performance.now() - start;
      if (typeof event.data === "string" && JSON.parse(event.data).type === "audio.done") resolve(performance.now() - start);
    }),
  );
  socket.send(JSON.stringify({ type: "input.text", text: FIRST_SENTENCE }));
  const sentenceDoneMs = await done;
  socket.close();
  return { firstFrameMs, sentenceDoneMs };
}

const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!;
console.log(`engine: ${host.model!.capabilities.description}; ${runtime.name}; ${runs} runs after 1 warm-up`);
console.log("| stream_audio | input.text → first binary frame ms (min / median) | → audio.done ms (min / median) |");
console.log("|---|---|---|");
for (const streamAudio of [true, false]) {
  await timeOnce(streamAudio);
  const timings = [];
  for (let run = 0; run < runs; run++) timings.push(await timeOnce(streamAudio));
  const first = timings.map((timing) => timing.firstFrameMs);
  const done = timings.map((timing) => timing.sentenceDoneMs);
  console.log(`| ${streamAudio} | ${Math.min(...first).toFixed(1)} / ${median(first).toFixed(1)} | ${Math.min(...done).toFixed(1)} / ${median(done).toFixed(1)} |`);
}
await server.stop();
await host.close();
