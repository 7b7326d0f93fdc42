/** JSON bodies: content type, size cap, syntax and schema, each failure a 4xx naming what is wrong. */
import type { Context } from "hono";
import type { z } from "zod";
import { ApiError, ClientClosedRequestError, badRequest, fromZodError } from "../api/errors.ts";
import { parseRequestJson } from "../api/request-json.ts";
import { capStream, readCapped, type StreamCap } from "../async/capped-stream.ts";

export interface BodyLimits {
  maxBytes: number;
  /** The whole body must arrive within this long of the handler starting to read it. */
  timeoutMs: number;
}

/**
 * The cap a request body is read within: past maxBytes it ends with `tooLarge()` (the rest is never read);
 * unfinished after timeoutMs it ends with a 408 and the source is cancelled, so a client that stalls or
 * trickles cannot hold the request open; a source that fails (the client hung up mid-body) ends it with
 * ClientClosedRequestError.
 */
function bodyCap(limits: BodyLimits, tooLarge: () => ApiError): StreamCap {
  const seconds = Math.round(limits.timeoutMs / 100) / 10;
  return {
    maxBytes: limits.maxBytes,
    tooLarge,
    deadline: { timeoutMs: limits.timeoutMs, error: () => bodyTimedOut(seconds) },
    sourceFailed: () => new ClientClosedRequestError(),
  };
}

/**
 * The rest of a stalled body may still arrive on the connection, where it would be read as the next request:
 * the 408 ends the connection (RFC 9110 §15.5.9), and the runtime closes it once the answer is written.
 */
function bodyTimedOut(seconds: number): ApiError {
  const error = new ApiError(408, `The request body did not arrive within ${seconds} s`);
  error.headers = { Connection: "close" };
  return error;
}

/** The request body as a stream within `limits` (bodyCap). */
export function guardedBody(body: ReadableStream<Uint8Array>, limits: BodyLimits, tooLarge: () => ApiError): ReadableStream<Uint8Array> {
  return capStream(body, bodyCap(limits, tooLarge));
}

export async function readJsonBody(c: Context, limits: BodyLimits): Promise<unknown> {
  const { maxBytes } = limits;
  const contentType = c.req.header("content-type") ?? "";
  if (!/^application\/([\w.+-]*\+)?json\b/i.test(contentType.trim())) {
    throw new ApiError(415, `Content-Type must be application/json (got '${contentType || "none"}')`, "content-type");
  }
  const declaredBytes = Number(c.req.header("content-length") ?? "0");
  if (declaredBytes > maxBytes) throw new ApiError(413, `Request body is larger than ${maxBytes} bytes`);
  // A chunked body that runs past the cap is cut off with a 413.
  const bytes = await readCapped(c.req.raw.body, bodyCap(limits, () => new ApiError(413, `Request body is larger than ${maxBytes} bytes`)));
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw badRequest("Request body is not valid UTF-8");
  }
  try {
    return parseRequestJson(text);
  } catch (error) {
    throw badRequest(`Invalid JSON body: ${(error as Error).message}`);
  }
}

export function parseWith<Schema extends z.ZodType>(schema: Schema, body: unknown, pathPrefix = ""): z.output<Schema> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw badRequest(pathPrefix ? `${pathPrefix} must be a JSON object` : "Request body must be a JSON object", pathPrefix || null);
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw fromZodError(parsed.error, pathPrefix, body);
  return parsed.data;
}
