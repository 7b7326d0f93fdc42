/**
 * The only definition of ElevenLabs' text-to-speech requests as served under /elevenlabs (docs/api.md,
 * "ElevenLabs API"): the output formats, the JSON body and query of the text-to-speech routes, the model ids
 * its clients send, and its error shape. A field ElevenLabs' schema has and no model here can use is accepted
 * and named in X-Ignored-Fields, so a caller written against ElevenLabs works unchanged.
 */
import { z } from "zod";
import { ApiError, echoed } from "../api/errors.ts";
import { TEXT_NORMALIZATION_MODES, type RESPONSE_FORMATS } from "../api/speech.ts";

export { ELEVENLABS_PREFIX } from "../http/mounts.ts";

export interface ElevenLabsOutputFormat {
  responseFormat: (typeof RESPONSE_FORMATS)[number];
  sampleRateHz: number;
  bitrateKbps?: number;
}

/**
 * LAME, as lamejs builds it, codes mono below 64 kbps at 32 kHz at most (at 32 kbps 22.05 kHz), resampling a
 * 44.1 kHz input on its own, and its encoder cannot be told a rate. A format whose name says 44.1 kHz comes at
 * 44.1 kHz, so a bitrate below this one is coded at this one: the rate is what a client plays the audio at.
 */
const LOWEST_MP3_KBPS_AT_44100_HZ = 64;

/**
 * ElevenLabs' `output_format` names: codec, rate and (lossy codecs) bitrate. pcm is raw little-endian int16,
 * ulaw and alaw raw G.711, wav a RIFF file, mp3 CBR, opus Ogg Opus; all mono; each at the rate its name says.
 */
export const ELEVENLABS_OUTPUT_FORMATS: Readonly<Record<string, ElevenLabsOutputFormat>> = {
  mp3_22050_32: { responseFormat: "mp3", sampleRateHz: 22050, bitrateKbps: 32 },
  mp3_24000_48: { responseFormat: "mp3", sampleRateHz: 24000, bitrateKbps: 48 },
  ...Object.fromEntries([32, 64, 96, 128, 192].map((kbps) => [`mp3_44100_${kbps}`, { responseFormat: "mp3", sampleRateHz: 44100, bitrateKbps: Math.max(kbps, LOWEST_MP3_KBPS_AT_44100_HZ) }])),
  ...Object.fromEntries([32, 64, 96, 128, 192].map((kbps) => [`opus_48000_${kbps}`, { responseFormat: "opus", sampleRateHz: 48000, bitrateKbps: kbps }])),
  ...Object.fromEntries([8000, 16000, 22050, 24000, 44100, 48000].flatMap((rateHz) => ["pcm", "wav"].map((codec) => [`${codec}_${rateHz}`, { responseFormat: codec, sampleRateHz: rateHz }]))),
  ulaw_8000: { responseFormat: "ulaw", sampleRateHz: 8000 },
  alaw_8000: { responseFormat: "alaw", sampleRateHz: 8000 },
};
export const DEFAULT_ELEVENLABS_OUTPUT_FORMAT = "mp3_44100_128";

/**
 * ElevenLabs' model ids, which its clients send by default (Pipecat, LiveKit: eleven_flash_v2_5 or
 * eleven_turbo_v2_5): each is answered by the served model, as OpenAI's tts-1 is on the OpenAI route.
 */
export const ELEVENLABS_MODEL_IDS: readonly string[] = [
  "eleven_multilingual_v2",
  "eleven_flash_v2_5",
  "eleven_turbo_v2_5",
  "eleven_flash_v2",
  "eleven_turbo_v2",
  "eleven_v3",
  "eleven_multilingual_v1",
  "eleven_monolingual_v1",
];

/** An ElevenLabs error: `{"detail": {"status", "message"}}`, `status` a snake_case reason such as voice_not_found. */
export class ElevenLabsError extends ApiError {
  constructor(
    status: ApiError["status"],
    readonly reason: string,
    message: string,
    param: string | null = null,
  ) {
    super(status, message, param);
  }
}

/** The reason an error of ours gives in ElevenLabs' shape, by its status, when it names none itself. */
const REASONS_BY_STATUS: Record<number, string> = {
  400: "invalid_request",
  401: "invalid_api_key",
  404: "not_found",
  408: "request_timeout",
  413: "payload_too_large",
  415: "unsupported_media_type",
  422: "validation_error",
  429: "too_many_concurrent_requests",
  499: "client_closed_request",
  503: "service_unavailable",
  507: "insufficient_storage",
};

export function elevenLabsErrorBody(error: ApiError): { detail: { status: string; message: string } } {
  const reason = error instanceof ElevenLabsError ? error.reason : (REASONS_BY_STATUS[error.status] ?? "internal_server_error");
  return { detail: { status: reason, message: error.message } };
}

/** A request ElevenLabs' schema refuses: 422, as its FastAPI answers, naming the field. */
export function validationError(issue: z.core.$ZodIssue, pathPrefix: string): ElevenLabsError {
  const path = [pathPrefix, ...issue.path.map(String)].filter((part) => part.length > 0).join(".");
  if (issue.code === "unrecognized_keys") return new ElevenLabsError(422, "validation_error", `Unknown field '${echoed(issue.keys[0]!)}'`, path || null);
  return new ElevenLabsError(422, "validation_error", path ? `${path}: ${issue.message}` : issue.message, path || null);
}

export function parseElevenLabs<Schema extends z.ZodType>(schema: Schema, value: unknown, pathPrefix = ""): z.output<Schema> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw validationError(parsed.error.issues[0]!, pathPrefix);
  return parsed.data;
}

/** Absent and null both mean "not set" (ElevenLabs' Python SDK sends null for every unset field). */
function optional<Schema extends z.ZodType>(schema: Schema) {
  return schema
    .nullish()
    .transform((value) => value ?? undefined)
    .optional();
}

const unitInterval = (field: string) => z.number({ error: `${field} must be a number from 0 to 1` }).min(0, `${field} must be from 0 to 1`).max(1, `${field} must be from 0 to 1`);

/** As ElevenLabs defines them: `speed` is applied as OpenAI's `speed` is; no model here reads the others. */
export const voiceSettingsSchema = z.object({
  stability: optional(unitInterval("stability")),
  similarity_boost: optional(unitInterval("similarity_boost")),
  style: optional(unitInterval("style")),
  use_speaker_boost: optional(z.boolean({ error: "use_speaker_boost must be a boolean" })),
  speed: optional(z.number({ error: "speed must be a number" }).min(0.7, "speed must be from 0.7 to 1.2").max(1.2, "speed must be from 0.7 to 1.2")),
});

/** A pronunciation dictionary by id, at a version (its latest when absent). */
export const dictionaryLocatorSchema = z.object({
  pronunciation_dictionary_id: z.string({ error: "pronunciation_dictionary_id must be a string" }).min(1),
  version_id: optional(z.string({ error: "version_id must be a string" })),
});
export const dictionaryLocatorsSchema = z.array(dictionaryLocatorSchema, { error: "pronunciation_dictionary_locators must be a list of {pronunciation_dictionary_id, version_id}" });

/** A pronunciation rule: an alias replaces the written form; a phoneme rule is refused where it is applied. */
export const dictionaryRuleSchema = z.object({
  string_to_replace: z.string({ error: "string_to_replace must be a string" }).min(1, "string_to_replace must not be empty"),
  type: z.enum(["alias", "phoneme"], { error: "type must be alias or phoneme" }),
  alias: optional(z.string()),
  phoneme: optional(z.string()),
  alphabet: optional(z.string()),
  case_sensitive: optional(z.boolean()),
  word_boundaries: optional(z.boolean()),
});
export const addDictionaryFromRulesSchema = z.object({
  name: z.string({ error: "name must be a string" }).min(1, "name is required").max(200),
  rules: z.array(dictionaryRuleSchema, { error: "rules must be a list of rules" }).max(5_000),
  description: optional(z.string().max(1_000)),
  workspace_access: optional(z.string()),
});
export const dictionaryRulesChangeSchema = z.object({ rules: z.array(dictionaryRuleSchema).max(5_000) });
export const dictionaryRulesRemovalSchema = z.object({ rule_strings: z.array(z.string()).max(5_000) });

/** The body of POST /v1/text-to-speech/{voice_id} and its /stream and /with-timestamps variants. */
export const textToSpeechBodySchema = z.object({
  text: z.string({ error: "text must be a string" }).refine((text) => text.trim().length > 0, "text must not be empty"),
  model_id: optional(z.string({ error: "model_id must be a string" })),
  language_code: optional(z.string({ error: "language_code must be a string" })),
  voice_settings: optional(voiceSettingsSchema),
  pronunciation_dictionary_locators: optional(dictionaryLocatorsSchema),
  seed: optional(z.number({ error: "seed must be an integer from 0 to 4294967295" }).int("seed must be an integer from 0 to 4294967295").min(0, "seed must be from 0 to 4294967295").max(4294967295, "seed must be from 0 to 4294967295")),
  previous_text: optional(z.string({ error: "previous_text must be a string" })),
  next_text: optional(z.string({ error: "next_text must be a string" })),
  previous_request_ids: optional(z.array(z.string())),
  next_request_ids: optional(z.array(z.string())),
  use_pvc_as_ivc: optional(z.boolean()),
  apply_text_normalization: optional(z.enum(TEXT_NORMALIZATION_MODES, { error: `apply_text_normalization must be one of ${TEXT_NORMALIZATION_MODES.join(", ")}` })),
  apply_language_text_normalization: optional(z.boolean()),
  audio_effects: optional(z.unknown()),
});
export type TextToSpeechBody = z.infer<typeof textToSpeechBodySchema>;

/** Body fields that shape ElevenLabs' own models only; a request that sets them hears them named as ignored. */
export const IGNORED_BODY_FIELDS = [
  "previous_text",
  "next_text",
  "previous_request_ids",
  "next_request_ids",
  "use_pvc_as_ivc",
  "apply_language_text_normalization",
  "audio_effects",
] as const satisfies readonly (keyof TextToSpeechBody)[];

/** The voice settings no model here reads (all but speed), as `voice_settings.<name>` for X-Ignored-Fields. */
export function ignoredVoiceSettings(settings: VoiceSettings | undefined): string[] {
  if (settings === undefined) return [];
  return (Object.keys(settings) as (keyof VoiceSettings)[]).filter((name) => name !== "speed" && settings[name] !== undefined).map((name) => `voice_settings.${name}`);
}
export type VoiceSettings = z.infer<typeof voiceSettingsSchema>;

/** The query of the text-to-speech routes. An unknown output_format is a 400 naming it (see outputFormatOf). */
export const textToSpeechQuerySchema = z.object({
  output_format: optional(z.string()),
  enable_logging: optional(z.enum(["true", "false"], { error: "enable_logging must be true or false" })),
  optimize_streaming_latency: optional(z.string().regex(/^[0-4]$/, "optimize_streaming_latency must be 0 to 4")),
});

export function outputFormatOf(name: string | undefined): ElevenLabsOutputFormat {
  const chosen = name ?? DEFAULT_ELEVENLABS_OUTPUT_FORMAT;
  const format = Object.hasOwn(ELEVENLABS_OUTPUT_FORMATS, chosen) ? ELEVENLABS_OUTPUT_FORMATS[chosen] : undefined;
  if (!format) {
    throw new ElevenLabsError(400, "invalid_output_format", `output_format '${echoed(chosen)}' is not supported; supported: ${Object.keys(ELEVENLABS_OUTPUT_FORMATS).join(", ")}`, "output_format");
  }
  return format;
}

/** GET /v2/voices: ElevenLabs' page size bounds. */
export const MAX_VOICES_PAGE_SIZE = 100;
export const voicesPageQuerySchema = z.object({
  page_size: optional(z.coerce.number({ error: "page_size must be an integer" }).int("page_size must be an integer").min(1, "page_size must be from 1 to 100").max(MAX_VOICES_PAGE_SIZE, "page_size must be from 1 to 100")),
  next_page_token: optional(z.string().regex(/^\d+$/, "next_page_token must be a token from an earlier page")),
  search: optional(z.string()),
  voice_type: optional(z.string()),
  category: optional(z.string()),
  sort: optional(z.string()),
  sort_direction: optional(z.string()),
  include_total_count: optional(z.string()),
});
