/**
 * POST /v1/audio/speech/batch: items merged over batch defaults, run a few at a time, failing one by one.
 *
 * The response is written as the items finish, in index order: `{"id":…,"results":[`, each result, then
 * the totals. Only the running items and their results are held, never the whole body; the audio of the
 * whole batch is capped (--batch-max-audio-seconds), so a batch cannot grow without bound either.
 */
import type { FinishReason } from "../engine/core.ts";
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import type { Hono } from "hono";
import { z } from "zod";
import { batchItemSchema, batchRequestSchema, speechFieldShape, type SpeechRequest } from "../api/speech.ts";
import { ApiError, badRequest } from "../api/errors.ts";
import { noteAudio } from "../http/access-log.ts";
import { type SpeechService, type SpeechUsage, wholeAudio } from "../speech/service.ts";
import type { OpenAiSpeech } from "./dialect.ts";
import type { Logger } from "../log/logger.ts";
import { asApiError } from "../speech/errors.ts";
import { clientAbort, streamedResponse } from "../http/audio-stream.ts";
import { readJsonBody, parseWith, type BodyLimits } from "../http/request-body.ts";
import { base64 } from "../http/base64.ts";
import { mediaTypeOf } from "../http/speech-headers.ts";
import { bearer, errorResponses, json } from "../http/route-docs.ts";

/** Audio bytes per written piece of `audio_data`: a multiple of 3, so the pieces' base64 joins seamlessly. */
const AUDIO_PIECE_BYTES = 3 * 64 * 1024;

type BatchItemResult =
  | { index: number; status: "success"; audio: Uint8Array; media_type: string; usage: SpeechUsage; finish_reason: FinishReason; ignored_fields: string[] }
  | { index: number; status: "error"; error: string };

export interface BatchRouteDeps {
  service: SpeechService;
  openai: OpenAiSpeech;
  logger: Logger;
  body: BodyLimits;
  stallTimeoutMs: number;
  maxItems: number;
  maxAudioSeconds: number;
}

/** A batch as documented: its items are speech items (the route parses each on its own, so one bad item fails alone). */
const batchDocumentSchema = z.strictObject({ ...speechFieldShape, items: z.array(batchItemSchema).min(1) });

/** The body as it is written, piece by piece (the audio of a success in `audio_data`, base64). */
const batchResponseSchema = z.object({
  id: z.string(),
  results: z.array(z.object({ index: z.number().int(), status: z.enum(["success", "error"]), audio_data: z.string().optional(), media_type: z.string().optional(), finish_reason: z.string().optional(), error: z.string().optional() })),
  total: z.number().int(),
  succeeded: z.number().int(),
  failed: z.number().int(),
});

export function describeBatchRoute(registry: OpenAPIRegistry): void {
  registry.registerPath({
    method: "post",
    path: "/v1/audio/speech/batch",
    summary: "Many items at once, with batch-level defaults; results are streamed as JSON, item by item",
    security: bearer,
    request: { body: { required: true, ...json(batchDocumentSchema) } },
    responses: { 200: { description: "per-item results", ...json(batchResponseSchema) }, ...errorResponses(400, 401, 408, 413, 503) },
  });
}

export function registerBatchRoute(app: Hono, deps: BatchRouteDeps): void {
  app.post("/v1/audio/speech/batch", async (c) => {
    const batch = parseWith(batchRequestSchema, await readJsonBody(c, deps.body));
    if (batch.items.length > deps.maxItems) {
      throw badRequest(`Batch contains ${batch.items.length} items, exceeding the maximum of ${deps.maxItems}`, "items");
    }
    deps.openai.checkModel(batch.model);
    if (batch.extra_params) deps.service.parseExtraParams(batch.extra_params);
    const { items, ...defaults } = batch;
    const budget = new AudioBudget(deps.maxAudioSeconds);

    const runItem = async (item: unknown, index: number, signal: AbortSignal): Promise<BatchItemResult> => {
      try {
        if (typeof item !== "object" || item === null || Array.isArray(item)) throw badRequest(`items[${index}] must be a JSON object`);
        // Each level is parsed on its own, so an item's `speaker` overrides a batch-level `voice` like any field.
        const parsedItem = parseWith(batchItemSchema, item, `items[${index}]`);
        const request: SpeechRequest = { ...definedFields(defaults), ...definedFields(parsedItem), input: parsedItem.input };
        if (budget.closed) throw budget.exceededError();
        // Items never get a 429: each waits for a place in the engine, within its limits.
        const speech = await deps.openai.start(request, "batch", signal, (seconds) => {
          noteAudio(c, seconds);
          budget.spend(index, seconds);
        });
        const audio = await wholeAudio(speech.audio);
        const { usage, finishReason } = await speech.done;
        const { responseFormat, ignoredFields } = speech.prepared;
        return { index, status: "success", audio, media_type: mediaTypeOf(responseFormat), usage, finish_reason: finishReason, ignored_fields: ignoredFields };
      } catch (error) {
        budget.release(index);
        const refusal = asApiError(error);
        if (!refusal) deps.logger.error("batch item failed", { index, error: String(error) });
        return { index, status: "error", error: refusal?.message ?? "speech generation failed" };
      }
    };

    const id = `speech-batch-${crypto.randomUUID()}`;
    const abort = clientAbort(c.req.raw.signal);
    const bytes = batchJson(id, inOrder(items.length, (index) => runItem(items[index], index, abort.signal)));
    return streamedResponse(c, abort, () => ({ headers: { "Content-Type": "application/json" }, bytes }), deps.stallTimeoutMs, (error) =>
      deps.logger.error("batch response failed", { error: String(error) }),
    );
  });
}

/**
 * Seconds of output audio a batch may make, spent as its items generate. Items are served in index
 * order: item k may go on while the audio of items 0..k (finished or still running) stays within the cap,
 * so a later item never makes an earlier one fail, and the outcome is the one a one-at-a-time run would
 * give. The first item refused closes the batch: items not yet started fail without running. At any
 * moment the kept audio is within the cap plus one chunk per running item.
 */
class AudioBudget {
  /** Seconds made by each running or succeeded item; a failed item's audio is not in the response. */
  readonly #secondsByIndex = new Map<number, number>();
  #closed = false;

  constructor(readonly capSeconds: number) {}

  get closed(): boolean {
    return this.#closed;
  }

  /** Counts `seconds` more of item `index`; throws (and closes the batch) once items 0..index pass the cap. */
  spend(index: number, seconds: number): void {
    this.#secondsByIndex.set(index, (this.#secondsByIndex.get(index) ?? 0) + seconds);
    let secondsUpToIndex = 0;
    for (const [other, spent] of this.#secondsByIndex) if (other <= index) secondsUpToIndex += spent;
    if (secondsUpToIndex > this.capSeconds) {
      this.#closed = true;
      throw this.exceededError();
    }
  }

  /** Item `index` failed: its audio no longer counts. */
  release(index: number): void {
    this.#secondsByIndex.delete(index);
  }

  exceededError(): ApiError {
    return badRequest(`the batch's audio passed its cap of ${this.capSeconds} s (--batch-max-audio-seconds); send fewer or shorter items`);
  }
}

/** A field not set at one level (the schema made null undefined) leaves the other level's value in force. */
function definedFields<Fields extends object>(fields: Fields): Partial<Fields> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined)) as Partial<Fields>;
}

/**
 * Starts every task at once and yields their results in index order. How many run together is the
 * engine's decision (its running places, in arrival order); what finished results may hold while an
 * earlier one runs is bounded by the batch's audio budget.
 */
async function* inOrder<R>(count: number, run: (index: number) => Promise<R>): AsyncGenerator<R, void, undefined> {
  const running = Array.from({ length: count }, (_, index) => run(index));
  // Each is awaited below in turn; this keeps a later one's rejection from counting as unhandled meanwhile.
  for (const task of running) task.catch(() => {});
  for (const task of running) yield await task;
}

const encoder = new TextEncoder();

/** The batch response, as JSON.stringify would write it, in pieces: no piece holds more than part of one item. */
async function* batchJson(id: string, results: AsyncIterable<BatchItemResult>): AsyncGenerator<Uint8Array, void, undefined> {
  yield encoder.encode(`{"id":${JSON.stringify(id)},"results":[`);
  let total = 0;
  let succeeded = 0;
  for await (const result of results) {
    if (total > 0) yield encoder.encode(",");
    total++;
    if (result.status === "error") {
      yield encoder.encode(JSON.stringify(result));
      continue;
    }
    succeeded++;
    const { index, status, audio, media_type, usage, finish_reason, ignored_fields } = result;
    yield encoder.encode(`{"index":${index},"status":"${status}","audio_data":"`);
    for (let offset = 0; offset < audio.length; offset += AUDIO_PIECE_BYTES) yield encoder.encode(base64(audio.subarray(offset, offset + AUDIO_PIECE_BYTES)));
    yield encoder.encode(`",${JSON.stringify({ media_type, usage, finish_reason, ...(ignored_fields.length > 0 ? { ignored_fields } : {}) }).slice(1)}`);
  }
  yield encoder.encode(`],"total":${total},"succeeded":${succeeded},"failed":${total - succeeded}}`);
}
