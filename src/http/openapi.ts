/**
 * GET /openapi.json (OpenAPI 3.1) and GET /docs (Swagger UI over it). The request bodies are generated from
 * the same zod schemas the routes parse with (src/api/), through @asteasolutions/zod-to-openapi, so the
 * document cannot drift from what the server accepts; test/http/openapi.test.ts checks that every route the
 * app registers is in it, and that the `openai` client's requests validate against it.
 *
 * Nullable optional fields come out as `["string", "null"]`, as the server treats null as "not set". The
 * WebSocket route is described as the GET that upgrades (101), its client messages as an extension
 * (`x-websocket-client-messages`), since OpenAPI has no WebSocket operation.
 */
import { OpenAPIRegistry, OpenApiGeneratorV31, type RouteConfig } from "@asteasolutions/zod-to-openapi";
import { swaggerUI } from "@hono/swagger-ui";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import type { Hono } from "hono";
import { z } from "zod";
import { batchItemSchema, speechFieldShape, speechRequestSchema, streamClientMessageSchema } from "../api/speech.ts";
import { ALLOWED_UPLOAD_MIME_TYPES, MAX_CONSENT_CHARS, MAX_EMBEDDING_LENGTH, MAX_SPEAKER_DESCRIPTION_CHARS } from "../api/voices.ts";
import { MAX_REF_TEXT_CHARS, MAX_VOICE_NAME_CHARS } from "../api/speech.ts";
import { PLAYGROUND_MODULES } from "./info.ts";
import { CONTENT_TYPES } from "../audio/encoders.ts";
import { DEFAULT_ELEVENLABS_OUTPUT_FORMAT, ELEVENLABS_OUTPUT_FORMATS, MAX_VOICES_PAGE_SIZE, textToSpeechBodySchema } from "../api/elevenlabs.ts";

export const OPENAPI_PATH = "/openapi.json";
export const DOCS_PATH = "/docs";

const errorSchema = z.object({
  error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.number().int() }),
});

const errorResponses = (...statuses: number[]): RouteConfig["responses"] =>
  Object.fromEntries(statuses.map((status) => [status, { description: ERROR_DESCRIPTIONS[status] ?? "error", content: { "application/json": { schema: errorSchema } } }]));

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: "a caller mistake, naming the field in `param`",
  401: "missing or wrong API key",
  404: "unknown model or voice",
  416: "the Range starts past the end of the file (`Content-Range: bytes */<size>`)",
  408: "the body did not arrive within --body-timeout",
  413: "the body is larger than --max-body-bytes",
  415: "wrong Content-Type",
  429: "the engine is full; retry after `Retry-After` seconds",
  500: "server fault (no internals)",
  503: "the model is loading or failed, or the server is shutting down",
  507: "the speaker folder could not take the change (store or delete the voice)",
};

const AUDIO_MEDIA_TYPES = [...new Set(Object.values(CONTENT_TYPES))];
const binary = { type: "string", format: "binary" } as const;

/** A batch as documented: its items are speech items (the route parses each on its own, so one bad item fails alone). */
const batchDocumentSchema = z.strictObject({ ...speechFieldShape, items: z.array(batchItemSchema).min(1) });

const modelEntrySchema = z.object({
  id: z.string(),
  object: z.literal("model"),
  created: z.number().int(),
  owned_by: z.string(),
  root: z.string(),
  description: z.string(),
  engine: z.enum(["classic-fallback", "neural"]),
  sample_rate: z.number().int(),
  supported_sample_rates: z.array(z.number().int()),
  voices: z.array(z.string()),
  supports_cloning: z.boolean(),
});

const modelFileSchema = z.object({
  name: z.string().describe("path under the model's folder, '/'-separated (voices/alba.safetensors)"),
  size: z.number().int(),
  etag: z.string().describe("the quoted sha256 for a pulled bundle's files, else a weak validator of size and mtime"),
  url: z.string().describe("where this server serves it: /v1/models/{model}/files/{name}"),
  hub_url: z.string().optional().describe("pulled bundles: the hub's URL of the file at the pulled revision"),
  sha256: z.string().optional().describe("pulled bundles: the sha256 verified when it was pulled"),
});

const uploadedVoiceSchema = z.object({
  name: z.string(),
  consent: z.string().optional(),
  created_at: z.number().int(),
  mime_type: z.string(),
  file_size: z.number().int(),
  sample_rate: z.number().int().optional(),
  ref_text: z.string().optional(),
  speaker_description: z.string().optional(),
  embedding_source: z.enum(["audio", "direct"]),
  embedding_dim: z.number().int().optional(),
});

/**
 * The upload form as multipart fields. Its parser (voiceUploadSchema) holds a file part, which JSON Schema
 * cannot express, so the form is written out here from the same limits.
 */
type MediaSchema = Extract<NonNullable<NonNullable<RouteConfig["request"]>["body"]>["content"][string], { schema?: unknown }>["schema"];
const voiceUploadForm: MediaSchema = {
  type: "object",
  required: ["name", "consent"],
  properties: {
    name: { type: "string", maxLength: MAX_VOICE_NAME_CHARS },
    consent: { type: "string", maxLength: MAX_CONSENT_CHARS, description: "id of the speaker's consent recording" },
    audio_sample: { ...binary, description: `1–30 s of audio, at most 10 MB: ${ALLOWED_UPLOAD_MIME_TYPES.join(", ")}` },
    speaker_embedding: { type: "string", description: `a JSON list of at most ${MAX_EMBEDDING_LENGTH} numbers (instead of audio_sample)` },
    ref_text: { type: "string", maxLength: MAX_REF_TEXT_CHARS },
    speaker_description: { type: "string", maxLength: MAX_SPEAKER_DESCRIPTION_CHARS },
  },
};

type SecurityRequirement = Record<string, string[]>;
const bearer: SecurityRequirement[] = [{ bearerAuth: [] }, { apiKeyHeader: [] }];
/** Open unless the operator protects them (--protect-health, --protect-metrics, no --public-listings); the key is accepted as elsewhere. */
const openByDefault: SecurityRequirement[] = [{}, ...bearer];

function buildDocument(): ReturnType<OpenApiGeneratorV31["generateDocument"]> {
  const registry = new OpenAPIRegistry();
  registry.registerComponent("securitySchemes", "bearerAuth", { type: "http", scheme: "bearer", description: "any key given with --api-key / --api-key-file" });
  registry.registerComponent("securitySchemes", "apiKeyHeader", { type: "apiKey", in: "header", name: "X-API-Key" });
  registry.registerComponent("securitySchemes", "xiApiKey", { type: "apiKey", in: "header", name: "xi-api-key", description: "ElevenLabs' header; accepted on every route that takes a key" });
  registry.registerComponent("securitySchemes", "xiApiKeyQuery", { type: "apiKey", in: "query", name: "xi_api_key", description: "ElevenLabs' WebSocket upgrades only" });
  registry.registerComponent("securitySchemes", "apiKeyQuery", { type: "apiKey", in: "query", name: "api_key", description: "WebSocket upgrade only (browsers cannot set headers on a WebSocket)" });

  const json = (schema: z.ZodType) => ({ content: { "application/json": { schema } } });

  registry.registerPath({
    method: "post",
    path: "/v1/audio/speech",
    summary: "Synthesize speech: one file, a raw audio stream (stream_format audio) or SSE (stream_format sse)",
    security: bearer,
    request: { body: { required: true, ...json(speechRequestSchema) } },
    responses: {
      200: {
        description: "the audio; raw streams are pcm16 (wav adds a streaming header); SSE carries speech.audio.delta then speech.audio.done",
        content: { ...Object.fromEntries(AUDIO_MEDIA_TYPES.map((type) => [type, { schema: binary }])), "text/event-stream": { schema: { type: "string" } } },
      },
      ...errorResponses(400, 401, 404, 408, 413, 429, 500, 503),
    },
  });
  registry.registerPath({
    method: "post",
    path: "/v1/audio/speech/batch",
    summary: "Many items at once, with batch-level defaults; results are streamed as JSON, item by item",
    security: bearer,
    request: { body: { required: true, ...json(batchDocumentSchema) } },
    responses: {
      200: {
        description: "per-item results",
        ...json(
          z.object({
            id: z.string(),
            results: z.array(z.object({ index: z.number().int(), status: z.enum(["success", "error"]), audio_data: z.string().optional(), media_type: z.string().optional(), finish_reason: z.string().optional(), error: z.string().optional() })),
            total: z.number().int(),
            succeeded: z.number().int(),
            failed: z.number().int(),
          }),
        ),
      },
      ...errorResponses(400, 401, 408, 413, 503),
    },
  });
  registry.registerPath({
    method: "get",
    path: "/v1/audio/speech/stream",
    summary: "WebSocket: session.config, input.text…, input.done; audio.start, binary pcm16 frames, audio.done, session.done",
    security: [...bearer, { apiKeyQuery: [] }],
    responses: { 101: { description: "switched to the WebSocket protocol" }, ...errorResponses(401, 503) },
    "x-websocket-client-messages": z.toJSONSchema(streamClientMessageSchema, { io: "input", unrepresentable: "any" }),
  } as RouteConfig);
  registry.registerPath({
    method: "get",
    path: "/v1/models",
    summary: "The served model and its aliases",
    security: openByDefault,
    responses: { 200: { description: "OpenAI's model list", ...json(z.object({ object: z.literal("list"), data: z.array(modelEntrySchema) })) }, ...errorResponses(401, 503) },
  });
  registry.registerPath({
    method: "get",
    path: "/v1/audio/models",
    summary: "Models for Open WebUI (models[].id) and in OpenAI's shape (data)",
    security: openByDefault,
    responses: { 200: { description: "models", ...json(z.object({ models: z.array(z.object({ id: z.string(), name: z.string() })), data: z.array(modelEntrySchema) })) }, ...errorResponses(401, 503) },
  });
  const modelFilesNotFound = { 404: { description: "unknown model or file, or a model with no files to lend (the offline engine)", ...json(errorSchema) } };
  registry.registerPath({
    method: "get",
    path: "/v1/models/{model}/files",
    summary: "The served model's files (its Pocket TTS bundle), for pages that run the model themselves",
    security: bearer,
    request: { params: z.object({ model: z.string().describe("any name the served model answers to") }) },
    responses: { 200: { description: "the files, sorted by name", ...json(z.object({ object: z.literal("list"), model: z.string(), data: z.array(modelFileSchema) })) }, ...errorResponses(401, 503), ...modelFilesNotFound },
  });
  const fileHeader = (description: string) => ({ schema: { type: "string" as const }, description });
  const fileHeaders = { ETag: fileHeader("as in the listing"), "Last-Modified": fileHeader("the file's mtime"), "Content-Length": fileHeader("bytes in this answer"), "Accept-Ranges": fileHeader("bytes"), "Cache-Control": fileHeader("no-cache: revalidate with If-None-Match") };
  registry.registerPath({
    method: "get",
    path: "/v1/models/{model}/files/{name}",
    summary: "One file of the listing, streamed; If-None-Match revalidates (304), a single byte range resumes (206); HEAD answers the headers",
    security: bearer,
    request: {
      params: z.object({ model: z.string(), name: z.string().describe("a name from the listing, its '/' kept (voices/alba.safetensors)") }),
      headers: z.object({
        Range: z.string().optional().describe("bytes=a-b, bytes=a- or bytes=-n; a multi-range or malformed one is ignored (200)"),
        "If-None-Match": z.string().optional().describe("ETags (weak comparison) or *"),
        "If-Range": z.string().optional().describe("the strong ETag the range was taken from; else the whole file is sent"),
      }),
    },
    responses: {
      200: { description: "the whole file", headers: fileHeaders, content: { "application/octet-stream": { schema: binary } } },
      206: { description: "the range asked for", headers: { ...fileHeaders, "Content-Range": fileHeader("bytes a-b/size") }, content: { "application/octet-stream": { schema: binary } } },
      304: { description: "If-None-Match matched: the cached copy is current" },
      ...errorResponses(401, 416, 503),
      ...modelFilesNotFound,
    },
  });
  registry.registerPath({
    method: "get",
    path: "/v1/audio/voices",
    summary: "Built-in and uploaded voices (without a key, on --public-listings: no consent ids or transcripts)",
    security: openByDefault,
    responses: { 200: { description: "voice names, lower-case and sorted, and the uploads", ...json(z.object({ voices: z.array(z.string()), uploaded_voices: z.array(uploadedVoiceSchema) })) }, ...errorResponses(401, 503) },
  });
  registry.registerPath({
    method: "post",
    path: "/v1/audio/voices",
    summary: "Upload a voice: name, consent, and exactly one of audio_sample or speaker_embedding",
    security: bearer,
    request: { body: { required: true, content: { "multipart/form-data": { schema: voiceUploadForm } } } },
    responses: { 200: { description: "the stored voice", ...json(z.object({ success: z.literal(true), voice: uploadedVoiceSchema })) }, ...errorResponses(400, 401, 408, 415, 503, 507) },
  });
  registry.registerPath({
    method: "delete",
    path: "/v1/audio/voices/{name}",
    summary: "Delete an uploaded voice (case-insensitive name)",
    security: bearer,
    request: { params: z.object({ name: z.string() }) },
    responses: { 200: { description: "deleted", ...json(z.object({ success: z.literal(true), name: z.string(), message: z.string() })) }, ...errorResponses(401, 404, 503, 507) },
  });
  const healthBody = z.object({ status: z.string(), model: z.string().optional(), engine: z.string().optional(), error: z.string().optional(), draining: z.boolean().optional() });
  registry.registerPath({
    method: "get",
    path: "/health",
    summary: "Liveness: 200 while serving (draining included); 503 while the model loads, or when it or its engine failed",
    security: openByDefault,
    responses: { 200: { description: "alive", ...json(healthBody) }, 503: { description: "loading or failed", ...json(healthBody) } },
  });
  registry.registerPath({
    method: "get",
    path: "/health/ready",
    summary: "Readiness: 200 when the model is loaded, its engine can run and the server is not draining",
    security: openByDefault,
    responses: { 200: { description: "ready", ...json(z.object({ status: z.literal("ready") })) }, 503: { description: "loading, failed or draining", ...json(healthBody) } },
  });
  registry.registerPath({ method: "get", path: "/metrics", summary: "Prometheus text format", security: openByDefault, responses: { 200: { description: "metrics", content: { "text/plain": { schema: { type: "string" } } } } } });
  registry.registerPath({ method: "get", path: OPENAPI_PATH, summary: "This document", security: [{}], responses: { 200: { description: "OpenAPI 3.1", content: { "application/json": { schema: { type: "object" } } } } } });
  registry.registerPath({
    method: "get",
    path: `${DOCS_ASSETS_BASE}/swagger-ui-dist/{file}`,
    summary: "Swagger UI's script and style for the docs page, from the installed swagger-ui-dist",
    security: [{}],
    request: { params: z.object({ file: z.enum(Object.keys(DOCS_ASSETS) as [string, ...string[]]) }) },
    responses: { 200: { description: "JavaScript or CSS" }, 404: { description: "not one of the docs page's assets" } },
  });
  registry.registerPath({ method: "get", path: DOCS_PATH, summary: "Interactive documentation of this document", security: [{}], responses: { 200: { description: "HTML", content: { "text/html": { schema: { type: "string" } } } } } });
  registry.registerPath({ method: "get", path: "/", summary: "The playground page", security: [{}], responses: { 200: { description: "HTML", content: { "text/html": { schema: { type: "string" } } } } } });
  registry.registerPath({
    method: "get",
    path: "/playground/{file}",
    summary: "The playground's ES modules, by name; any other name is a 404",
    security: [{}],
    request: { params: z.object({ file: z.enum(PLAYGROUND_MODULES) }) },
    responses: { 200: { description: "JavaScript", content: { "text/javascript": { schema: { type: "string" } } } }, 404: { description: "not one of the playground's modules" } },
  });
  registry.registerPath({
    method: "get",
    path: "/playground/engine.js",
    summary: "The in-browser engine: a module worker running the served Pocket TTS model in the page (built with Bun; 503 under other runtimes)",
    security: [{}],
    responses: { 200: { description: "JavaScript, with an ETag", content: { "text/javascript": { schema: { type: "string" } } } }, 304: { description: "the ETag in If-None-Match is current" }, ...errorResponses(503) },
  });
  registry.registerPath({
    method: "get",
    path: "/playground/decoder.js",
    summary: "The in-browser engine's Mimi decoder worker, which the engine starts so decoding overlaps sampling (built with Bun; 503 under other runtimes)",
    security: [{}],
    responses: { 200: { description: "JavaScript, with an ETag", content: { "text/javascript": { schema: { type: "string" } } } }, 304: { description: "the ETag in If-None-Match is current" }, ...errorResponses(503) },
  });
  registry.registerPath({
    method: "get",
    path: "/playground/ort/{file}",
    summary: "onnxruntime-web's loaders and .wasm files for the in-browser engine, by name; any other name is a 404",
    security: [{}],
    request: { params: z.object({ file: z.string().describe("an onnxruntime-web build file, e.g. ort-wasm-simd-threaded.wasm or ort-wasm-simd-threaded.jsep.mjs") }) },
    responses: { 200: { description: "JavaScript or WebAssembly", content: { "application/wasm": { schema: { type: "string", format: "binary" } }, "text/javascript": { schema: { type: "string" } } } }, 404: { description: "not one of onnxruntime-web's files" } },
  });
  registerElevenLabsPaths(registry);
  registry.registerPath({ method: "get", path: "/favicon.ico", summary: "No icon (204)", security: [{}], responses: { 204: { description: "empty" } } });

  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: "3.1.0",
    info: { title: "voxedge", version: "0.1.0", description: "OpenAI's speech API and vLLM-Omni's extensions. Errors are `{\"error\": {\"message\", \"type\", \"param\", \"code\"}}`. ElevenLabs' API is under `/elevenlabs`, its errors `{\"detail\": {\"status\", \"message\"}}`; each `/elevenlabs/v1/…` path is also answered without its `/v1`, for clients whose base URL stands for it." },
    servers: [{ url: "/" }],
  });
}

const elevenLabsErrorSchema = z.object({ detail: z.object({ status: z.string(), message: z.string() }) });
const ELEVENLABS_ERROR_DESCRIPTIONS: Record<number, string> = {
  ...ERROR_DESCRIPTIONS,
  400: "a caller mistake (e.g. invalid_output_format, model_not_found)",
  404: "voice_not_found, or no such route",
  422: "validation_error: the body or query breaks ElevenLabs' schema",
};
const elevenLabsErrorResponses = (...statuses: number[]): RouteConfig["responses"] =>
  Object.fromEntries(statuses.map((status) => [status, { description: ELEVENLABS_ERROR_DESCRIPTIONS[status] ?? "error", content: { "application/json": { schema: elevenLabsErrorSchema } } }]));
const elevenLabsSecurity: SecurityRequirement[] = [{ xiApiKey: [] }, ...bearer];

const alignmentSchema = z.object({ characters: z.array(z.string()), character_start_times_seconds: z.array(z.number()), character_end_times_seconds: z.array(z.number()) });
const timestampedAudioSchema = z.object({ audio_base64: z.string(), alignment: alignmentSchema.nullable(), normalized_alignment: alignmentSchema.nullable() });
const elevenLabsVoiceSchema = z.object({
  voice_id: z.string(),
  name: z.string(),
  category: z.enum(["premade", "cloned"]),
  labels: z.record(z.string(), z.string()),
  description: z.string().nullable(),
  preview_url: z.null(),
  available_for_tiers: z.array(z.string()),
  settings: z.null(),
  high_quality_base_model_ids: z.array(z.string()),
  is_owner: z.boolean(),
  created_at_unix: z.number().int().nullable(),
});
const elevenLabsModelSchema = z.object({
  model_id: z.string(),
  name: z.string(),
  description: z.string(),
  can_do_text_to_speech: z.boolean(),
  can_do_voice_conversion: z.boolean(),
  can_be_finetuned: z.boolean(),
  can_use_style: z.boolean(),
  can_use_speaker_boost: z.boolean(),
  serves_pro_voices: z.boolean(),
  token_cost_factor: z.number(),
  requires_alpha_access: z.boolean(),
  max_characters_request_free_user: z.number().int(),
  max_characters_request_subscribed_user: z.number().int(),
  maximum_text_length_per_request: z.number().int(),
  languages: z.array(z.object({ language_id: z.string(), name: z.string() })),
  model_rates: z.object({ character_cost_multiplier: z.number() }),
  concurrency_group: z.string(),
});
const voiceIdParams = z.object({ voice_id: z.string().describe("a built-in voice's name, an uploaded voice's, default, or an alias: ElevenLabs' premade voices by id or name, --voice-aliases (case-insensitive)") });

/** ElevenLabs' API under /elevenlabs: the routes its SDKs call, with its error shape. */
function registerElevenLabsPaths(registry: OpenAPIRegistry): void {
  const outputFormat = z.enum(Object.keys(ELEVENLABS_OUTPUT_FORMATS) as [string, ...string[]]).default(DEFAULT_ELEVENLABS_OUTPUT_FORMAT);
  const textToSpeechQuery = z.object({ output_format: outputFormat.optional(), enable_logging: z.enum(["true", "false"]).optional(), optimize_streaming_latency: z.string().optional() });
  const textToSpeechRequest = { params: voiceIdParams, query: textToSpeechQuery, body: { required: true, content: { "application/json": { schema: textToSpeechBodySchema } } } };
  const audio = { content: Object.fromEntries([...new Set(Object.values(ELEVENLABS_OUTPUT_FORMATS).map((format) => CONTENT_TYPES[format.responseFormat]))].map((type) => [type, { schema: binary }])) };
  const json = (schema: z.ZodType) => ({ content: { "application/json": { schema } } });
  const speechErrors = elevenLabsErrorResponses(400, 401, 404, 408, 413, 422, 429, 500, 503);
  const routes: { path: string; summary: string; responses: RouteConfig["responses"] }[] = [
    { path: "/elevenlabs/v1/text-to-speech/{voice_id}", summary: "ElevenLabs: speech as one file in output_format", responses: { 200: { description: "the audio", ...audio }, ...speechErrors } },
    { path: "/elevenlabs/v1/text-to-speech/{voice_id}/stream", summary: "ElevenLabs: speech streamed as it is made (chunked)", responses: { 200: { description: "the audio, chunk by chunk", ...audio }, ...speechErrors } },
    {
      path: "/elevenlabs/v1/text-to-speech/{voice_id}/with-timestamps",
      summary: "ElevenLabs: speech and character alignment (sentence boundaries exact, characters spread over their sentence's audio)",
      responses: { 200: { description: "base64 audio and alignment", ...json(timestampedAudioSchema) }, ...speechErrors },
    },
    {
      path: "/elevenlabs/v1/text-to-speech/{voice_id}/stream/with-timestamps",
      summary: "ElevenLabs: newline-delimited JSON chunks of base64 audio; a sentence's alignment comes with its last chunk",
      responses: { 200: { description: "one JSON object a line", content: { "application/x-ndjson": { schema: timestampedAudioSchema } } }, ...speechErrors },
    },
  ];
  for (const route of routes) registry.registerPath({ method: "post", path: route.path, summary: route.summary, security: elevenLabsSecurity, request: textToSpeechRequest, responses: route.responses });

  registry.registerPath({
    method: "get",
    path: "/elevenlabs/v1/voices",
    summary: "ElevenLabs: every voice (uploaded: cloned; built-in, then aliases such as ElevenLabs' premade voices: premade, labels.speaks_with naming the voice an alias speaks with)",
    security: elevenLabsSecurity,
    responses: { 200: { description: "voices", ...json(z.object({ voices: z.array(elevenLabsVoiceSchema) })) }, ...elevenLabsErrorResponses(401, 503) },
  });
  registry.registerPath({
    method: "get",
    path: "/elevenlabs/v2/voices",
    summary: "ElevenLabs: a page of voices, by search (name) and voice_type or category",
    security: elevenLabsSecurity,
    request: {
      query: z.object({
        page_size: z.number().int().min(1).max(MAX_VOICES_PAGE_SIZE).optional(),
        next_page_token: z.string().optional(),
        search: z.string().optional(),
        voice_type: z.string().optional().describe("default (built-in) or personal (uploaded); others list all"),
        category: z.string().optional().describe("premade or cloned"),
      }),
    },
    responses: {
      200: { description: "a page", ...json(z.object({ voices: z.array(elevenLabsVoiceSchema), has_more: z.boolean(), total_count: z.number().int(), next_page_token: z.string().nullable() })) },
      ...elevenLabsErrorResponses(401, 422, 503),
    },
  });
  registry.registerPath({
    method: "get",
    path: "/elevenlabs/v1/voices/{voice_id}",
    summary: "ElevenLabs: one voice",
    security: elevenLabsSecurity,
    request: { params: voiceIdParams },
    responses: { 200: { description: "the voice", ...json(elevenLabsVoiceSchema) }, ...elevenLabsErrorResponses(401, 404, 503) },
  });
  registry.registerPath({
    method: "delete",
    path: "/elevenlabs/v1/voices/{voice_id}",
    summary: "ElevenLabs: delete an uploaded voice (a built-in one is a 400)",
    security: elevenLabsSecurity,
    request: { params: voiceIdParams },
    responses: { 200: { description: "deleted", ...json(z.object({ status: z.literal("ok") })) }, ...elevenLabsErrorResponses(400, 401, 404, 503, 507) },
  });
  registry.registerPath({
    method: "post",
    path: "/elevenlabs/v1/voices/add",
    summary: "ElevenLabs: instant voice cloning into the voice store (400 where the model cannot clone); the voice_id is the name",
    security: elevenLabsSecurity,
    request: {
      body: {
        required: true,
        content: {
          "multipart/form-data": {
            schema: {
              type: "object",
              required: ["name", "files"],
              properties: {
                name: { type: "string", maxLength: MAX_VOICE_NAME_CHARS },
                files: { type: "array", items: binary, description: `1–30 s of audio, at most 10 MB (the first file is used): ${ALLOWED_UPLOAD_MIME_TYPES.join(", ")}` },
                description: { type: "string", maxLength: MAX_SPEAKER_DESCRIPTION_CHARS },
                labels: { type: "string", description: "JSON object; its `consent` entry is the id of the speaker's consent recording, unless the `consent` field is sent" },
                consent: { type: "string", maxLength: MAX_CONSENT_CHARS, description: "id of the speaker's consent recording (required here or in labels)" },
                remove_background_noise: { type: "boolean", description: "accepted and ignored" },
              },
            },
          },
        },
      },
    },
    responses: { 200: { description: "the new voice", ...json(z.object({ voice_id: z.string(), requires_verification: z.literal(false) })) }, ...elevenLabsErrorResponses(400, 401, 408, 415, 422, 503, 507) },
  });
  const socketQuery = z.object({
    model_id: z.string().optional(),
    output_format: outputFormat.optional(),
    inactivity_timeout: z.number().int().min(1).max(180).optional().describe("seconds without a message before a stream closes (default 20)"),
    xi_api_key: z.string().optional().describe("the API key, for clients that cannot set headers"),
  });
  for (const [path, summary] of [
    ["/elevenlabs/v1/text-to-speech/{voice_id}/stream-input", 'ElevenLabs WebSocket: {"text": " "} opens, text (flush) in, {"text": ""} ends; {audio, isFinal, alignment, normalizedAlignment} out'],
    ["/elevenlabs/v1/text-to-speech/{voice_id}/multi-stream-input", "ElevenLabs WebSocket: several streams by context_id, flush, close_context, close_socket; audio messages carry contextId"],
  ] as const) {
    registry.registerPath({
      method: "get",
      path,
      summary,
      security: [...elevenLabsSecurity, { xiApiKeyQuery: [] }],
      request: { params: voiceIdParams, query: socketQuery },
      responses: { 101: { description: "switched to the WebSocket protocol" }, ...elevenLabsErrorResponses(400, 401, 404, 422, 503) },
    });
  }
  registry.registerPath({
    method: "get",
    path: "/elevenlabs/v1/models",
    summary: "ElevenLabs: the served model and the ElevenLabs model ids it answers",
    security: elevenLabsSecurity,
    responses: { 200: { description: "models", ...json(z.array(elevenLabsModelSchema)) }, ...elevenLabsErrorResponses(401, 503) },
  });
}

let document: ReturnType<typeof buildDocument> | undefined;

/** Built once, on first use: the schemas do not change while the server runs. */
export function openApiDocument(): ReturnType<typeof buildDocument> {
  document ??= buildDocument();
  return document;
}

/**
 * Swagger UI's own script and style, served from the installed swagger-ui-dist rather than a CDN: a
 * self-hosted server is often on a network that cannot reach one. Only these two files, by name.
 */
const DOCS_ASSETS: Readonly<Record<string, string>> = {
  "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
  "swagger-ui.css": "text/css; charset=utf-8",
};
const DOCS_ASSETS_BASE = `${DOCS_PATH}/assets`;
const resolveInstalled = createRequire(import.meta.url).resolve;

export function registerOpenApiRoutes(app: Hono): void {
  app.get(OPENAPI_PATH, (c) => c.json(openApiDocument()));
  // The page asks for `${baseUrl}/swagger-ui-dist/<file>`; both it and the document's URL are relative to
  // the page, so the docs work behind a reverse proxy's path prefix too.
  app.get(DOCS_PATH, swaggerUI({ url: OPENAPI_PATH.slice(1), title: "voxedge API", baseUrl: DOCS_ASSETS_BASE.slice(1) }));
  app.get(`${DOCS_ASSETS_BASE}/swagger-ui-dist/:file`, async (c) => {
    const file = c.req.param("file");
    const contentType = DOCS_ASSETS[file];
    if (contentType === undefined) return c.notFound();
    const source = await readFile(resolveInstalled(`swagger-ui-dist/${file}`));
    return c.body(source, 200, { "Content-Type": contentType, "Cache-Control": "public, max-age=86400" });
  });
}
