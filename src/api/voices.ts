/**
 * The only definition of the voice upload form (POST /v1/audio/voices, ../docs/api.md "Voices"): the text
 * fields, exactly one of `audio_sample` or `speaker_embedding`, and what each may hold. What depends on the
 * model (which embedding sizes it takes) or needs decoding (the audio's length) is checked by the route.
 */
import { z } from "zod";
import { badRequest } from "./errors.ts";
import { MAX_REF_TEXT_CHARS, MAX_VOICE_NAME_CHARS } from "./speech.ts";

/** An id of a consent recording: a UUID is 36 characters, a URL to the recording rarely past 200. */
export const MAX_CONSENT_CHARS = 256;
/** A sentence or two describing the speaker, twice the default cap on `instructions`. */
export const MAX_SPEAKER_DESCRIPTION_CHARS = 1000;
export const MAX_EMBEDDING_LENGTH = 4096;

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

export const INVALID_VOICE_NAME_MESSAGE = "Invalid voice name: it must be non-empty, not '.' or '..', and contain no '/', '\\' or NUL";

/** A trimmed name the voice store can use: it becomes part of a file name, so it must not act as a path. */
export function isValidVoiceName(name: string): boolean {
  return name !== "" && name !== "." && name !== ".." && !/[/\\\0]/.test(name);
}

export interface UploadFile {
  filename: string;
  /** The part's own Content-Type header, parameters included (browsers send e.g. audio/webm;codecs=opus). */
  contentType: string;
  bytes: Uint8Array;
}

/** A text field trimmed, whitespace only counting as absent; longer than `maxChars` is refused, naming the field. */
function trimmedText(field: string, maxChars: number) {
  return z
    .string()
    .optional()
    .transform((value) => value?.trim() || undefined)
    .pipe(z.string().max(maxChars, { error: (issue) => `${field} must be at most ${maxChars} characters (got ${(issue.input as string).length})` }).optional());
}

const speakerEmbeddingSchema = z
  .string()
  .transform((text, context): unknown => {
    try {
      return JSON.parse(text);
    } catch (error) {
      context.issues.push({ code: "custom", input: text, message: `speaker_embedding must be valid JSON: ${(error as Error).message}` });
      return z.NEVER;
    }
  })
  .pipe(
    z
      .array(z.unknown(), { error: "speaker_embedding must be a non-empty JSON list of numbers" })
      .min(1, "speaker_embedding must be a non-empty JSON list of numbers")
      .max(MAX_EMBEDDING_LENGTH, `speaker_embedding has more than ${MAX_EMBEDDING_LENGTH} values`)
      .refine((values) => values.every((value) => typeof value === "number"), "speaker_embedding must contain only numbers")
      // JSON cannot carry NaN or Infinity, but 1e999 parses to Infinity.
      .refine((values) => values.every((value) => Number.isFinite(value)), "speaker_embedding values must be finite (no NaN or Infinity)")
      .transform((values) => Float32Array.from(values as number[]))
      .refine((embedding) => embedding.every((value) => Number.isFinite(value)), "speaker_embedding values must fit in float32"),
  );

/** The part's own type when it is specific; for application/octet-stream, a guess from the extension. */
function uploadMimeType(file: UploadFile): string {
  const declared = file.contentType.split(";")[0]!.trim().toLowerCase();
  if (declared !== "" && declared !== "application/octet-stream") return declared;
  const extension = file.filename.toLowerCase().split(".").at(-1) ?? "";
  return MIME_BY_EXTENSION[extension] ?? "audio/wav";
}

/**
 * The form's parts: text fields by name, and `audio_sample` when it came as a file. Fields are checked in
 * form order; which of audio_sample and speaker_embedding is present, and then that one's content, only
 * once the text fields are good.
 */
export const voiceUploadSchema = z
  .object({
    // Required fields become "" when absent, so their rule is what refuses them (zod lets an absent key pass
    // when its schema accepts undefined).
    name: trimmedText("name", MAX_VOICE_NAME_CHARS)
      .transform((name) => name ?? "")
      .refine(isValidVoiceName, INVALID_VOICE_NAME_MESSAGE),
    consent: trimmedText("consent", MAX_CONSENT_CHARS)
      .transform((consent) => consent ?? "")
      .refine((consent) => consent !== "", "consent is required: the id of the speaker's consent recording"),
    ref_text: trimmedText("ref_text", MAX_REF_TEXT_CHARS),
    speaker_description: trimmedText("speaker_description", MAX_SPEAKER_DESCRIPTION_CHARS),
    audio_sample: z.custom<UploadFile>().optional(),
    speaker_embedding: z.string().optional(),
  })
  .check((context) => {
    const hasAudio = context.value.audio_sample !== undefined;
    if (hasAudio === (context.value.speaker_embedding !== undefined)) {
      context.issues.push({ code: "custom", input: context.value, path: [hasAudio ? "speaker_embedding" : "audio_sample"], message: "send exactly one of audio_sample (a file) or speaker_embedding (a JSON array)" });
    }
  })
  .transform(({ name, consent, ref_text: refText, speaker_description: speakerDescription, audio_sample: audio, speaker_embedding: embeddingText }, context) => {
    const fields = { name, consent, refText, speakerDescription };
    if (embeddingText !== undefined) {
      const embedding = speakerEmbeddingSchema.safeParse(embeddingText);
      if (embedding.success) return { ...fields, source: { kind: "embedding" as const, embedding: embedding.data } };
      context.issues.push({ code: "custom", input: embeddingText, path: ["speaker_embedding"], message: embedding.error.issues[0]!.message });
      return z.NEVER;
    }
    const mimeType = uploadMimeType(audio!);
    if ((ALLOWED_UPLOAD_MIME_TYPES as readonly string[]).includes(mimeType)) return { ...fields, source: { kind: "audio" as const, file: audio!, mimeType } };
    context.issues.push({ code: "custom", input: audio, path: ["audio_sample"], message: `Unsupported MIME type ${mimeType}; allowed: ${ALLOWED_UPLOAD_MIME_TYPES.join(", ")}` });
    return z.NEVER;
  });
export type VoiceUpload = z.output<typeof voiceUploadSchema>;

/** The upload, or a 400 with the first broken rule's message, naming its field. */
export function parseVoiceUpload(parts: Record<string, string | UploadFile | undefined>): VoiceUpload {
  const parsed = voiceUploadSchema.safeParse(parts);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw badRequest(issue.message, issue.path.map(String).join(".") || null);
}
