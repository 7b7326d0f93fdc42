/**
 * Soak of the engine through a real server process: --requests short utterances on --concurrency client
 * workers, each a raw pcm stream (stream_format "audio") or a WebSocket stream (stream_audio), chosen by a
 * seeded PRNG, which also picks the --disconnect share of them that the client leaves at a random byte
 * (aborts the fetch, closes the socket), so the server's abort paths run hundreds of times. The server's RSS
 * is sampled after a 20-request warm-up, every 100 requests and at the end; a leak shows as growth.
 * Then it waits (up to 10 s) for the server to settle and prints its engine gauges from /metrics
 * (requests waiting / running / paused, request-state bytes), which should all be back to 0; a
 * server without them prints "absent". Exits 1 only if the server process died.
 *   bun bench/engine-soak.ts [--model <bundle>] [--requests 1000] [--concurrency 8] [--disconnect 0.3] [--seed 1]
 *                            [--max-new-tokens 40] [--server-dir <checkout>] [--label <text>] [--markdown]
 *                            [-- extra server flags]
 * Without --model it serves the offline classic engine. With a bundle, streams speak with the uploaded
 * bench voice and stop after --max-new-tokens frames (a random-weight bundle never emits EOS). Rejected
 * requests (429, when the server runs with --max-streams / --max-queue) are counted, not retried.
 * Linux only (RSS is read from /proc of the server process).
 */
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { checkoutRevision, startChildServer } from "./support/child-server.ts";
import { BYTES_PER_SECOND, metricValue, rawPcmStream, tablePrinter, uploadBenchVoice, webSocketStream, type StreamOutcome } from "./support/streams.ts";
import { seededRandom } from "../src/lib/seeded-random.ts";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    model: { type: "string" },
    requests: { type: "string", default: "1000" },
    concurrency: { type: "string", default: "8" },
    disconnect: { type: "string", default: "0.3" },
    seed: { type: "string", default: "1" },
    "max-new-tokens": { type: "string", default: "40" },
    "server-dir": { type: "string" },
    label: { type: "string" },
    markdown: { type: "boolean", default: false },
  },
});
const requestCount = Number(values.requests);
const concurrency = Number(values.concurrency);
const disconnectShare = Number(values.disconnect);
const serverDir = resolve(values["server-dir"] ?? `${import.meta.dir}/..`);
const modelDir = values.model === undefined ? undefined : resolve(values.model);
const maxNewTokens = Number(values["max-new-tokens"]);

const WARM_UP_REQUESTS = 20;
const SAMPLE_EVERY_REQUESTS = 100;
const SETTLE_TIMEOUT_MS = 10_000;
const POCKET_FRAME_SECONDS = 0.08;
// Two short sentences each, so that the classic engine (which streams sentence by sentence) is still
// speaking when a client leaves part-way.
const TEXTS = [
  "The quick brown fox jumps. It lands softly.",
  "Call Stella today. Ask her to bring the things.",
  "It was a bright cold day. The clocks struck.",
  "Numbers like 42 are read out. So is 1999.",
];
const speechFields: Record<string, unknown> = modelDir ? { voice: "bench", max_new_tokens: maxNewTokens } : {};
const ENGINE_GAUGES = [
  ["voxedge_engine_requests", 'state="waiting"'],
  ["voxedge_engine_requests", 'state="running"'],
  ["voxedge_engine_requests", 'state="paused"'],
  ["voxedge_engine_state_bytes", ""],
] as const;


type Mode = "audio" | "ws";
/** `leaveAtFraction`: where in the utterance's audio (0–1) the client disconnects; undefined: it listens to the end. */
interface PlannedRequest {
  mode: Mode;
  textIndex: number;
  leaveAtFraction: number | undefined;
}

const random = seededRandom(Number(values.seed));
const plan: PlannedRequest[] = Array.from({ length: requestCount }, () => ({
  mode: random() < 0.5 ? "audio" : "ws",
  textIndex: Math.floor(random() * TEXTS.length),
  leaveAtFraction: random() < disconnectShare ? random() : undefined,
}));

const server = await startChildServer([...(modelDir ? ["--engine", "pocket", "--model", modelDir] : ["--engine", "classic"]), ...positionals], 60_000, { serverDir });
const crashed = () => server.exitStatus() !== undefined;
const rssMiB = () => (crashed() ? Number.NaN : server.rssMiB());

/** Bytes of pcm each text came to in the warm-up, for placing disconnect points inside the audio. */
const utteranceBytes = new Map<number, number>();
const fallbackUtteranceBytes = (modelDir ? maxNewTokens * POCKET_FRAME_SECONDS : 2) * BYTES_PER_SECOND;

function send({ mode, textIndex, leaveAtFraction }: PlannedRequest): Promise<StreamOutcome> {
  const disconnectAfterBytes = leaveAtFraction === undefined ? undefined : Math.floor(leaveAtFraction * (utteranceBytes.get(textIndex) ?? fallbackUtteranceBytes));
  return (mode === "audio" ? rawPcmStream : webSocketStream)(server.base, TEXTS[textIndex]!, speechFields, { disconnectAfterBytes });
}

const counts = { done: 0, completed: 0, disconnected: 0, rejected: 0, failed: 0 };
const failures: string[] = [];
const MAX_FAILURES_SHOWN = 5;

/** Runs `requests` on `concurrency` workers; stops taking new ones once the server has died. */
async function runAll(requests: readonly PlannedRequest[], onDone: (request: PlannedRequest, outcome: StreamOutcome | undefined) => void): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < requests.length && !crashed()) {
      const request = requests[next++]!;
      const outcome = await send(request).catch((error: unknown) => {
        if (failures.length < MAX_FAILURES_SHOWN) failures.push(`${request.mode}: ${error instanceof Error ? error.message : String(error)}`);
        return undefined;
      });
      onDone(request, outcome);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, requests.length) }, worker));
}

async function engineGauges(): Promise<(number | undefined)[]> {
  const response = await fetch(`${server.base}/metrics`);
  const exposition = await response.text();
  return ENGINE_GAUGES.map(([name, labels]) => metricValue(exposition, name, labels));
}

/** Settled: the engine gauges present all read 0 or, on a server without them, the stream counters stopped moving for a second. */
async function settle(): Promise<number> {
  const startMs = performance.now();
  let previousStreams: number | undefined;
  while (performance.now() - startMs < SETTLE_TIMEOUT_MS && !crashed()) {
    const exposition = await (await fetch(`${server.base}/metrics`)).text();
    const gauges = ENGINE_GAUGES.map(([name, labels]) => metricValue(exposition, name, labels));
    if (gauges.some((value) => value !== undefined)) {
      if (gauges.every((value) => value === undefined || value === 0)) break;
    } else {
      const streams = metricValue(exposition, "voxedge_streams_total") ?? 0;
      if (streams === previousStreams) break;
      previousStreams = streams;
      await new Promise((resolve) => setTimeout(resolve, 1000));
      continue;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return (performance.now() - startMs) / 1000;
}

let exitCode = 0;
try {
  const { data } = (await (await fetch(`${server.base}/v1/models`)).json()) as { data: { description: string }[] };
  if (modelDir) await uploadBenchVoice(server.base);
  const revision = checkoutRevision(serverDir);
  console.log(`server: ${serverDir}${revision ? ` (${revision})` : ""}${positionals.length ? `, flags ${positionals.join(" ")}` : ""}${values.label ? `; label ${values.label}` : ""}`);
  console.log(
    `engine: ${data[0]!.description}; ${requestCount} requests on ${concurrency} workers, raw pcm or WebSocket at random, ${disconnectShare * 100}% left at a random byte (seed ${values.seed})${modelDir ? `; max_new_tokens ${maxNewTokens}, uploaded voice` : ""}`,
  );

  const warmUp = Array.from({ length: WARM_UP_REQUESTS }, (_, index): PlannedRequest => ({ mode: index % 2 ? "ws" : "audio", textIndex: index % TEXTS.length, leaveAtFraction: undefined }));
  await runAll(warmUp, (request, outcome) => {
    if (outcome?.kind !== "completed") return;
    const bytes = outcome.trace.arrivals.reduce((sum, arrival) => sum + arrival.bytes, 0);
    utteranceBytes.set(request.textIndex, Math.max(bytes, utteranceBytes.get(request.textIndex) ?? 0));
  });

  const startMs = performance.now();
  const warmUpRow = `0 (after ${WARM_UP_REQUESTS} warm-up)`;
  const printRow = tablePrinter(["requests done", "completed", "disconnected", "rejected (429)", "failed", "elapsed s", "RSS MiB"], values.markdown!, [warmUpRow.length]);
  const sampleRow = (done: string | number) => {
    const rss = rssMiB();
    printRow([done, counts.completed, counts.disconnected, counts.rejected, counts.failed, ((performance.now() - startMs) / 1000).toFixed(1), Number.isNaN(rss) ? "-" : rss.toFixed(0)]);
    return rss;
  };
  const warmRssMiB = sampleRow(warmUpRow);
  await runAll(plan, (_, outcome) => {
    counts.done++;
    counts[outcome?.kind ?? "failed"]++;
    if (counts.done % SAMPLE_EVERY_REQUESTS === 0 && counts.done < requestCount) sampleRow(counts.done);
  });
  const endRssMiB = sampleRow(counts.done);
  const wallSeconds = (performance.now() - startMs) / 1000;

  if (!crashed()) {
    const settleSeconds = await settle();
    const settledRssMiB = rssMiB();
    const gauges = crashed() ? [] : await engineGauges();
    const growth = (rss: number) => `${rss >= warmRssMiB ? "+" : ""}${(((rss - warmRssMiB) / warmRssMiB) * 100).toFixed(1)}%`;
    console.log(`${(counts.done / wallSeconds).toFixed(1)} requests/s; RSS growth vs after warm-up: ${growth(endRssMiB)} at the end, ${growth(settledRssMiB)} (${settledRssMiB.toFixed(0)} MiB) after settling ${settleSeconds.toFixed(1)} s`);
    for (const [index, [name, labels]] of ENGINE_GAUGES.entries()) console.log(`${name}${labels ? `{${labels}}` : ""}: ${gauges[index] ?? "absent"}`);
  }
  if (failures.length) console.log(`failed requests (first ${failures.length}):\n  ${failures.join("\n  ")}`);
  const exit = server.exitStatus();
  if (exit) {
    console.log(`the server crashed: exit code ${exit.code}, signal ${exit.signal}`);
    exitCode = 1;
  }
} finally {
  server.stop();
}
process.exit(exitCode);
