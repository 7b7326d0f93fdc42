/**
 * The core's and the engine's typed refusals as the API's errors: the one mapping every front end applies at
 * its edge before it renders an error in its own shape (an HTTP status and body, a WebSocket error message, a
 * Wyoming error event).
 */
import { ApiError } from "../api/errors.ts";
import { EngineFullError, EngineUnavailableError } from "../engine/errors.ts";

/** `error` as an ApiError with its status, or undefined for an unexpected error (a 500 that names no internals). */
export function asApiError(error: unknown): ApiError | undefined {
  if (error instanceof ApiError) return error;
  if (error instanceof EngineFullError) {
    const refusal = new ApiError(429, error.message, null, "RateLimitError");
    refusal.headers = { "Retry-After": String(error.retryAfterSeconds) };
    return refusal;
  }
  if (error instanceof EngineUnavailableError) return new ApiError(503, error.message);
  return undefined;
}
