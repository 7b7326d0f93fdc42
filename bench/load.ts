/**
 * Concurrent streams against a real server process: for each concurrency N, N streams of the 30-word bench
 * sentence start at once (raw pcm over HTTP, and/or WebSocket with stream_audio), `--rounds` times. Per stream:
 * time to the first PCM byte, RTF (request → last byte over seconds of audio), and whether a player with a
 * 200 ms jitter buffer would run dry. Per row: p50/p95 first audio, median RTF, audio seconds delivered per
 * wall second across all streams, starving streams, and the server's peak RSS (sampled from /proc every 50 ms).
 *   bun bench/load.ts [--model <bundle>] [--concurrency 1,2,4,8] [--rounds 2] [--modes audio,ws] [-- extra server flags]
 * Without --model it serves the offline classic engine. A random-weight bundle never emits EOS, so Pocket
 * streams are capped at the frames the sentence needs (--max-new-tokens, 275 as in bench/pocket.ts).
 * The client runs on the same machine and takes some of its CPU. Linux only (RSS is read from /proc).
 */
import { parseArgs } from "node:util";
import { encodeWav } from "../src/audio/wav.ts";
import { BENCH_SENTENCE, syntheticVoice } from "./pocket-timing.ts";
import { startChildServer } from "./support/child-server.ts";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    model: { type: "string" },
    concurrency: { type: "string", default: "1,2,4,8" },
    rounds: { type: "string", default: "2" },
    modes: { type: "string", default: "audio,ws" },
    "max-new-tokens": { type: "string", default: "275" },
  },
});
const concurrencies = values.concurrency!.split(",").map(Number);
const rounds = Number(values.rounds);
const modes = values.modes!.split(",") as Mode[];
type Mode = "audio" | "ws";
for (const mode of modes) if (mode !== "audio" && mode !== "ws") throw new Error(`unknown mode "${mode}"; modes: audio, ws`);

const SAMPLE_RATE_HZ = 24_000;
const VOICE_SECONDS = 5.04;
const BYTES_PER_SECOND = SAMPLE_RATE_HZ * 2;
const JITTER_BUFFER_MS = 200;
// The classic engine ends the sentence by itself, so it gets no cap; Pocket has no built-in voice, so it
// speaks with an uploaded synthetic clip, as bench/pocket.ts does.
const speechFields: Record<string, unknown> = {
  response_format: "pcm",
  sample_rate: SAMPLE_RATE_HZ,
  ...(values.model ? { voice: "bench", max_new_tokens: Number(values["max-new-tokens"]) } : {}),
};

/** When each piece of audio arrived (ms since the request) and how many bytes it carried. */
interface StreamTrace {
  arrivals: { atMs: number; bytes: number }[];
  endMs: number;
}

interface StreamResult {
  firstAudioMs: number;
  rtf: number;
  audioSeconds: number;
  starved: boolean;
}

async function rawPcmStream(base: string): Promise<StreamTrace> {
  const startMs = performance.now();
  const response = await fetch(`${base}/v1/audio/speech`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input: BENCH_SENTENCE, stream_format: "audio", ...speechFields }),
  });
  if (response.status !== 200) throw new Error(`raw stream: HTTP ${response.status} ${await response.text()}`);
  const arrivals: StreamTrace["arrivals"] = [];
  for await (const chunk of response.body!) arrivals.push({ atMs: performance.now() - startMs, bytes: chunk.byteLength });
  return { arrivals, endMs: performance.now() - startMs };
}

async function webSocketStream(base: string): Promise<StreamTrace> {
  const socket = new WebSocket(`${base.replace("http", "ws")}/v1/audio/speech/stream`);
  socket.binaryType = "arraybuffer";
  await new Promise((resolve, reject) => {
    socket.addEventListener("open", resolve, { once: true });
    socket.addEventListener("error", () => reject(new Error("WebSocket: could not connect")), { once: true });
  });
  socket.send(JSON.stringify({ type: "session.config", stream_audio: true, ...speechFields }));
  const arrivals: StreamTrace["arrivals"] = [];
  const startMs = performance.now();
  const done = new Promise<void>((resolve, reject) => {
    socket.addEventListener("message", (event) => {
      if (typeof event.data !== "string") {
        arrivals.push({ atMs: performance.now() - startMs, bytes: (event.data as ArrayBuffer).byteLength });
        return;
      }
      const message = JSON.parse(event.data) as { type: string; message?: string; sample_rate?: number };
      if (message.type === "error") reject(new Error(`WebSocket: ${message.message}`));
      if (message.type === "audio.start" && message.sample_rate !== SAMPLE_RATE_HZ) reject(new Error(`WebSocket: audio at ${message.sample_rate} Hz`));
      if (message.type === "session.done") resolve();
    });
    socket.addEventListener("close", () => reject(new Error("WebSocket: closed before session.done")), { once: true });
  });
  socket.send(JSON.stringify({ type: "input.text", text: BENCH_SENTENCE }));
  socket.send(JSON.stringify({ type: "input.done" }));
  await done;
  const endMs = performance.now() - startMs;
  socket.close();
  return { arrivals, endMs };
}

/**
 * A player that starts JITTER_BUFFER_MS after the first byte and then plays in real time runs dry if, just
 * before some piece arrives, it has played more audio than had arrived (between arrivals what it holds only
 * shrinks, so those instants are the worst).
 */
function starves(trace: StreamTrace): boolean {
  const playStartMs = trace.arrivals[0]!.atMs + JITTER_BUFFER_MS;
  let receivedMs = 0;
  for (const { atMs, bytes } of trace.arrivals) {
    if (atMs - playStartMs > receivedMs) return true;
    receivedMs += (bytes / BYTES_PER_SECOND) * 1000;
  }
  return false;
}

function resultOf(trace: StreamTrace): StreamResult {
  if (trace.arrivals.length === 0) throw new Error("a stream returned no audio");
  const audioSeconds = trace.arrivals.reduce((sum, arrival) => sum + arrival.bytes, 0) / BYTES_PER_SECOND;
  return { firstAudioMs: trace.arrivals[0]!.atMs, rtf: trace.endMs / 1000 / audioSeconds, audioSeconds, starved: starves(trace) };
}

const percentile = (list: number[], fraction: number) => {
  const sorted = [...list].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)]!;
};

const server = await startChildServer([...(values.model ? ["--engine", "pocket", "--model", values.model] : ["--engine", "classic"]), ...positionals]);
try {
  const { data } = (await (await fetch(`${server.base}/v1/models`)).json()) as { data: { description: string }[] };
  if (values.model) {
    const form = new FormData();
    form.append("name", "bench");
    form.append("consent", "bench");
    form.append("audio_sample", new File([encodeWav(syntheticVoice(VOICE_SECONDS, SAMPLE_RATE_HZ), SAMPLE_RATE_HZ) as Uint8Array<ArrayBuffer>], "bench.wav", { type: "audio/wav" }));
    const upload = await fetch(`${server.base}/v1/audio/voices`, { method: "POST", body: form });
    if (upload.status !== 200) throw new Error(`voice upload: HTTP ${upload.status} ${await upload.text()}`);
  }
  const streamOf = (mode: Mode) => (mode === "audio" ? rawPcmStream(server.base) : webSocketStream(server.base));
  // One stream per mode first, so graph warm-up and first-connection costs stay out of the table.
  for (const mode of modes) await streamOf(mode);
  console.log(`engine: ${data[0]!.description}; ${BENCH_SENTENCE.split(/\s+/).length}-word sentence at ${SAMPLE_RATE_HZ} Hz${values.model ? `, max_new_tokens ${values["max-new-tokens"]}, a ${VOICE_SECONDS} s uploaded voice` : ""}; ${rounds} round(s) per row after 1 warm-up stream per mode; jitter buffer ${JITTER_BUFFER_MS} ms`);
  console.log("| concurrency | mode | first audio ms p50 / p95 | per-stream RTF median | aggregate audio s / wall s | starving streams | peak RSS MiB |");
  console.log("|---|---|---|---|---|---|---|");
  for (const concurrency of concurrencies) {
    for (const mode of modes) {
      const rss = server.watchRss();
      const results: StreamResult[] = [];
      let wallSeconds = 0;
      for (let round = 0; round < rounds; round++) {
        const roundStartMs = performance.now();
        const traces = await Promise.all(Array.from({ length: concurrency }, () => streamOf(mode)));
        wallSeconds += (performance.now() - roundStartMs) / 1000;
        results.push(...traces.map(resultOf));
      }
      const peakRssMiB = rss.stop();
      const firsts = results.map((result) => result.firstAudioMs);
      const audioSeconds = results.reduce((sum, result) => sum + result.audioSeconds, 0);
      const starving = results.filter((result) => result.starved).length;
      console.log(
        `| ${concurrency} | ${mode} | ${percentile(firsts, 0.5).toFixed(0)} / ${percentile(firsts, 0.95).toFixed(0)} | ${percentile(results.map((result) => result.rtf), 0.5).toFixed(3)} | ${(audioSeconds / wallSeconds).toFixed(2)} | ${starving} / ${results.length} | ${peakRssMiB.toFixed(0)} |`,
      );
    }
  }
} finally {
  server.stop();
}
