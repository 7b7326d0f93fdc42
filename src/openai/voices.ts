/** GET/POST/DELETE /v1/audio/voices: vLLM-Omni's upload semantics over the persistent voice store. */
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import type { Context, Hono } from "hono";
import { z } from "zod";
import { ApiError, badRequest } from "../api/errors.ts";
import { MAX_REF_TEXT_CHARS, MAX_VOICE_NAME_CHARS } from "../api/speech.ts";
import { ALLOWED_UPLOAD_MIME_TYPES, MAX_CONSENT_CHARS, MAX_EMBEDDING_LENGTH, MAX_SPEAKER_DESCRIPTION_CHARS, parseVoiceUpload, type UploadFile } from "../api/voices.ts";
import type { SpeechService } from "../speech/service.ts";
import type { VoiceCatalog } from "../voices/catalog.ts";
import { decodeReferenceAudio } from "../voices/ref-audio.ts";
import type { StoredVoice, VoiceStore } from "../voices/store.ts";
import { guardedBody, type BodyLimits } from "../http/request-body.ts";
import type { Logger } from "../log/logger.ts";
import { bearer, binary, errorResponses, json, openByDefault, type MediaSchema } from "../http/route-docs.ts";
import { MaxFileSizeExceededError, MaxTotalSizeExceededError, parseMultipartRequest } from "@remix-run/multipart-parser";

export const MAX_UPLOAD_AUDIO_BYTES = 10 * 1024 * 1024;
/** Room for the other form fields (a 4096-number embedding is ~100 KB of JSON) and multipart framing. */
export const FORM_OVERHEAD_BYTES = 256 * 1024;
const MAX_FORM_PARTS = 16;

export interface VoiceRouteDeps {
  service: SpeechService;
  catalog: VoiceCatalog;
  voices: VoiceStore;
  logger: Logger;
  /** The whole upload must arrive within this long. */
  bodyTimeoutMs: number;
  /** Whether the request came without a key while the server asks for one (a public listing). */
  isAnonymous: (c: Context) => boolean;
}

/** An uploaded voice as the listing and the upload answer it. */
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

export function describeVoiceRoutes(registry: OpenAPIRegistry): void {
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
}

export function registerVoiceRoutes(app: Hono, { service, catalog, voices, logger, bodyTimeoutMs, isAnonymous }: VoiceRouteDeps): void {
  app.get("/v1/audio/voices", async (c) => {
    const listed = await catalog.list({ uploads: true });
    const builtIn = listed.builtIn;
    const uploaded = listed.uploaded.map(({ voice }) => voice);
    // As the seed: one lower-case name per voice, an upload and the built-in voice it shadows being one.
    const names = [...new Set([...builtIn, ...uploaded.map((voice) => voice.name.toLowerCase())])].sort();
    // Consent ids, transcripts and descriptions are the uploaders' data: a caller without a key (a public
    // listing) sees each upload without them.
    if (isAnonymous(c)) return c.json({ voices: names, uploaded_voices: uploaded.map(({ consent: _consent, ref_text: _refText, speaker_description: _description, ...shown }) => shown) });
    return c.json({ voices: names, uploaded_voices: uploaded });
  });

  app.post("/v1/audio/voices", async (c) => {
    const form = await readCappedForm(c, { maxBytes: MAX_UPLOAD_AUDIO_BYTES + FORM_OVERHEAD_BYTES, timeoutMs: bodyTimeoutMs });
    const { name, consent, refText, speakerDescription, source } = parseVoiceUpload({ ...Object.fromEntries(form.fields), audio_sample: form.files.get("audio_sample") });

    if (source.kind === "embedding") {
      const { embedding } = source;
      const accepted = service.model().capabilities.speakerEmbeddingDims;
      if (accepted.length === 0) {
        throw badRequest(`model '${service.model().capabilities.modelId}' accepts no speaker embeddings; upload audio_sample instead`, "speaker_embedding");
      }
      if (!accepted.includes(embedding.length)) {
        throw badRequest(`speaker_embedding has ${embedding.length} values; the model accepts ${accepted.join(" or ")}`, "speaker_embedding");
      }
      const voice = await voices.saveEmbedding({ name, consent, embedding });
      logger.info("voice uploaded", { embedding_dim: embedding.length, created_at: voice.created_at });
      return c.json({ success: true, voice });
    }

    const voice = await saveAudioUpload({ voices, logger }, { name, consent, refText, speakerDescription, file: source.file, mimeType: source.mimeType });
    return c.json({ success: true, voice });
  });

  app.delete("/v1/audio/voices/:name", async (c) => {
    const name = c.req.param("name");
    const shown = name.length > MAX_VOICE_NAME_CHARS ? "Voice" : `Voice '${name}'`;
    if (!(await voices.delete(name))) throw new ApiError(404, `${shown} not found`, "name");
    return c.json({ success: true, name, message: `${shown} deleted` });
  });
}

/** An uploaded clip, decoded and checked (1–30 s), stored under `name`: the upload route's and ElevenLabs' voices/add. */
export async function saveAudioUpload(
  { voices, logger }: Pick<VoiceRouteDeps, "voices" | "logger">,
  upload: { name: string; consent: string; refText?: string; speakerDescription?: string; file: UploadFile; mimeType: string },
): Promise<StoredVoice> {
  const { samples, sampleRateHz } = await decodeReferenceAudio(upload.file.bytes, "audio_sample");
  const voice = await voices.saveAudio({
    name: upload.name,
    consent: upload.consent,
    mimeType: upload.mimeType,
    fileSizeBytes: upload.file.bytes.byteLength,
    samples,
    sampleRateHz,
    refText: upload.refText,
    speakerDescription: upload.speakerDescription,
  });
  logger.info("voice uploaded", { bytes: upload.file.bytes.byteLength, seconds: samples.length / sampleRateHz, created_at: voice.created_at });
  return voice;
}

interface UploadForm {
  fields: Map<string, string>;
  files: Map<string, UploadFile>;
}

/**
 * Parses multipart/form-data as it streams in. The byte count is checked on every chunk: a body past the
 * cap is cut off as soon as the cap is crossed (the rest is never read), and a declared Content-Length
 * past the cap is refused before reading anything. A streaming parser is used rather than
 * Request.formData() because Bun's replaces each file part's Content-Type with a guess from its file name.
 */
export async function readCappedForm(c: Context, limits: BodyLimits): Promise<UploadForm> {
  const capBytes = limits.maxBytes;
  const contentType = c.req.header("content-type") ?? "";
  if (!/^multipart\/form-data\b/i.test(contentType)) {
    throw new ApiError(415, `Content-Type must be multipart/form-data (got '${contentType || "none"}')`, "content-type");
  }
  const tooLarge = () => badRequest(`Upload is larger than ${MAX_UPLOAD_AUDIO_BYTES} bytes (10 MB)`, "audio_sample");
  if (Number(c.req.header("content-length") ?? "0") > capBytes) throw tooLarge();
  const body = c.req.raw.body;
  if (!body) throw badRequest("Upload body is empty", "audio_sample");
  let overCap = false;
  const capped = guardedBody(body, limits, () => {
    overCap = true;
    return tooLarge();
  });
  const form: UploadForm = { fields: new Map(), files: new Map() };
  try {
    const request = new Request("http://upload.invalid/", { method: "POST", headers: { "content-type": contentType }, body: capped, duplex: "half" } as RequestInit);
    for await (const part of parseMultipartRequest(request, { maxFileSize: MAX_UPLOAD_AUDIO_BYTES, maxTotalSize: capBytes, maxParts: MAX_FORM_PARTS })) {
      if (!part.name) continue;
      // The first file of a name is the one used (ElevenLabs' voices/add may send several `files`).
      if (part.isFile) {
        if (!form.files.has(part.name)) form.files.set(part.name, { filename: part.filename ?? "", contentType: part.headers["content-type"] ?? "", bytes: part.bytes });
      } else form.fields.set(part.name, part.text);
    }
  } catch (error) {
    if (overCap || error instanceof MaxFileSizeExceededError || error instanceof MaxTotalSizeExceededError) throw tooLarge();
    if (error instanceof ApiError) throw error;
    throw badRequest(`Malformed multipart body: ${(error as Error).message}`, null);
  }
  return form;
}
