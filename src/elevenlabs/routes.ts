/**
 * ElevenLabs' API under /elevenlabs (docs/api.md, "ElevenLabs API"): a caller written for ElevenLabs works by
 * changing its base URL to http://host:port/elevenlabs. Text-to-speech goes through the speech service as
 * every other route does (the same checks, admission, backpressure and cancellation); voices are the voice
 * store's, a voice_id being a built-in voice's name or an uploaded voice's, or an alias (ElevenLabs' premade
 * voices, which its clients send by default, and --voice-aliases). Errors are ElevenLabs'
 * `{"detail": {"status", "message"}}` (its app renders its errors so, and the root app the errors raised before it runs).
 */
import type { OpenAPIRegistry, RouteConfig } from "@asteasolutions/zod-to-openapi";
import { Hono, type Context } from "hono";
import { z } from "zod";
import { errorHandler } from "../http/error-response.ts";
import {
  DEFAULT_ELEVENLABS_OUTPUT_FORMAT,
  ELEVENLABS_MODEL_IDS,
  ELEVENLABS_OUTPUT_FORMATS,
  ELEVENLABS_PREFIX,
  ElevenLabsError,
  elevenLabsErrorBody,
  IGNORED_BODY_FIELDS,
  ignoredVoiceSettings,
  MAX_VOICES_PAGE_SIZE,
  outputFormatOf,
  parseElevenLabs,
  addDictionaryFromRulesSchema,
  dictionaryRulesChangeSchema,
  dictionaryRulesRemovalSchema,
  textToSpeechBodySchema,
  textToSpeechQuerySchema,
  voicesPageQuerySchema,
  type ElevenLabsOutputFormat,
  type TextToSpeechBody,
} from "./schema.ts";
import { badRequest, echoed } from "../api/errors.ts";
import { ELEVENLABS_PREMADE_VOICES, isOpenAiVoiceName, premadeVoiceNamed, voiceAliasTarget } from "../api/voice-aliases.ts";
import { ALLOWED_UPLOAD_MIME_TYPES, MAX_CONSENT_CHARS, MAX_SPEAKER_DESCRIPTION_CHARS, parseVoiceUpload } from "../api/voices.ts";
import { DEFAULT_MAX_INPUT_CHARS, MAX_VOICE_NAME_CHARS } from "../api/speech.ts";
import { CONTENT_TYPES } from "../audio/encoders.ts";
import type { Logger } from "../log/logger.ts";
import { type SpeechService, type SpeechSpec, wholeAudio } from "../speech/service.ts";
import { elevenLabsSpec, FILE, STREAM } from "./dialect.ts";
import type { PronunciationDictionaries } from "./pronunciation.ts";

/** A PLS file of alias rules: 5,000 rules of a few dozen bytes each, with room to spare. */
const MAX_DICTIONARY_FILE_BYTES = 2 * 1024 * 1024;
import type { ResolvedVoice, VoiceCatalog } from "../voices/catalog.ts";
import type { OpenAiSpeech } from "../openai/dialect.ts";
import { TimedSpeech, type CharacterAlignment } from "./timed-speech.ts";
import type { StoredVoice, VoiceStore } from "../voices/store.ts";
import { noteAudio } from "../http/access-log.ts";
import { clientAbort, streamedResponse } from "../http/audio-stream.ts";
import { base64 } from "../http/base64.ts";
import { readJsonBody, type BodyLimits } from "../http/request-body.ts";
import { audioStreamHeaders, fileHeaders, ignoredFieldsHeader } from "../http/speech-headers.ts";
import { FORM_OVERHEAD_BYTES, MAX_UPLOAD_AUDIO_BYTES, readCappedForm, saveAudioUpload } from "../openai/voices.ts";
import { bearer, binary, ERROR_DESCRIPTIONS, json, type SecurityRequirement } from "../http/route-docs.ts";

export interface ElevenLabsRouteDeps {
  service: SpeechService;
  catalog: VoiceCatalog;
  openai: OpenAiSpeech;
  voices: VoiceStore;
  logger: Logger;
  body: BodyLimits;
  stallTimeoutMs: number;
  dictionaries: PronunciationDictionaries;
}

/** What no model here knows: every voice speaks the language of its model, which for all of them is English. */
const LANGUAGES = [{ language_id: "en", name: "English" }];
/** GET /v2/voices without page_size: ElevenLabs' default. */
const DEFAULT_VOICES_PAGE_SIZE = 10;

const elevenLabsErrorSchema = z.object({ detail: z.object({ status: z.string(), message: z.string() }) });
const ELEVENLABS_ERROR_DESCRIPTIONS: Readonly<Record<number, string>> = {
  ...ERROR_DESCRIPTIONS,
  400: "a caller mistake (e.g. invalid_output_format, model_not_found)",
  404: "voice_not_found, or no such route",
  422: "validation_error: the body or query breaks ElevenLabs' schema",
};
/** The error responses of the given statuses, each in ElevenLabs' error shape. */
export const elevenLabsErrorResponses = (...statuses: number[]): RouteConfig["responses"] =>
  Object.fromEntries(statuses.map((status) => [status, { description: ELEVENLABS_ERROR_DESCRIPTIONS[status] ?? "error", ...json(elevenLabsErrorSchema) }]));
export const elevenLabsSecurity: SecurityRequirement[] = [{ xiApiKey: [] }, ...bearer];

export const voiceIdParams = z.object({ voice_id: z.string().describe("a built-in voice's name, an uploaded voice's, default, or an alias: ElevenLabs' premade voices by id or name, --voice-aliases (case-insensitive)") });
/** output_format as documented: the formats by name (the route parses any string and names a wrong one in its error). */
export const documentedOutputFormat = z.enum(Object.keys(ELEVENLABS_OUTPUT_FORMATS) as [string, ...string[]]).default(DEFAULT_ELEVENLABS_OUTPUT_FORMAT);

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
type ElevenLabsVoice = z.infer<typeof elevenLabsVoiceSchema>;
type VoiceCategory = ElevenLabsVoice["category"];
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
type ElevenLabsModel = z.infer<typeof elevenLabsModelSchema>;

/** The routes of elevenLabsApp, at the paths where it is mounted. */
export function describeElevenLabsRoutes(registry: OpenAPIRegistry): void {
  const textToSpeechQuery = z.object({ output_format: documentedOutputFormat.optional(), enable_logging: z.enum(["true", "false"]).optional(), optimize_streaming_latency: z.string().optional() });
  const textToSpeechRequest = { params: voiceIdParams, query: textToSpeechQuery, body: { required: true, ...json(textToSpeechBodySchema) } };
  const audio = { content: Object.fromEntries([...new Set(Object.values(ELEVENLABS_OUTPUT_FORMATS).map((format) => CONTENT_TYPES[format.responseFormat]))].map((type) => [type, { schema: binary }])) };
  const speechErrors = elevenLabsErrorResponses(400, 401, 404, 408, 413, 422, 429, 500, 503);
  const routes: { path: string; summary: string; responses: RouteConfig["responses"] }[] = [
    { path: "/v1/text-to-speech/{voice_id}", summary: "ElevenLabs: speech as one file in output_format", responses: { 200: { description: "the audio", ...audio }, ...speechErrors } },
    { path: "/v1/text-to-speech/{voice_id}/stream", summary: "ElevenLabs: speech streamed as it is made (chunked)", responses: { 200: { description: "the audio, chunk by chunk", ...audio }, ...speechErrors } },
    {
      path: "/v1/text-to-speech/{voice_id}/with-timestamps",
      summary: "ElevenLabs: speech and character alignment (sentence boundaries exact, characters spread over their sentence's audio)",
      responses: { 200: { description: "base64 audio and alignment", ...json(timestampedAudioSchema) }, ...speechErrors },
    },
    {
      path: "/v1/text-to-speech/{voice_id}/stream/with-timestamps",
      summary: "ElevenLabs: newline-delimited JSON chunks of base64 audio; a sentence's alignment comes with its last chunk",
      responses: { 200: { description: "one JSON object a line", content: { "application/x-ndjson": { schema: timestampedAudioSchema } } }, ...speechErrors },
    },
  ];
  for (const route of routes) registry.registerPath({ method: "post", path: ELEVENLABS_PREFIX + route.path, summary: route.summary, security: elevenLabsSecurity, request: textToSpeechRequest, responses: route.responses });

  registry.registerPath({
    method: "get",
    path: `${ELEVENLABS_PREFIX}/v1/voices`,
    summary: "ElevenLabs: every voice (uploaded: cloned; built-in, then aliases such as ElevenLabs' premade voices: premade, labels.speaks_with naming the voice an alias speaks with)",
    security: elevenLabsSecurity,
    responses: { 200: { description: "voices", ...json(z.object({ voices: z.array(elevenLabsVoiceSchema) })) }, ...elevenLabsErrorResponses(401, 503) },
  });
  registry.registerPath({
    method: "get",
    path: `${ELEVENLABS_PREFIX}/v2/voices`,
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
    path: `${ELEVENLABS_PREFIX}/v1/voices/{voice_id}`,
    summary: "ElevenLabs: one voice",
    security: elevenLabsSecurity,
    request: { params: voiceIdParams },
    responses: { 200: { description: "the voice", ...json(elevenLabsVoiceSchema) }, ...elevenLabsErrorResponses(401, 404, 503) },
  });
  registry.registerPath({
    method: "delete",
    path: `${ELEVENLABS_PREFIX}/v1/voices/{voice_id}`,
    summary: "ElevenLabs: delete an uploaded voice (a built-in one is a 400)",
    security: elevenLabsSecurity,
    request: { params: voiceIdParams },
    responses: { 200: { description: "deleted", ...json(z.object({ status: z.literal("ok") })) }, ...elevenLabsErrorResponses(400, 401, 404, 503, 507) },
  });
  registry.registerPath({
    method: "post",
    path: `${ELEVENLABS_PREFIX}/v1/voices/add`,
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
  registry.registerPath({
    method: "get",
    path: `${ELEVENLABS_PREFIX}/v1/models`,
    summary: "ElevenLabs: the served model and the ElevenLabs model ids it answers",
    security: elevenLabsSecurity,
    responses: { 200: { description: "models", ...json(z.array(elevenLabsModelSchema)) }, ...elevenLabsErrorResponses(401, 503) },
  });
  const dictionaryPath = `${ELEVENLABS_PREFIX}/v1/pronunciation-dictionaries`;
  const dictionaryId = z.object({ id: z.string() });
  const added = z.object({ id: z.string(), name: z.string(), created_by: z.string(), creation_time_unix: z.number().int(), version_id: z.string(), version_rules_num: z.number().int(), description: z.string().optional(), permission_on_resource: z.string() });
  const metadata = z.object({ id: z.string(), latest_version_id: z.string(), latest_version_rules_num: z.number().int(), name: z.string(), permission_on_resource: z.string(), created_by: z.string(), creation_time_unix: z.number().int(), description: z.string().optional() });
  const version = z.object({ id: z.string(), version_id: z.string(), version_rules_num: z.number().int() });
  const dictionaryErrors = elevenLabsErrorResponses(400, 401, 404, 422);
  const dictionaryRoutes: RouteConfig[] = [
    { method: "post", path: `${dictionaryPath}/add-from-rules`, summary: "ElevenLabs: a pronunciation dictionary from alias rules (phoneme rules are a 400: the model reads text); kept in this process's memory", request: { body: { required: true, ...json(addDictionaryFromRulesSchema) } }, responses: { 200: { description: "the dictionary and its first version", ...json(added) }, ...dictionaryErrors } },
    {
      method: "post",
      path: `${dictionaryPath}/add-from-file`,
      summary: "ElevenLabs: a pronunciation dictionary from a PLS file of alias rules",
      request: { body: { required: true, content: { "multipart/form-data": { schema: { type: "object", required: ["name", "file"], properties: { name: { type: "string" }, file: binary, description: { type: "string" } } } } } } },
      responses: { 200: { description: "the dictionary and its first version", ...json(added) }, ...dictionaryErrors },
    },
    { method: "get", path: dictionaryPath, summary: "ElevenLabs: the pronunciation dictionaries, newest first", responses: { 200: { description: "a page", ...json(z.object({ pronunciation_dictionaries: z.array(metadata), next_cursor: z.string().nullable(), has_more: z.boolean() })) }, ...dictionaryErrors } },
    { method: "get", path: `${dictionaryPath}/{id}`, summary: "ElevenLabs: a pronunciation dictionary and its latest rules", request: { params: dictionaryId }, responses: { 200: { description: "the dictionary", ...json(metadata.extend({ rules: z.array(z.object({ type: z.literal("alias"), string_to_replace: z.string(), alias: z.string() })) })) }, ...dictionaryErrors } },
    { method: "get", path: `${dictionaryPath}/{id}/{version}/download`, summary: "ElevenLabs: a version's rules as a PLS file", request: { params: dictionaryId.extend({ version: z.string() }) }, responses: { 200: { description: "the PLS file", content: { "application/pls+xml": { schema: { type: "string" } } } }, ...dictionaryErrors } },
    { method: "post", path: `${dictionaryPath}/{id}/add-rules`, summary: "ElevenLabs: a new version with these alias rules added (a rule for a word already there replaces it)", request: { params: dictionaryId, body: { required: true, ...json(dictionaryRulesChangeSchema) } }, responses: { 200: { description: "the new version", ...json(version) }, ...dictionaryErrors } },
    { method: "post", path: `${dictionaryPath}/{id}/remove-rules`, summary: "ElevenLabs: a new version without the rules for these words", request: { params: dictionaryId, body: { required: true, ...json(dictionaryRulesRemovalSchema) } }, responses: { 200: { description: "the new version", ...json(version) }, ...dictionaryErrors } },
  ];
  for (const route of dictionaryRoutes) registry.registerPath({ ...route, security: elevenLabsSecurity });
}

/** ElevenLabs' REST API as an app of its own, mounted at /elevenlabs: its routes answer errors in its shape. */
export function elevenLabsApp(deps: ElevenLabsRouteDeps): Hono {
  const app = new Hono();
  app.onError(errorHandler(elevenLabsErrorBody, deps.logger));
  const { service, catalog, openai, voices, logger, dictionaries } = deps;

  /** The request as the speech core reads it, and the body fields no model here uses. */
  const textToSpeech = async (c: Context, signal: AbortSignal) => {
    const query = parseElevenLabs(textToSpeechQuerySchema, c.req.query(), "query");
    const format = outputFormatOf(query.output_format);
    const body = parseElevenLabs(textToSpeechBodySchema, await readJsonBody(c, deps.body));
    checkModelId(openai, body.model_id);
    const name = await voiceNamed(catalog, c.req.param("voice_id") ?? "");
    const routeIgnored = [...IGNORED_BODY_FIELDS.filter((field) => body[field] !== undefined), ...ignoredVoiceSettings(body.voice_settings)];
    const voice = await catalog.resolve({ name }, { uploads: true }, signal);
    const lexicon = dictionaries.lexiconFor(body.pronunciation_dictionary_locators);
    const request = { text: body.text, format, speed: body.voice_settings?.speed, seed: body.seed, languageCode: body.language_code, normalization: body.apply_text_normalization, lexicon };
    return elevenLabsSpec(request, voice, routeIgnored);
  };
  /**
   * Every text-to-speech route takes a running place first: a full server refuses (429 in ElevenLabs' shape)
   * before the body is read; the place goes to the request's speech, or back when the route ends without it.
   */
  const withPlace = (abort: AbortController, respond: () => Promise<Response>): Promise<Response> => service.withPlace(abort.signal, respond);
  /** The whole utterance as one file, speed changed: the file route, and the stream route when a speed is set. */
  const fileResponse = async (c: Context, spec: SpeechSpec, abort: AbortController) => {
    const speech = await service.start(spec, FILE, abort.signal, (seconds) => noteAudio(c, seconds));
    const file = await wholeAudio(speech.audio);
    return new Response(file as Uint8Array<ArrayBuffer>, { headers: fileHeaders(speech.prepared, file.byteLength, await speech.done) });
  };

  app.post("/v1/text-to-speech/:voice_id", async (c) => {
    const abort = clientAbort(c.req.raw.signal);
    return withPlace(abort, async () => fileResponse(c, await textToSpeech(c, abort.signal), abort));
  });

  app.post("/v1/text-to-speech/:voice_id/stream", async (c) => {
    const abort = clientAbort(c.req.raw.signal);
    return withPlace(abort, async () => {
      const spec = await textToSpeech(c, abort.signal);
      // A time-stretch needs the whole utterance (OpenAI's route refuses speed with streaming); ElevenLabs'
      // clients stream by default and send a speed with it, so they get the changed audio once it is all made.
      if (spec.speed !== undefined && spec.speed !== 1) return fileResponse(c, spec, abort);
      const speech = await service.start(spec, STREAM, abort.signal, (seconds) => noteAudio(c, seconds));
      return streamedResponse(c, abort, () => ({ headers: audioStreamHeaders(speech.prepared), bytes: speech.audio }), deps.stallTimeoutMs, (error) =>
        logger.error("elevenlabs stream failed", { error: String(error) }),
      );
    });
  });

  app.post("/v1/text-to-speech/:voice_id/with-timestamps", async (c) => {
    const abort = clientAbort(c.req.raw.signal);
    return withPlace(abort, async () => {
      const spec = await textToSpeech(c, abort.signal);
      // As a file on the speech route: the whole utterance is held until it is encoded.
      if (spec.text.length > DEFAULT_MAX_INPUT_CHARS) {
        throw badRequest(`text longer than ${DEFAULT_MAX_INPUT_CHARS} characters must be streamed (…/stream/with-timestamps): this response holds the whole utterance in memory`, "text");
      }
      const timed = await TimedSpeech.start(service, spec, abort.signal, (seconds) => noteAudio(c, seconds));
      try {
        const { audio, alignment, normalizedAlignment } = await timed.file();
        return c.json({ audio_base64: base64(audio), alignment, normalized_alignment: normalizedAlignment }, 200, ignoredFieldsHeader(timed.ignoredFields));
      } catch (error) {
        abort.abort();
        throw error;
      }
    });
  });

  app.post("/v1/text-to-speech/:voice_id/stream/with-timestamps", async (c) => {
    const abort = clientAbort(c.req.raw.signal);
    return withPlace(abort, async () => {
      const spec = await textToSpeech(c, abort.signal);
      const timed = await TimedSpeech.start(service, spec, abort.signal, (seconds) => noteAudio(c, seconds));
      const open = () => ({ headers: { "Content-Type": "application/x-ndjson", "Cache-Control": "no-store", ...ignoredFieldsHeader(timed.ignoredFields) }, bytes: timestampLines(timed) });
      return streamedResponse(c, abort, open, deps.stallTimeoutMs, (error) => logger.error("elevenlabs timestamped stream failed", { error: String(error) }));
    });
  });

  app.get("/v1/voices", async (c) => c.json({ voices: await listVoices(catalog) }));

  app.get("/v2/voices", async (c) => {
    const query = parseElevenLabs(voicesPageQuerySchema, c.req.query(), "query");
    const search = query.search?.trim().toLowerCase();
    const wanted = categoryFilter(query.voice_type ?? query.category);
    const matching = (await listVoices(catalog)).filter((voice) => (!search || voice.name.toLowerCase().includes(search)) && wanted(voice.category));
    const offset = Number(query.next_page_token ?? 0);
    const pageSize = query.page_size ?? DEFAULT_VOICES_PAGE_SIZE;
    const page = matching.slice(offset, offset + pageSize);
    const hasMore = offset + page.length < matching.length;
    return c.json({ voices: page, has_more: hasMore, total_count: matching.length, next_page_token: hasMore ? String(offset + page.length) : null });
  });

  app.get("/v1/voices/:voice_id", async (c) => {
    const id = c.req.param("voice_id");
    const found = (await listVoices(catalog)).find((voice) => voice.voice_id.toLowerCase() === id.trim().toLowerCase());
    if (!found) throw voiceNotFound(id);
    return c.json(found);
  });

  app.delete("/v1/voices/:voice_id", async (c) => {
    const id = c.req.param("voice_id");
    if (await voices.delete(id.trim())) return c.json({ status: "ok" });
    const name = id.trim().toLowerCase();
    if (service.model().capabilities.voices.includes(name)) throw new ElevenLabsError(400, "voice_not_deletable", `Voice '${echoed(id)}' is built in; only uploaded voices can be deleted`, "voice_id");
    if (voiceAliasTarget(catalog.aliasTable, name) !== undefined) throw new ElevenLabsError(400, "voice_not_deletable", `Voice '${echoed(id)}' is an alias of another voice; only uploaded voices can be deleted`, "voice_id");
    throw voiceNotFound(id);
  });

  app.post("/v1/voices/add", async (c) => {
    const capabilities = service.model().capabilities;
    if (!capabilities.supportsCloning) {
      throw new ElevenLabsError(400, "voice_cloning_unavailable", `Model '${capabilities.modelId}' (${capabilities.description}) cannot clone voices, so a voice cannot be added; use one of its built-in voices`);
    }
    const form = await readCappedForm(c, { maxBytes: MAX_UPLOAD_AUDIO_BYTES + FORM_OVERHEAD_BYTES, timeoutMs: deps.body.timeoutMs });
    if (!form.files.has("files")) throw new ElevenLabsError(422, "validation_error", "files is required: one or more audio samples of the voice", "files");
    const { name, consent, speakerDescription, source } = parseVoiceUpload({
      name: form.fields.get("name"),
      consent: form.fields.get("consent") ?? consentLabel(form.fields.get("labels")),
      speaker_description: form.fields.get("description"),
      audio_sample: form.files.get("files"),
    });
    if (source.kind !== "audio") throw new ElevenLabsError(422, "validation_error", "files must hold an audio sample", "files");
    const voice = await saveAudioUpload({ voices, logger }, { name, consent, speakerDescription, file: source.file, mimeType: source.mimeType });
    return c.json({ voice_id: voice.name, requires_verification: false });
  });

  app.post("/v1/pronunciation-dictionaries/add-from-rules", async (c) => {
    const body = parseElevenLabs(addDictionaryFromRulesSchema, await readJsonBody(c, deps.body));
    return c.json(dictionaries.addFromRules(body.name, body.rules, body.description));
  });
  app.post("/v1/pronunciation-dictionaries/add-from-file", async (c) => {
    const form = await readCappedForm(c, { maxBytes: MAX_DICTIONARY_FILE_BYTES + FORM_OVERHEAD_BYTES, timeoutMs: deps.body.timeoutMs });
    const name = form.fields.get("name");
    if (!name) throw new ElevenLabsError(422, "validation_error", "name is required", "name");
    const file = form.files.get("file");
    if (!file) throw new ElevenLabsError(422, "validation_error", "file is required: a PLS lexicon of alias rules", "file");
    return c.json(dictionaries.addFromFile(name, new TextDecoder().decode(file.bytes), form.fields.get("description")));
  });
  app.get("/v1/pronunciation-dictionaries", (c) => {
    const all = dictionaries.list();
    const pageSize = Math.min(100, Math.max(1, Number(c.req.query("page_size") ?? 30) || 30));
    const start = Number(c.req.query("cursor") ?? 0) || 0;
    const page = all.slice(start, start + pageSize);
    const more = start + pageSize < all.length;
    return c.json({ pronunciation_dictionaries: page, next_cursor: more ? String(start + pageSize) : null, has_more: more });
  });
  app.get("/v1/pronunciation-dictionaries/:id", (c) => c.json(dictionaries.get(c.req.param("id"))));
  app.get("/v1/pronunciation-dictionaries/:id/:version/download", (c) =>
    c.body(dictionaries.download(c.req.param("id"), c.req.param("version")), 200, { "Content-Type": "application/pls+xml", "Content-Disposition": `attachment; filename="${c.req.param("id")}.pls"` }),
  );
  app.post("/v1/pronunciation-dictionaries/:id/add-rules", async (c) => {
    const body = parseElevenLabs(dictionaryRulesChangeSchema, await readJsonBody(c, deps.body));
    return c.json(dictionaries.addRules(c.req.param("id"), body.rules));
  });
  app.post("/v1/pronunciation-dictionaries/:id/remove-rules", async (c) => {
    const body = parseElevenLabs(dictionaryRulesRemovalSchema, await readJsonBody(c, deps.body));
    return c.json(dictionaries.removeRules(c.req.param("id"), body.rule_strings));
  });

  app.get("/v1/models", (c) => {
    const capabilities = service.model().capabilities;
    const maxChars = service.maxInputChars;
    return c.json(
      modelIds(openai).map((modelId): ElevenLabsModel => ({
        model_id: modelId,
        name: modelId === capabilities.modelId ? capabilities.description : `${modelId} (served by ${capabilities.modelId})`,
        description: capabilities.description,
        can_be_finetuned: false,
        can_do_text_to_speech: true,
        can_do_voice_conversion: false,
        can_use_style: false,
        can_use_speaker_boost: false,
        serves_pro_voices: false,
        token_cost_factor: 1,
        requires_alpha_access: false,
        max_characters_request_free_user: maxChars,
        max_characters_request_subscribed_user: maxChars,
        maximum_text_length_per_request: maxChars,
        languages: LANGUAGES,
        model_rates: { character_cost_multiplier: 1 },
        concurrency_group: "standard",
      })),
    );
  });
  return app;
}

/** One JSON object a line, as ElevenLabs streams them: a piece of audio and the alignment that ended in it. */
async function* timestampLines(timed: TimedSpeech): AsyncGenerator<Uint8Array, void, undefined> {
  const encoder = new TextEncoder();
  for await (const piece of timed.encoded()) {
    const alignment: CharacterAlignment | null = piece.alignment;
    yield encoder.encode(`${JSON.stringify({ audio_base64: base64(piece.audio), alignment, normalized_alignment: piece.normalizedAlignment })}\n`);
  }
}

/** The served model answers to ElevenLabs' model ids as well as to every name OpenAI's routes serve. */
function modelIds(openai: OpenAiSpeech): string[] {
  return [...new Set([openai.servedModelIds()[0]!, ...ELEVENLABS_MODEL_IDS, ...openai.servedModelIds()])];
}

export function checkModelId(openai: OpenAiSpeech, modelId: string | undefined): void {
  if (modelId === undefined || modelIds(openai).includes(modelId)) return;
  throw new ElevenLabsError(400, "model_not_found", `A model with model_id '${echoed(modelId)}' was not found. Served: ${modelIds(openai).join(", ")}`, "model_id");
}

function voiceNotFound(voiceId: string): ElevenLabsError {
  return new ElevenLabsError(404, "voice_not_found", `A voice with voice_id '${echoed(voiceId)}' was not found`, "voice_id");
}

/**
 * The voice a voice_id names (case-insensitive): an upload, a built-in voice, "default", or an alias (one of
 * ElevenLabs' premade voices by id or name, one of OpenAI's names, --voice-aliases), which the speech service
 * resolves; anything else is a 404.
 */
export async function voiceNamed(catalog: VoiceCatalog, voiceId: string): Promise<string> {
  if (await catalog.knows(voiceId, { uploads: true })) return voiceId.trim().toLowerCase();
  throw voiceNotFound(voiceId);
}

/**
 * Every voice as ElevenLabs lists it: uploads first, newest first, then the built-in ones an upload does not
 * shadow, then the aliases whose id nothing shadows: ElevenLabs' premade voices (their ids and names, which
 * its clients send or look up) and the names --voice-aliases adds, each saying which voice it speaks with.
 */
async function listVoices(catalog: VoiceCatalog): Promise<ElevenLabsVoice[]> {
  const listed = await catalog.list({ uploads: true });
  const uploaded = listed.uploaded.map(({ voice }) => voice).reverse().map(uploadedVoice);
  const shadowed = new Set(uploaded.map((voice) => voice.voice_id.toLowerCase()));
  const builtIn = listed.builtIn.filter((name) => !shadowed.has(name)).map(builtInVoice);
  for (const voice of builtIn) shadowed.add(voice.voice_id);
  const table = catalog.aliasTable;
  const aliases = [
    ...ELEVENLABS_PREMADE_VOICES.map(({ voiceId, name }) => ({ voiceId, name, premade: true })),
    ...Object.keys(table)
      .filter((alias) => !isOpenAiVoiceName(alias) && premadeVoiceNamed(alias) === undefined)
      .map((alias) => ({ voiceId: alias, name: alias, premade: false })),
  ]
    .filter(({ voiceId }) => !shadowed.has(voiceId.toLowerCase()))
    .map(({ voiceId, name, premade }) => aliasVoice(voiceId, name, premade, voiceAliasTarget(table, voiceId.toLowerCase())!));
  return [...uploaded, ...builtIn, ...aliases];
}

function builtInVoice(name: string): ElevenLabsVoice {
  return { ...voiceDefaults, voice_id: name, name, category: "premade", description: null, is_owner: false, created_at_unix: null };
}

function aliasVoice(voiceId: string, name: string, premade: boolean, target: string): ElevenLabsVoice {
  const speaksWith = target === "default" ? "the model's default voice" : `voice '${target}'`;
  const description = premade ? `ElevenLabs' premade voice ${name}: here it speaks with ${speaksWith}` : `An alias (--voice-aliases): it speaks with ${speaksWith}`;
  return { ...voiceDefaults, voice_id: voiceId, name, category: "premade", labels: { speaks_with: target }, description, is_owner: false, created_at_unix: null };
}

function uploadedVoice(voice: StoredVoice): ElevenLabsVoice {
  return { ...voiceDefaults, voice_id: voice.name, name: voice.name, category: "cloned", description: voice.speaker_description ?? null, is_owner: true, created_at_unix: voice.created_at };
}

const voiceDefaults: Pick<ElevenLabsVoice, "labels" | "preview_url" | "available_for_tiers" | "settings" | "high_quality_base_model_ids"> = {
  labels: {},
  preview_url: null,
  available_for_tiers: [],
  settings: null,
  high_quality_base_model_ids: [],
};

/**
 * GET /v2/voices' voice_type (or category): "default" and "premade" are the built-in voices, the kinds a
 * caller owns ("personal", "cloned", …) the uploads; anything else filters nothing.
 */
function categoryFilter(kind: string | undefined): (category: VoiceCategory) => boolean {
  switch (kind) {
    case "default":
    case "premade":
      return (category) => category === "premade";
    case "personal":
    case "workspace":
    case "saved":
    case "non-default":
    case "cloned":
      return (category) => category === "cloned";
    default:
      return () => true;
  }
}

/**
 * ElevenLabs' form has no consent field, and an upload here needs the id of the speaker's consent recording:
 * a caller sends it as `consent`, or as the `consent` label (`labels: {"consent": "…"}`), which its SDK can send.
 */
function consentLabel(labels: string | undefined): string | undefined {
  if (labels === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(labels);
    return typeof parsed === "object" && parsed !== null && typeof (parsed as Record<string, unknown>).consent === "string" ? ((parsed as Record<string, unknown>).consent as string) : undefined;
  } catch {
    throw new ElevenLabsError(422, "validation_error", "labels must be a JSON object of strings", "labels");
  }
}
