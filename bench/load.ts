/**
 * Concurrent streams against a real server process: for each concurrency N, N streams of the 30-word bench
 * sentence start at once (raw pcm over HTTP, and/or WebSocket with stream_audio), `--rounds` times. Per stream:
 * time to the first PCM byte, RTF (request → last byte over seconds of audio), and whether a player with a
 * 200 ms jitter buffer would run dry. Per row: p50/p95 first audio, median RTF, audio seconds delivered per
 * wall second across all streams, starving streams, streams the server refused (HTTP 429 or the WebSocket
 * equivalent; they have no first-audio figure and count in no other column), how long a refusal took to
 * come back (p50 / p95, request sent → 429 or the WebSocket's error) and the Retry-After it carried, the server's peak RSS (sampled from /proc every 50 ms) and its model state per running stream (the
 * largest voxedge_engine_state_bytes over running requests seen while 2 or more ran, /metrics polled every 250 ms).
 * Then, per mode, the most streams at once
 * that all stayed real time (every stream's RTF below 1) with no player running dry.
 *   bun bench/load.ts [--model <bundle>] [--concurrency 1,2,4,8,16] [--rounds 2] [--modes audio,ws]
 *                     [--server-dir <checkout>] [--label <text>] [--markdown] [-- extra server flags]
 * Without --model it serves the offline classic engine. A random-weight bundle never emits EOS, so Pocket
 * streams are capped at the frames the sentence needs (--max-new-tokens, 275 as in bench/pocket.ts).
 * --server-dir runs another checkout's src/main.ts (default: this one), so that one bench drives two
 * versions; --label names the run in every row, so that their tables paste together (before/after):
 *   bun bench/load.ts --server-dir /tmp/before --label before --markdown
 *   bun bench/load.ts --label after --markdown -- --max-streams 8
 * The client runs on the same machine and takes some of its CPU. Linux only (RSS is read from /proc).
 */
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { BENCH_SENTENCE } from "./pocket-timing.ts";
import { checkoutRevision, startChildServer } from "./support/child-server.ts";
import {
  BENCH_VOICE_SECONDS,
  BYTES_PER_SECOND,
  SAMPLE_RATE_HZ,
  metricValue,
  rawPcmStream,
  tablePrinter,
  uploadBenchVoice,
  webSocketStream,
  type StreamOutcome,
  type StreamTrace,
} from "./support/streams.ts";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    model: { type: "string" },
    concurrency: { type: "string", default: "1,2,4,8,16" },
    rounds: { type: "string", default: "2" },
    modes: { type: "string", default: "audio,ws" },
    "max-new-tokens": { type: "string", default: "275" },
    "server-dir": { type: "string" },
    label: { type: "string" },
    markdown: { type: "boolean", default: false },
  },
});
const concurrencies = values.concurrency!.split(",").map(Number);
const rounds = Number(values.rounds);
const modes = values.modes!.split(",") as Mode[];
type Mode = "audio" | "ws";
for (const mode of modes) if (mode !== "audio" && mode !== "ws") throw new Error(`unknown mode "${mode}"; modes: audio, ws`);
const serverDir = resolve(values["server-dir"] ?? `${import.meta.dir}/..`);
// The server runs in serverDir, so a relative bundle path is taken from here first.
const modelDir = values.model === undefined ? undefined : resolve(values.model);

const JITTER_BUFFER_MS = 200;
// The classic engine ends the sentence by itself, so it gets no cap.
const speechFields: Record<string, unknown> = modelDir ? { voice: "bench", max_new_tokens: Number(values["max-new-tokens"]) } : {};

interface StreamResult {
  firstAudioMs: number;
  rtf: number;
  audioSeconds: number;
  starved: boolean;
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

/** The stages the engine's runners report tick times for (Pocket: prefill, flow_lm, flow_head, decode; classic: step). */
const STAGES = ["prefill", "flow_lm", "flow_head", "decode", "step"] as const;

const percentile = (list: number[], fraction: number) => {
  const sorted = [...list].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)]!;
};

const server = await startChildServer([...(modelDir ? ["--engine", "pocket", "--model", modelDir] : ["--engine", "classic"]), ...positionals], 60_000, { serverDir });
try {
  const { data } = (await (await fetch(`${server.base}/v1/models`)).json()) as { data: { description: string }[] };
  if (modelDir) await uploadBenchVoice(server.base);
  const streamOf = (mode: Mode): Promise<StreamOutcome> => (mode === "audio" ? rawPcmStream : webSocketStream)(server.base, BENCH_SENTENCE, speechFields);
  // One stream per mode first, so graph warm-up and first-connection costs stay out of the table.
  for (const mode of modes) await streamOf(mode);
  const revision = checkoutRevision(serverDir);
  console.log(`server: ${serverDir}${revision ? ` (${revision})` : ""}${positionals.length ? `, flags ${positionals.join(" ")}` : ""}`);
  console.log(`engine: ${data[0]!.description}; ${BENCH_SENTENCE.split(/\s+/).length}-word sentence at ${SAMPLE_RATE_HZ} Hz${modelDir ? `, max_new_tokens ${values["max-new-tokens"]}, a ${BENCH_VOICE_SECONDS} s uploaded voice` : ""}; ${rounds} round(s) per row after 1 warm-up stream per mode; jitter buffer ${JITTER_BUFFER_MS} ms`);
  const labelled = values.label !== undefined;
  const printRow = tablePrinter(
    [...(labelled ? ["label"] : []), "concurrency", "mode", "first audio ms p50 / p95", "per-stream RTF median", "aggregate audio s / wall s", "starving streams", "rejected", "refusal ms p50 / p95", "Retry-After s", "peak RSS MiB", "state MiB / running stream"],
    values.markdown!,
    labelled ? [values.label!.length] : [],
  );
  /** Per mode, the concurrencies at which every stream kept real time (median RTF < 1) and none ran dry. */
  const smooth = new Map<Mode, number[]>();
  /**
   * Polls /metrics until stopped: the largest model state per running request while two or more run (one
   * stream alone holds the pools' minimum, which says nothing of how state scales).
   */
  const watchStatePerStream = () => {
    let peakBytes = 0;
    let polling = Promise.resolve();
    const timer = setInterval(() => {
      polling = polling.then(async () => {
        const exposition = await (await fetch(`${server.base}/metrics`)).text();
        const running = metricValue(exposition, "voxedge_engine_requests", `state="running"`) ?? 0;
        const bytes = metricValue(exposition, "voxedge_engine_state_bytes") ?? 0;
        if (running >= 2) peakBytes = Math.max(peakBytes, bytes / running);
      });
    }, 250);
    return {
      stop: async () => {
        clearInterval(timer);
        await polling;
        return peakBytes / 1024 ** 2;
      },
    };
  };
  /** Per row, what the engine's tick histograms gained: where the time went, stage by stage. */
  const stageRows: (string | number)[][] = [];
  const engineTotals = async () => {
    const exposition = await (await fetch(`${server.base}/metrics`)).text();
    const totals = new Map<string, number>();
    for (const stage of STAGES) {
      for (const [key, name] of [["seconds", "voxedge_engine_tick_seconds_sum"], ["ticks", "voxedge_engine_tick_seconds_count"], ["rows", "voxedge_engine_batch_size_sum"], ["calls", "voxedge_engine_batch_size_count"]] as const) {
        totals.set(`${stage}.${key}`, metricValue(exposition, name, `stage="${stage}"`) ?? 0);
      }
    }
    return totals;
  };
  for (const concurrency of concurrencies) {
    for (const mode of modes) {
      const before = await engineTotals();
      const rss = server.watchRss();
      const state = watchStatePerStream();
      const results: StreamResult[] = [];
      const refusals: { atMs: number; retryAfterSeconds: number | undefined }[] = [];
      let wallSeconds = 0;
      for (let round = 0; round < rounds; round++) {
        const roundStartMs = performance.now();
        const outcomes = await Promise.all(Array.from({ length: concurrency }, () => streamOf(mode)));
        wallSeconds += (performance.now() - roundStartMs) / 1000;
        for (const outcome of outcomes) {
          if (outcome.kind === "rejected") refusals.push(outcome);
          else results.push(resultOf(outcome.trace));
        }
      }
      const peakRssMiB = rss.stop();
      const stateMiB = await state.stop();
      const firsts = results.map((result) => result.firstAudioMs);
      const audioSeconds = results.reduce((sum, result) => sum + result.audioSeconds, 0);
      const starving = results.filter((result) => result.starved).length;
      const served = results.length > 0;
      const rejected = refusals.length;
      const refusalMs = refusals.map((refusal) => refusal.atMs);
      const retryAfters = refusals.map((refusal) => refusal.retryAfterSeconds);
      // The range of Retry-After the refusals said, and how many said none.
      const said = retryAfters.filter((seconds): seconds is number => seconds !== undefined);
      const retryAfterCell = rejected === 0 ? "-" : `${said.length > 0 ? `${Math.min(...said)}–${Math.max(...said)}` : ""}${said.length < rejected ? `${said.length > 0 ? ", " : ""}${rejected - said.length} without` : ""}`;
      printRow([
        ...(labelled ? [values.label!] : []),
        concurrency,
        mode,
        served ? `${percentile(firsts, 0.5).toFixed(0)} / ${percentile(firsts, 0.95).toFixed(0)}` : "-",
        served ? percentile(results.map((result) => result.rtf), 0.5).toFixed(3) : "-",
        (audioSeconds / wallSeconds).toFixed(2),
        `${starving} / ${results.length}`,
        `${rejected} / ${concurrency * rounds}`,
        rejected > 0 ? `${percentile(refusalMs, 0.5).toFixed(0)} / ${percentile(refusalMs, 0.95).toFixed(0)}` : "-",
        retryAfterCell,
        peakRssMiB.toFixed(0),
        stateMiB > 0 ? stateMiB.toFixed(1) : "-",
      ]);
      const rtfs = results.map((result) => result.rtf);
      if (served && starving === 0 && rejected === 0 && Math.max(...rtfs) < 1) smooth.set(mode, [...(smooth.get(mode) ?? []), concurrency]);
      const after = await engineTotals();
      const gained = (key: string) => after.get(key)! - before.get(key)!;
      const cells = STAGES.flatMap((stage) => {
        const ticks = gained(`${stage}.ticks`);
        const calls = gained(`${stage}.calls`);
        return [ticks > 0 ? ((gained(`${stage}.seconds`) / ticks) * 1000).toFixed(2) : "-", calls > 0 ? (gained(`${stage}.rows`) / calls).toFixed(1) : "-"];
      });
      if (cells.some((cell) => cell !== "-")) stageRows.push([...(labelled ? [values.label!] : []), concurrency, mode, ...cells]);
    }
  }
  for (const mode of modes) {
    const levels = smooth.get(mode) ?? [];
    // The largest level such that it and every smaller level measured stayed smooth.
    let most = 0;
    for (const concurrency of [...concurrencies].sort((a, b) => a - b)) {
      if (!levels.includes(concurrency)) break;
      most = concurrency;
    }
    console.log(`${mode}: the most streams at once that all stayed real time with no player running dry (${JITTER_BUFFER_MS} ms buffer): ${most > 0 ? most : "none of the levels measured"}`);
  }
  if (stageRows.length > 0) {
    // Only servers with the engine's tick metrics (voxedge_engine_tick_seconds) have this table.
    console.log("\nwhere a tick's time goes (ms per tick in which the stage ran; rows = streams per model call):");
    const printStages = tablePrinter([...(labelled ? ["label"] : []), "concurrency", "mode", ...STAGES.flatMap((stage) => [`${stage} ms`, `${stage} rows`])], values.markdown!, labelled ? [values.label!.length] : []);
    for (const row of stageRows) printStages(row);
  }
} finally {
  server.stop();
}
