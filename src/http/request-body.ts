/** JSON bodies: content type, size cap, syntax and schema, each failure a 4xx naming what is wrong. */
import type { Context } from "hono";
import type { z } from "zod";
import { ApiError, badRequest, fromZodError } from "../api/errors.ts";
import { concatBytes } from "../audio/concat.ts";

export async function readJsonBody(c: Context, maxBytes: number): Promise<unknown> {
  const contentType = c.req.header("content-type") ?? "";
  if (!/^application\/([\w.+-]*\+)?json\b/i.test(contentType.trim())) {
    throw new ApiError(415, `Content-Type must be application/json (got '${contentType || "none"}')`, "content-type");
  }
  const declaredBytes = Number(c.req.header("content-length") ?? "0");
  if (declaredBytes > maxBytes) throw new ApiError(413, `Request body is larger than ${maxBytes} bytes`);
  const bytes = await readCapped(c.req.raw, maxBytes);
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

/** Reads at most maxBytes of the body; a chunked body that runs past the cap is cut off with a 413. */
async function readCapped(request: Request, maxBytes: number): Promise<Uint8Array> {
  if (!request.body) return new Uint8Array();
  const reader = request.body.getReader();
  const parts: Uint8Array[] = [];
  let received = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    received += value.byteLength;
    if (received > maxBytes) {
      await reader.cancel();
      throw new ApiError(413, `Request body is larger than ${maxBytes} bytes`);
    }
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
