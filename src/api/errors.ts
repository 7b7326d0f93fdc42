/** One error type for every caller-facing failure, rendered in OpenAI's shape by one handler. */
import type { ZodError } from "zod";

export type ApiErrorType = "BadRequestError" | "NotFoundError" | "UnauthorizedError" | "RateLimitError" | "ServiceUnavailableError" | "server_error";

/** Longest piece of client text an error message quotes back (a model name, a field name). */
export const MAX_ECHOED_CHARS = 64;
/** Backstops for whatever a message still quotes: an error body stays a few KB whatever the request held. */
const MAX_MESSAGE_CHARS = 2048;
const MAX_PARAM_CHARS = 256;

/** Client text as an error quotes it: at most `maxChars` characters, with "…" when cut. */
export function echoed(text: string, maxChars = MAX_ECHOED_CHARS): string {
  return text.length > maxChars ? `${text.slice(0, maxChars)}…` : text;
}

export class ApiError extends Error {
  /** Headers the error response carries (e.g. Retry-After on a 429). */
  headers: Record<string, string> = {};
  readonly param: string | null;

  constructor(
    readonly status: 400 | 401 | 404 | 408 | 413 | 415 | 422 | 429 | 499 | 500 | 503 | 507,
    message: string,
    param: string | null = null,
    readonly type: ApiErrorType = status === 404 ? "NotFoundError" : status === 401 ? "UnauthorizedError" : status === 503 ? "ServiceUnavailableError" : status === 429 ? "RateLimitError" : status >= 500 ? "server_error" : "BadRequestError",
  ) {
    super(echoed(message, MAX_MESSAGE_CHARS));
    this.param = param === null ? null : echoed(param, MAX_PARAM_CHARS);
  }

  toBody() {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.status } };
  }
}

/**
 * The client closed the connection before its request was complete. Nobody receives the answer; the status
 * (nginx's 499, "client closed request") is for metrics and logs, so a hang-up never counts as a server fault.
 */
export class ClientClosedRequestError extends ApiError {
  constructor() {
    super(499, "The client closed the connection before the request body was complete", null, "BadRequestError");
  }
}

export function badRequest(message: string, param: string | null = null): ApiError {
  return new ApiError(400, message, param);
}

/** The first zod issue as a 400 naming the field (an unknown field is named by its key). */
export function fromZodError(error: ZodError, pathPrefix = "", body?: unknown): ApiError {
  const issue = error.issues[0]!;
  const path = [pathPrefix, ...issue.path.map(String)].filter((part) => part.length > 0).join(".");
  if (issue.code === "unrecognized_keys") {
    const key = echoed(issue.keys[0]!);
    const param = path ? `${path}.${key}` : key;
    return badRequest(`Unknown field '${param}'`, param);
  }
  const message = issue.code === "invalid_type" && isMissing(body, issue.path) ? `${path} is required` : issue.message;
  const named = path && !message.startsWith(path.split(".").at(-1)!) ? `${path}: ${message}` : message;
  return badRequest(named, path || null);
}

function isMissing(body: unknown, path: readonly PropertyKey[]): boolean {
  let node = body;
  for (const key of path) {
    if (typeof node !== "object" || node === null || !(key in node)) return true;
    node = (node as Record<PropertyKey, unknown>)[key];
  }
  return node === undefined;
}
