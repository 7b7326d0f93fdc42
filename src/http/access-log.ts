/**
 * One JSON line per request, written when its response has ended: at once for an answer made whole, and
 * for a streamed one (raw audio, SSE, batch) when its last byte is taken or its client leaves, which the
 * route reports through streamEnded. Fields: request id, method, route pattern, status, latency, time to
 * first audio and seconds of audio.
 * Never the input text, the audio, the query string or the path's own values (a voice name is the
 * uploader's data): the route is the pattern, e.g. `/v1/audio/voices/:name`.
 *
 * The request id is the proxy's `X-Request-Id` when it sent a usable one (so one id follows the request
 * through nginx's and our logs), else a fresh UUID; it is returned as `X-Request-Id` either way.
 */
import { randomUUID } from "node:crypto";
import type { Context, Hono } from "hono";
import { matchedRoutes } from "hono/route";
import type { Logger } from "../log/logger.ts";
import type { StreamOutcome } from "../metrics.ts";
import type { ServerLifecycle } from "../async/server-lifecycle.ts";

export const REQUEST_ID_HEADER = "X-Request-Id";
/** Printable ASCII without spaces, as nginx's $request_id, UUIDs and tracing ids are; anything else is replaced. */
const USABLE_REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

/**
 * A streamed response's end as its log line's `end` names it (none: completed). "aborted", the client gone
 * (or stalled) mid-stream, is written "client_closed", after nginx's 499 "client closed request": a status
 * the line cannot carry, since the 200 has left. A client gone before its answer is a 499 status.
 */
const LOGGED_END: Readonly<Record<StreamOutcome, string | undefined>> = { completed: undefined, aborted: "client_closed", failed: "failed" };

interface AccessRecord {
  requestId: string;
  startedMs: number;
  firstAudioMs?: number;
  audioSeconds: number;
  /** Set by a route whose response streams: resolves when the stream has ended. */
  streamEnd?: Promise<StreamOutcome>;
}

const records = new WeakMap<Request, AccessRecord>();

/** Audio delivered for this request: the first call marks its time to first audio. */
export function noteAudio(c: Context, seconds: number): void {
  const record = records.get(c.req.raw);
  if (!record || seconds <= 0) return;
  noteFirstAudio(c);
  record.audioSeconds += seconds;
}

/** Audio of unknown length (an encoded sentence on a WebSocket) went out: only its time counts. */
export function noteFirstAudio(c: Context): void {
  const record = records.get(c.req.raw);
  if (record) record.firstAudioMs ??= performance.now() - record.startedMs;
}

/**
 * Marks this request's response as streamed: its log line (and the shutdown's count) wait for the returned
 * function to be called with how it ended.
 */
export function streamEnded(c: Context): (outcome: StreamOutcome) => void {
  const record = records.get(c.req.raw);
  let settle: (outcome: StreamOutcome) => void = () => {};
  if (record) record.streamEnd = new Promise<StreamOutcome>((resolve) => (settle = resolve));
  return (outcome) => settle(outcome);
}

/** Installs the outermost middleware: ids, the active-request count the shutdown waits on, and the log line. */
export function registerAccessLog(app: Hono, logger: Logger, lifecycle: ServerLifecycle): void {
  app.use("*", async (c, next) => {
    const offered = c.req.header(REQUEST_ID_HEADER);
    // Read now: Deno closes an upgraded request, and its headers with it.
    const upgrade = isUpgrade(c);
    const method = c.req.method;
    const record: AccessRecord = { requestId: offered !== undefined && USABLE_REQUEST_ID.test(offered) ? offered : randomUUID(), startedMs: performance.now(), audioSeconds: 0 };
    records.set(c.req.raw, record);
    const release = lifecycle.trackRequest();
    try {
      await next();
    } catch (error) {
      release();
      throw error;
    }
    // Deno's 101 for a WebSocket upgrade has immutable headers.
    if (c.res.status !== 101 && !c.res.headers.has(REQUEST_ID_HEADER)) c.res.headers.set(REQUEST_ID_HEADER, record.requestId);
    // A stream that never started (an error answered instead, or an upgrade that did not happen) has ended.
    if (c.res.status >= 400) record.streamEnd = undefined;
    // Bun answers an upgrade itself (101); the app's own response to it is a placeholder.
    const status = upgrade && record.streamEnd ? 101 : c.res.status;
    const route = routePattern(c);
    const log = (outcome: StreamOutcome) => {
      const end = LOGGED_END[outcome];
      release();
      logger.info("request", {
        request_id: record.requestId,
        method,
        route,
        status,
        latency_ms: round(performance.now() - record.startedMs),
        ...(record.firstAudioMs === undefined ? {} : { first_audio_ms: round(record.firstAudioMs) }),
        ...(record.audioSeconds > 0 ? { audio_seconds: Number(record.audioSeconds.toFixed(3)) } : {}),
        ...(end === undefined ? {} : { end }),
      });
    };
    if (record.streamEnd) void record.streamEnd.then(log);
    else log("completed");
  });
}

function isUpgrade(c: Context): boolean {
  return c.req.header("upgrade")?.toLowerCase() === "websocket";
}

/** The pattern of the route that matched (also when a middleware answered first, e.g. a 401), or "unmatched". */
function routePattern(c: Context): string {
  const route = matchedRoutes(c).findLast((candidate) => candidate.method !== "ALL" && candidate.path !== "*" && candidate.path !== "/*");
  return route?.path ?? "unmatched";
}

function round(milliseconds: number): number {
  return Math.round(milliseconds * 10) / 10;
}
