/** JSON bodies: content type, size cap, syntax and schema, each failure a 4xx naming what is wrong. */
import type { Context } from "hono";
import type { z } from "zod";
import { ApiError, ClientClosedRequestError, badRequest, fromZodError } from "../api/errors.ts";
import { concatBytes } from "../audio/concat.ts";

export interface BodyLimits {
  maxBytes: number;
  /** The whole body must arrive within this long of the handler starting to read it. */
  timeoutMs: number;
}

/**
 * The request body as a stream that enforces `limits`: past maxBytes it errors with `tooLarge()` (the rest
 * is never read); unfinished after timeoutMs it errors with a 408 and the source is cancelled, so a client
 * that stalls or trickles cannot hold the request open; a source that fails (the client hung up mid-body)
 * errors with ClientClosedRequestError.
 */
export function guardedBody(body: ReadableStream<Uint8Array>, limits: BodyLimits, tooLarge: () => ApiError): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let receivedBytes = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let settled = false;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        timer = setTimeout(() => {
          settled = true;
          const seconds = Math.round(limits.timeoutMs / 100) / 10;
          controller.error(new ApiError(408, `The request body did not arrive within ${seconds} s`));
          reader.cancel().catch(() => {});
        }, limits.timeoutMs);
      },
      async pull(controller) {
        let chunk: { done: boolean; value?: Uint8Array };
        try {
          chunk = await reader.read();
        } catch {
          chunk = { done: true, value: undefined };
          if (!settled) {
            settled = true;
            clearTimeout(timer);
            controller.error(new ClientClosedRequestError());
          }
        }
        if (settled) return;
        if (chunk.done) {
          settled = true;
          clearTimeout(timer);
          controller.close();
          return;
        }
        const value = chunk.value!;
        receivedBytes += value.byteLength;
        if (receivedBytes > limits.maxBytes) {
          settled = true;
          clearTimeout(timer);
          controller.error(tooLarge());
          reader.cancel().catch(() => {});
          return;
        }
        controller.enqueue(value);
      },
      cancel(reason) {
        settled = true;
        clearTimeout(timer);
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

export async function readJsonBody(c: Context, limits: BodyLimits): Promise<unknown> {
  const { maxBytes } = limits;
  const contentType = c.req.header("content-type") ?? "";
  if (!/^application\/([\w.+-]*\+)?json\b/i.test(contentType.trim())) {
    throw new ApiError(415, `Content-Type must be application/json (got '${contentType || "none"}')`, "content-type");
  }
  const declaredBytes = Number(c.req.header("content-length") ?? "0");
  if (declaredBytes > maxBytes) throw new ApiError(413, `Request body is larger than ${maxBytes} bytes`);
  const bytes = await readCapped(c.req.raw, limits);
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw badRequest("Request body is not valid UTF-8");
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw badRequest(`Invalid JSON body: ${(error as Error).message}`);
  }
}

/** Reads the body within `limits`; a chunked body that runs past the cap is cut off with a 413. */
async function readCapped(request: Request, limits: BodyLimits): Promise<Uint8Array> {
  if (!request.body) return new Uint8Array();
  const reader = guardedBody(request.body, limits, () => new ApiError(413, `Request body is larger than ${limits.maxBytes} bytes`)).getReader();
  const parts: Uint8Array[] = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    parts.push(value);
  }
  return concatBytes(parts);
}

export function parseWith<Schema extends z.ZodType>(schema: Schema, body: unknown, pathPrefix = ""): z.output<Schema> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw badRequest(pathPrefix ? `${pathPrefix} must be a JSON object` : "Request body must be a JSON object", pathPrefix || null);
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw fromZodError(parsed.error, pathPrefix, body);
  return parsed.data;
}
