/**
 * Does encoding hold the event loop? Each case sends ordinary requests to a server on the offline engine (its
 * own child process) while /health is asked, one request after another, every 50 ms: per case, /health's
 * latency (p50, p100), the server's peak resident memory over its idle figure, the case's wall time and the
 * statuses it got. A server whose encoders run on its main thread answers /health only once a file is encoded.
 *
 *   bun bench/encoding-event-loop.ts [--server-dir <checkout>] [--cases aac,mp3,...]
 *
 * `--server-dir` runs another checkout's server (the same bench against code before a change).
 */
import { parseArgs } from "node:util";
import { checkoutRevision, startChildServer, type ChildServer } from "./support/child-server.ts";

const { values } = parseArgs({ options: { "server-dir": { type: "string" }, cases: { type: "string" } } });
const serverDir = values["server-dir"] ?? process.cwd();

/** Ordinary English prose, cut to `chars` characters at a word boundary. */
function prose(chars: number): string {
  const sentence = "The quick brown fox jumps over the lazy dog while the morning sun rises slowly above the quiet hills, and the river keeps running toward the distant sea. ";
  let text = "";
  while (text.length < chars) text += sentence;
  return text.slice(0, chars).replace(/\s+\S*$/, "").padEnd(chars, ".");
}

interface CaseResult {
  statuses: number[];
}

type Case = (base: string) => Promise<CaseResult>;

async function drain(response: Response): Promise<number> {
  if (response.body) for await (const _ of response.body);
  return response.status;
}

const speech = (format: string, chars: number, extra: Record<string, unknown> = {}): Case => async (base) => {
  const response = await fetch(`${base}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: prose(chars), response_format: format, ...extra }) });
  return { statuses: [await drain(response)] };
};

const streams = (count: number): Case => async (base) => {
  const statuses = await Promise.all(Array.from({ length: count }, () => speech("aac", 300, { stream_format: "audio" })(base).then((result) => result.statuses[0]!)));
  return { statuses };
};

const CASES: Record<string, Case> = {
  "aac 4096 chars": speech("aac", 4096),
  "mp3 4096 chars": speech("mp3", 4096),
  "opus 4096 chars": speech("opus", 4096),
  "wav 4096 chars": speech("wav", 4096),
  "batch 8 × 500 aac": async (base) => {
    const items = Array.from({ length: 8 }, () => ({ input: prose(500) }));
    const response = await fetch(`${base}/v1/audio/speech/batch`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ items, response_format: "aac" }) });
    return { statuses: [await drain(response)] };
  },
  "ElevenLabs with-timestamps mp3_44100_192": async (base) => {
    const response = await fetch(`${base}/elevenlabs/v1/text-to-speech/rms/with-timestamps?output_format=mp3_44100_192`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ text: prose(4096) }) });
    return { statuses: [await drain(response)] };
  },
  "8 streamed aac": streams(8),
  "32 streamed aac": streams(32),
};

const HEALTH_INTERVAL_MS = 50;

/** Asks /health one request after another (one every 50 ms at most) until `stop`; the latencies, in ms. */
function sampleHealth(base: string): { stop(): Promise<number[]> } {
  const latenciesMs: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const start = performance.now();
      await fetch(`${base}/health`).then((response) => response.arrayBuffer());
      const elapsedMs = performance.now() - start;
      latenciesMs.push(elapsedMs);
      if (elapsedMs < HEALTH_INTERVAL_MS) await new Promise((resolve) => setTimeout(resolve, HEALTH_INTERVAL_MS - elapsedMs));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return latenciesMs;
    },
  };
}

const percentile = (sorted: number[], fraction: number) => sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!;

const selected = values.cases ? values.cases.split(",").map((name) => Object.keys(CASES).find((key) => key.startsWith(name.trim()))!) : Object.keys(CASES);
console.log(`server: ${serverDir} ${checkoutRevision(serverDir)}, offline engine (voice rms), a fresh server per case`);
console.log("| case | /health p50 ms | /health p100 ms | peak RSS MiB (idle) | wall s | statuses |");
console.log("|---|---:|---:|---:|---:|---|");
for (const name of selected) {
  const server: ChildServer = await startChildServer(["--engine", "classic"], 60_000, { serverDir });
  try {
    // Warm-up: the codec loaded, so the case measures encoding, not a first compile.
    await speech(name.includes("mp3") ? "mp3" : name.includes("opus") ? "opus" : name.includes("wav") ? "wav" : "aac", 20)(server.base);
    const memory = server.watchRss();
    const health = sampleHealth(server.base);
    const start = performance.now();
    const { statuses } = await CASES[name]!(server.base);
    const wallSeconds = (performance.now() - start) / 1000;
    const latencies = (await health.stop()).sort((a, b) => a - b);
    const peakMiB = memory.stop();
    const counts = new Map<number, number>();
    for (const status of statuses) counts.set(status, (counts.get(status) ?? 0) + 1);
    const statusText = [...counts].map(([status, count]) => (count > 1 ? `${count}×${status}` : `${status}`)).join(", ");
    console.log(`| ${name} | ${percentile(latencies, 0.5).toFixed(0)} | ${latencies.at(-1)!.toFixed(0)} | ${peakMiB.toFixed(0)} (${memory.idleMiB.toFixed(0)}) | ${wallSeconds.toFixed(1)} | ${statusText} |`);
  } finally {
    server.stop();
  }
}
