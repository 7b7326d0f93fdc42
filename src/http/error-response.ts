/**
 * An error as an HTTP response in a protocol's own shape: a known error (ApiError, or a typed error of the
 * core that maps to one) with its status and headers; anything else a 500 that names no internals, logged.
 * Each protocol's app installs it as its onError with its own body shape.
 */
import type { Context, ErrorHandler } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { ApiError } from "../api/errors.ts";
import type { Logger } from "../log/logger.ts";
import { asApiError } from "../speech/errors.ts";

/** A protocol's error body for an ApiError: OpenAI's `{"error": {…}}`, ElevenLabs' `{"detail": {…}}`. */
export type ErrorBody = (error: ApiError) => object;

export function errorResponse(c: Context, raised: unknown, body: ErrorBody, logger: Logger): Response {
  const error = asApiError(raised);
  if (error) {
    const response = c.json(body(error), error.status as ContentfulStatusCode);
    for (const [name, value] of Object.entries(error.headers)) response.headers.set(name, value);
    // RFC 6750 §3: a 401 names the scheme the client must use.
    if (error.status === 401) response.headers.set("WWW-Authenticate", 'Bearer realm="voxedge"');
    return response;
  }
  logger.error("unhandled error", { route: c.req.routePath, error: raised instanceof Error ? (raised.stack ?? raised.message) : String(raised) });
  return c.json(body(new ApiError(500, "Internal server error")), 500);
}

export function errorHandler(body: ErrorBody, logger: Logger): ErrorHandler {
  return (error, c) => errorResponse(c, error, body, logger);
}
