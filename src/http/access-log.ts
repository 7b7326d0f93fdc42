/**
 * One JSON line per request, written when its response has ended (a stream's last byte, or its client
 * leaving): request id, method, route pattern, status, latency, time to first audio and seconds of audio.
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
import type { ServerLifecycle } from "./lifecycle.ts";
import { whenResponseEnds } from "./response-end.ts";

export const REQUEST_ID_HEADER = "X-Request-Id";
/** Printable ASCII without spaces, as nginx's $request_id, UUIDs and tracing ids are; anything else is replaced. */
const USABLE_REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

interface AccessRecord {
  requestId: string;
  startedMs: number;
  firstAudioMs?: number;
  audioSeconds: number;
}

const records = new WeakMap<Request, AccessRecord>();

/** The request's id, as logged and returned. */
export function requestIdOf(c: Context): string | undefined {
  return records.get(c.req.raw)?.requestId;
}

/** Audio delivered for this request: the first call marks its time to first audio. */
export function noteAudio(c: Context, seconds: number): void {
  const record = records.get(c.req.raw);
  if (!record || seconds <= 0) return;
  record.firstAudioMs ??= performance.now() - record.startedMs;
  record.audioSeconds += seconds;
}

/** Installs the outermost middleware: ids, the active-request count the shutdown waits on, and the log line. */
export function registerAccessLog(app: Hono, logger: Logger, lifecycle: ServerLifecycle): void {
  app.use("*", async (c, next) => {
    const offered = c.req.header(REQUEST_ID_HEADER);
    const record: AccessRecord = { requestId: offered !== undefined && USABLE_REQUEST_ID.test(offered) ? offered : randomUUID(), startedMs: performance.now(), audioSeconds: 0 };
    records.set(c.req.raw, record);
    const release = lifecycle.trackRequest();
    try {
      await next();
    } catch (error) {
      release();
      throw error;
    }
    // A WebSocket upgrade's answer may be immutable (Bun's); its socket is counted as a session instead.
    if (c.res.status !== 101 && !c.res.headers.has(REQUEST_ID_HEADER)) c.res.headers.set(REQUEST_ID_HEADER, record.requestId);
    const status = c.res.status;
    const route = routePattern(c);
    whenResponseEnds(c, (end) => {
      release();
      logger.info("request", {
        request_id: record.requestId,
        method: c.req.method,
        route,
        status,
        latency_ms: round(performance.now() - record.startedMs),
        ...(record.firstAudioMs === undefined ? {} : { first_audio_ms: round(record.firstAudioMs) }),
        ...(record.audioSeconds > 0 ? { audio_seconds: Number(record.audioSeconds.toFixed(3)) } : {}),
        ...(end === "completed" ? {} : { end }),
      });
    });
  });
}

/** The pattern of the route that matched the request (also when a middleware answered first, e.g. a 401), or "unmatched". */
function routePattern(c: Context): string {
  const route = matchedRoutes(c).findLast((candidate) => candidate.method !== "ALL" && candidate.path !== "*" && candidate.path !== "/*");
  return route?.path ?? "unmatched";
}

function round(milliseconds: number): number {
  return Math.round(milliseconds * 10) / 10;
}
