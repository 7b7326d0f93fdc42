/** POST /v1/audio/speech/batch: items merged over batch defaults, run concurrently, failing one by one. */
import type { Hono } from "hono";
import { batchItemSchema, batchRequestSchema } from "../api/speech.ts";
import { ApiError, badRequest } from "../api/errors.ts";
import type { SpeechService, SpeechUsage } from "../speech/service.ts";
import type { Logger } from "../log/logger.ts";
import { readJsonBody, parseWith } from "./request-body.ts";
import { base64 } from "./speech.ts";

/** Items synthesised at once; the rest wait, so one large batch cannot hog every core. */
const BATCH_CONCURRENCY = 4;

interface BatchItemResult {
  index: number;
  status: "success" | "error";
  audio_data?: string;
  media_type?: string;
  usage?: SpeechUsage;
  error?: string;
}

export interface BatchRouteDeps {
  service: SpeechService;
  logger: Logger;
  maxBodyBytes: number;
  maxItems: number;
}

export function registerBatchRoute(app: Hono, deps: BatchRouteDeps): void {
  app.post("/v1/audio/speech/batch", async (c) => {
    const batch = parseWith(batchRequestSchema, await readJsonBody(c, deps.maxBodyBytes));
    if (batch.items.length > deps.maxItems) {
      throw badRequest(`Batch contains ${batch.items.length} items, exceeding the maximum of ${deps.maxItems}`, "items");
    }
    deps.service.checkModel(batch.model);
    const { items, ...defaults } = batch;
    const signal = c.req.raw.signal;

    const runItem = async (item: unknown, index: number): Promise<BatchItemResult> => {
      try {
        if (typeof item !== "object" || item === null || Array.isArray(item)) throw badRequest(`items[${index}] must be a JSON object`);
        const merged = { ...withoutUndefined(defaults), ...withoutUndefined(item as Record<string, unknown>) };
        const request = parseWith(batchItemSchema, merged, `items[${index}]`);
        const rendered = await deps.service.render(await deps.service.prepare(request, "batch", signal), signal, "batch");
        return { index, status: "success", audio_data: base64(rendered.audio), media_type: rendered.contentType, usage: rendered.usage };
      } catch (error) {
        if (!(error instanceof ApiError)) deps.logger.error("batch item failed", { index, error: String(error) });
        return { index, status: "error", error: error instanceof ApiError ? error.message : "speech generation failed" };
      }
    };

    const results = await mapWithConcurrency(items, BATCH_CONCURRENCY, runItem);
    const succeeded = results.filter((result) => result.status === "success").length;
    return c.json({ id: `speech-batch-${crypto.randomUUID()}`, results, total: results.length, succeeded, failed: results.length - succeeded });
  });
}

/** `null` or absent means "not set" at either level, so the other level's value applies. */
function withoutUndefined(fields: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined && value !== null));
}

async function mapWithConcurrency<T, R>(items: readonly T[], limit: number, run: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await run(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
