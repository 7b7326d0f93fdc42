/**
 * Client pieces the server benches share: the uploaded bench voice, a raw pcm stream and a WebSocket stream
 * (each can leave early, after a given number of audio bytes, and reports an admission refusal as
 * `rejected` instead of throwing), the server's gauges from /metrics, and a table printer.
 */
import { encodeWav } from "../../src/audio/wav.ts";
import { syntheticVoice } from "../pocket-timing.ts";

export const SAMPLE_RATE_HZ = 24_000;
export const BYTES_PER_SECOND = SAMPLE_RATE_HZ * 2;
export const BENCH_VOICE_SECONDS = 5.04;

/** When each piece of audio arrived (ms since the request) and how many bytes it carried. */
export interface StreamTrace {
  arrivals: { atMs: number; bytes: number }[];
  endMs: number;
}

/**
 * `disconnected`: the client left on purpose (see `disconnectAfterBytes`); `rejected`: the server refused to
 * admit it (429), `atMs` after the request was sent, with the seconds it said to wait (Retry-After, or the
 * WebSocket error's retry_after) when it said any.
 */
export type StreamOutcome = { kind: "completed" | "disconnected"; trace: StreamTrace } | { kind: "rejected"; message: string; atMs: number; retryAfterSeconds: number | undefined };

/** A Retry-After header's seconds (delay-seconds form); undefined when absent or not a number. */
function retryAfterOf(value: string | null | undefined): number | undefined {
  const seconds = value == null ? NaN : Number(value);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : undefined;
}

export interface StreamOptions {
  /** Leave (abort the fetch, close the socket) once this many audio bytes have arrived; 0 leaves as soon as the request is sent. */
  disconnectAfterBytes?: number;
}

/** Pocket has no built-in voice, so the benches speak with this synthetic clip, uploaded as bench/pocket.ts does. */
export async function uploadBenchVoice(base: string, name = "bench"): Promise<void> {
  const form = new FormData();
  form.append("name", name);
  form.append("consent", "bench");
  const wav = encodeWav(syntheticVoice(BENCH_VOICE_SECONDS, SAMPLE_RATE_HZ), SAMPLE_RATE_HZ) as Uint8Array<ArrayBuffer>;
  form.append("audio_sample", new File([wav], `${name}.wav`, { type: "audio/wav" }));
  const upload = await fetch(`${base}/v1/audio/voices`, { method: "POST", body: form });
  if (upload.status !== 200) throw new Error(`voice upload: HTTP ${upload.status} ${await upload.text()}`);
}

/** POST /v1/audio/speech with stream_format "audio": int16 pcm at SAMPLE_RATE_HZ as it is made. */
export async function rawPcmStream(base: string, text: string, fields: Record<string, unknown>, options: StreamOptions = {}): Promise<StreamOutcome> {
  const leaveAfter = options.disconnectAfterBytes;
  const controller = new AbortController();
  const startMs = performance.now();
  const response = await fetch(`${base}/v1/audio/speech`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input: text, stream_format: "audio", response_format: "pcm", sample_rate: SAMPLE_RATE_HZ, ...fields }),
    signal: controller.signal,
  });
  if (response.status === 429) return { kind: "rejected", message: await response.text(), atMs: performance.now() - startMs, retryAfterSeconds: retryAfterOf(response.headers.get("retry-after")) };
  if (response.status !== 200) throw new Error(`raw stream: HTTP ${response.status} ${await response.text()}`);
  const arrivals: StreamTrace["arrivals"] = [];
  const trace = (): StreamTrace => ({ arrivals, endMs: performance.now() - startMs });
  if (leaveAfter !== undefined && leaveAfter <= 0) {
    controller.abort();
    return { kind: "disconnected", trace: trace() };
  }
  let receivedBytes = 0;
  try {
    for await (const chunk of response.body!) {
      arrivals.push({ atMs: performance.now() - startMs, bytes: chunk.byteLength });
      receivedBytes += chunk.byteLength;
      if (leaveAfter !== undefined && receivedBytes >= leaveAfter) {
        controller.abort();
        return { kind: "disconnected", trace: trace() };
      }
    }
  } catch (error) {
    if (controller.signal.aborted) return { kind: "disconnected", trace: trace() };
    throw error;
  }
  return { kind: "completed", trace: trace() };
}

/**
 * An admission refusal on the WebSocket route: the upgrade answered 429 (Bun's client names the status in
 * the error), an `error` message carrying code 429, or close code 1013 (try again later, RFC 6455 registry).
 */
const CLOSE_TRY_AGAIN_LATER = 1013;
const isRejection = (message: { code?: unknown; status?: unknown; message?: unknown }) =>
  message.code === 429 || message.status === 429 || /\b429\b|too many (streams|requests)/i.test(String(message.message ?? ""));

/** One utterance on /v1/audio/speech/stream with stream_audio: session.config, input.text, input.done, until session.done. */
export async function webSocketStream(base: string, text: string, fields: Record<string, unknown>, options: StreamOptions = {}): Promise<StreamOutcome> {
  const leaveAfter = options.disconnectAfterBytes;
  const connectMs = performance.now();
  const socket = new WebSocket(`${base.replace("http", "ws")}/v1/audio/speech/stream`);
  socket.binaryType = "arraybuffer";
  const openFailure = await new Promise<string | undefined>((resolve) => {
    socket.addEventListener("open", () => resolve(undefined), { once: true });
    socket.addEventListener("error", (event) => resolve((event as ErrorEvent).message ?? "error"), { once: true });
  });
  if (openFailure !== undefined) {
    if (isRejection({ message: openFailure })) return { kind: "rejected", message: openFailure, atMs: performance.now() - connectMs, retryAfterSeconds: undefined };
    throw new Error(`WebSocket: could not connect (${openFailure})`);
  }
  socket.send(JSON.stringify({ type: "session.config", stream_audio: true, response_format: "pcm", sample_rate: SAMPLE_RATE_HZ, ...fields }));
  const arrivals: StreamTrace["arrivals"] = [];
  const startMs = performance.now();
  const trace = (): StreamTrace => ({ arrivals, endMs: performance.now() - startMs });
  let receivedBytes = 0;
  const outcome = new Promise<StreamOutcome>((resolve, reject) => {
    socket.addEventListener("message", (event) => {
      if (typeof event.data !== "string") {
        arrivals.push({ atMs: performance.now() - startMs, bytes: (event.data as ArrayBuffer).byteLength });
        receivedBytes += (event.data as ArrayBuffer).byteLength;
        if (leaveAfter !== undefined && receivedBytes >= leaveAfter) resolve({ kind: "disconnected", trace: trace() });
        return;
      }
      const message = JSON.parse(event.data) as { type: string; message?: string; code?: unknown; status?: unknown; sample_rate?: number; retry_after?: unknown };
      if (message.type === "error") {
        if (isRejection(message)) resolve({ kind: "rejected", message: String(message.message), atMs: performance.now() - startMs, retryAfterSeconds: retryAfterOf(message.retry_after === undefined ? undefined : String(message.retry_after)) });
        else reject(new Error(`WebSocket: ${message.message}`));
      }
      if (message.type === "audio.start" && message.sample_rate !== SAMPLE_RATE_HZ) reject(new Error(`WebSocket: audio at ${message.sample_rate} Hz`));
      if (message.type === "session.done") resolve({ kind: "completed", trace: trace() });
    });
    socket.addEventListener(
      "close",
      (event) => {
        if (event.code === CLOSE_TRY_AGAIN_LATER) resolve({ kind: "rejected", message: event.reason, atMs: performance.now() - startMs, retryAfterSeconds: undefined });
        else reject(new Error(`WebSocket: closed (${event.code} ${event.reason}) before session.done`));
      },
      { once: true },
    );
  });
  socket.send(JSON.stringify({ type: "input.text", text }));
  socket.send(JSON.stringify({ type: "input.done" }));
  if (leaveAfter !== undefined && leaveAfter <= 0) {
    socket.close();
    return { kind: "disconnected", trace: trace() };
  }
  try {
    return await outcome;
  } finally {
    socket.close();
  }
}

/** Sum of the samples of `name` in a Prometheus text exposition whose labels include `labels` (e.g. `state="waiting"`); undefined if none. */
export function metricValue(exposition: string, name: string, labels = ""): number | undefined {
  let sum: number | undefined;
  for (const line of exposition.split("\n")) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!match || match[1] !== name || !(match[2] ?? "").includes(labels)) continue;
    sum = (sum ?? 0) + Number(match[3]);
  }
  return sum;
}

/**
 * Prints `headers` now and returns a function that prints one row: a markdown table, or columns padded to
 * the header's width (at least 6, or `minWidths[i]`), as rows print while the bench runs.
 */
export function tablePrinter(headers: readonly string[], markdown: boolean, minWidths: readonly number[] = []): (cells: readonly (string | number)[]) => void {
  const widths = headers.map((header, index) => Math.max(header.length, 6, minWidths[index] ?? 0));
  const line = (cells: readonly (string | number)[]) =>
    markdown ? `| ${cells.join(" | ")} |` : cells.map((cell, index) => String(cell).padEnd(widths[index]!)).join("  ").trimEnd();
  console.log(line(headers));
  console.log(markdown ? `|${headers.map(() => "---").join("|")}|` : widths.map((width) => "-".repeat(width)).join("  "));
  return (cells) => console.log(line(cells));
}
