/** GET/POST/DELETE /v1/audio/voices: vLLM-Omni's upload semantics over the persistent voice store. */
import type { Context, Hono } from "hono";
import { ApiError, badRequest } from "../api/errors.ts";
import { MAX_REF_TEXT_CHARS, MAX_VOICE_NAME_CHARS } from "../api/speech.ts";
import type { SpeechService } from "../speech/service.ts";
import { decodeReferenceAudio } from "../voices/ref-audio.ts";
import { validateVoiceName, type VoiceStore } from "../voices/store.ts";
import { guardedBody, type BodyLimits } from "./request-body.ts";
import type { Logger } from "../log/logger.ts";
import { MaxFileSizeExceededError, MaxTotalSizeExceededError, parseMultipartRequest } from "@remix-run/multipart-parser";

export const MAX_UPLOAD_AUDIO_BYTES = 10 * 1024 * 1024;
/** Room for the other form fields (a 4096-number embedding is ~100 KB of JSON) and multipart framing. */
const FORM_OVERHEAD_BYTES = 256 * 1024;
const MAX_EMBEDDING_LENGTH = 4096;
const MAX_FORM_PARTS = 16;
/** An id of a consent recording: a UUID is 36 characters, a URL to the recording rarely past 200. */
const MAX_CONSENT_CHARS = 256;
/** A sentence or two describing the speaker, twice the default cap on `instructions`. */
const MAX_SPEAKER_DESCRIPTION_CHARS = 1000;

export const ALLOWED_UPLOAD_MIME_TYPES = ["audio/wav", "audio/x-wav", "audio/mpeg", "audio/flac", "audio/ogg", "audio/webm", "audio/mp4", "audio/aac"] as const;
const MIME_BY_EXTENSION: Record<string, string> = {
  wav: "audio/wav",
  mp3: "audio/mpeg",
  mpeg: "audio/mpeg",
  flac: "audio/flac",
  ogg: "audio/ogg",
  oga: "audio/ogg",
  opus: "audio/ogg",
  aac: "audio/aac",
  webm: "audio/webm",
  mp4: "audio/mp4",
  m4a: "audio/mp4",
};

export interface VoiceRouteDeps {
  service: SpeechService;
  voices: VoiceStore;
  logger: Logger;
  /** The whole upload must arrive within this long. */
  bodyTimeoutMs: number;
}

export function registerVoiceRoutes(app: Hono, { service, voices, logger, bodyTimeoutMs }: VoiceRouteDeps): void {
  app.get("/v1/audio/voices", (c) => {
    const builtIn = service.model().capabilities.voices;
    const uploaded = voices.list();
    return c.json({ voices: [...builtIn, ...uploaded.map((voice) => voice.name)], uploaded_voices: uploaded });
  });

  app.post("/v1/audio/voices", async (c) => {
    const form = await readCappedForm(c, { maxBytes: MAX_UPLOAD_AUDIO_BYTES + FORM_OVERHEAD_BYTES, timeoutMs: bodyTimeoutMs });
    const name = validateVoiceName(checkedLength(form, "name", MAX_VOICE_NAME_CHARS) ?? "");
    const consent = checkedLength(form, "consent", MAX_CONSENT_CHARS);
    if (!consent) throw badRequest("consent is required: the id of the speaker's consent recording", "consent");
    const refText = checkedLength(form, "ref_text", MAX_REF_TEXT_CHARS);
    const speakerDescription = checkedLength(form, "speaker_description", MAX_SPEAKER_DESCRIPTION_CHARS);
    const audio = form.files.get("audio_sample");
    const embeddingText = form.fields.get("speaker_embedding");
    const hasAudio = audio !== undefined;
    if (hasAudio === (embeddingText !== undefined)) {
      throw badRequest("send exactly one of audio_sample (a file) or speaker_embedding (a JSON array)", hasAudio ? "speaker_embedding" : "audio_sample");
    }

    if (embeddingText !== undefined) {
      const embedding = parseEmbedding(embeddingText);
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

    if (!audio) throw badRequest("audio_sample must be a file upload", "audio_sample");
    const mimeType = uploadMimeType(audio);
    const { samples, sampleRateHz } = await decodeReferenceAudio(audio.bytes, "audio_sample");
    const voice = await voices.saveAudio({
      name,
      consent,
      mimeType,
      fileSizeBytes: audio.bytes.byteLength,
      samples,
      sampleRateHz,
      refText,
      speakerDescription,
    });
    logger.info("voice uploaded", { bytes: audio.bytes.byteLength, seconds: samples.length / sampleRateHz, created_at: voice.created_at });
    return c.json({ success: true, voice });
  });

  app.delete("/v1/audio/voices/:name", async (c) => {
    const name = c.req.param("name");
    if (!(await voices.delete(name))) throw new ApiError(404, name.length > MAX_VOICE_NAME_CHARS ? "Voice not found" : `Voice '${name}' not found`, "name");
    return c.json({ success: true, name });
  });
}

/** A text field trimmed (whitespace only = absent), or 400 naming it when longer than `maxChars`. */
function checkedLength(form: UploadForm, field: string, maxChars: number): string | undefined {
  const value = form.fields.get(field)?.trim();
  if (value !== undefined && value.length > maxChars) throw badRequest(`${field} must be at most ${maxChars} characters (got ${value.length})`, field);
  return value || undefined;
}

/** The part's own type when it is specific; for application/octet-stream, a guess from the extension. */
function uploadMimeType(file: UploadFile): string {
  let mimeType = file.contentType.split(";")[0]!.trim().toLowerCase();
  if (mimeType === "" || mimeType === "application/octet-stream") {
    const extension = file.filename.toLowerCase().split(".").at(-1) ?? "";
    mimeType = MIME_BY_EXTENSION[extension] ?? "audio/wav";
  }
  if (!(ALLOWED_UPLOAD_MIME_TYPES as readonly string[]).includes(mimeType)) {
    throw badRequest(`Unsupported MIME type ${mimeType}; allowed: ${ALLOWED_UPLOAD_MIME_TYPES.join(", ")}`, "audio_sample");
  }
  return mimeType;
}

function parseEmbedding(text: string): Float32Array {
  let values: unknown;
  try {
    values = JSON.parse(text);
  } catch (error) {
    throw badRequest(`speaker_embedding must be valid JSON: ${(error as Error).message}`, "speaker_embedding");
  }
  if (!Array.isArray(values) || values.length === 0) throw badRequest("speaker_embedding must be a non-empty JSON list of numbers", "speaker_embedding");
  if (values.length > MAX_EMBEDDING_LENGTH) throw badRequest(`speaker_embedding has more than ${MAX_EMBEDDING_LENGTH} values`, "speaker_embedding");
  if (!values.every((value) => typeof value === "number")) throw badRequest("speaker_embedding must contain only numbers", "speaker_embedding");
  // JSON cannot carry NaN or Infinity, but 1e999 parses to Infinity.
  if (!values.every((value) => Number.isFinite(value))) throw badRequest("speaker_embedding values must be finite (no NaN or Infinity)", "speaker_embedding");
  const embedding = Float32Array.from(values as number[]);
  if (!embedding.every((value) => Number.isFinite(value))) throw badRequest("speaker_embedding values must fit in float32", "speaker_embedding");
  return embedding;
}

interface UploadFile {
  filename: string;
  /** The part's own Content-Type header, parameters included (browsers send e.g. audio/webm;codecs=opus). */
  contentType: string;
  bytes: Uint8Array;
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
async function readCappedForm(c: Context, limits: BodyLimits): Promise<UploadForm> {
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
      if (part.isFile) form.files.set(part.name, { filename: part.filename ?? "", contentType: part.headers["content-type"] ?? "", bytes: part.bytes });
      else form.fields.set(part.name, part.text);
    }
  } catch (error) {
    if (overCap || error instanceof MaxFileSizeExceededError || error instanceof MaxTotalSizeExceededError) throw tooLarge();
    if (error instanceof ApiError) throw error;
    throw badRequest(`Malformed multipart body: ${(error as Error).message}`, null);
  }
  return form;
}
