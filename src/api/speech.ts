/**
 * The only definition of a speech request (POST /v1/audio/speech, batch items, WebSocket session.config).
 * Field rules follow ../docs/api.md; limits that depend on configuration or on the model are checked by
 * the speech service, which knows both.
 */
import { z } from "zod";

/** `ulaw` and `alaw` are raw G.711 at 8 kHz, what telephony carries; the rest are OpenAI's. */
export const RESPONSE_FORMATS = ["wav", "pcm", "mp3", "flac", "opus", "aac", "ulaw", "alaw"] as const;
/** OpenAI's cap on input, and the default of --max-input-chars. */
export const DEFAULT_MAX_INPUT_CHARS = 4096;
/** Highest --max-input-chars: long-form text, which every model speaks chunk by chunk and a stream sends as it is made. */
export const MAX_INPUT_CHARS_LIMIT = 100_000;
/** Longest voice name, on upload and in requests: names are echoed in errors and listings. */
export const MAX_VOICE_NAME_CHARS = 128;
/** A transcript of at most 30 s of reference audio is a few hundred characters; OpenAI's input cap is ample. */
export const MAX_REF_TEXT_CHARS = DEFAULT_MAX_INPUT_CHARS;

/**
 * apply_text_normalization (ElevenLabs' name): whether written forms ("$19.99", "03/04/2026") are rewritten as
 * they are said before the model reads them. "auto" (the default, when absent) leaves it to the served model
 * (src/speech/text-normalization.ts says what each does).
 */
export const TEXT_NORMALIZATION_MODES = ["auto", "on", "off"] as const;
export type TextNormalizationMode = (typeof TEXT_NORMALIZATION_MODES)[number];

/** vLLM-Omni's Qwen3-TTS tasks. */
export const TASK_TYPES = ["CustomVoice", "VoiceDesign", "Base"] as const;
/** vLLM-Omni's bound on a speaker embedding's length (its largest model's is 2048). */
const MAX_SPEAKER_EMBEDDING_VALUES = 8192;

const voiceField = z
  .union([z.string(), z.strictObject({ id: z.string() })], {
    error: "voice must be a string or an object {\"id\": \"…\"}",
  })
  .refine((voice) => (typeof voice === "string" ? voice : voice.id).length <= MAX_VOICE_NAME_CHARS, `voice must be at most ${MAX_VOICE_NAME_CHARS} characters`);

type VoiceField = z.output<typeof voiceField>;

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const SEED_RULE = "seed must be an integer from -2^63 to 2^63 - 1";
/** An int64, as vLLM-Omni's; a bigint in the parsed request, since a double cannot hold every int64 (parseRequestJson). */
const seedField = z
  .union([z.number({ error: SEED_RULE }).int(SEED_RULE), z.bigint({ error: SEED_RULE })], { error: SEED_RULE })
  .transform((seed) => BigInt(seed))
  .refine((seed) => seed >= INT64_MIN && seed <= INT64_MAX, SEED_RULE);

function voiceId(voice: VoiceField): string {
  return typeof voice === "string" ? voice : voice.id;
}

const embeddingValues = z.array(z.number({ error: "speaker_embedding values must be finite numbers" }));
const speakerEmbeddingField = z
  .union([embeddingValues, z.array(embeddingValues.min(1, "speaker_embedding vectors must not be empty"))], { error: "speaker_embedding must be a list of numbers or a list of vectors" })
  .refine((embedding) => embedding.length <= MAX_SPEAKER_EMBEDDING_VALUES, `speaker_embedding must have at most ${MAX_SPEAKER_EMBEDDING_VALUES} entries`);

/**
 * An optional field: absent and `null` both mean "not set" (pydantic clients, vLLM-Omni's among them, send
 * null for every field they leave unset), so a parsed request holds only undefined for it.
 */
function optional<Schema extends z.ZodType>(schema: Schema) {
  return schema
    .nullish()
    .transform((value) => value ?? undefined)
    .optional();
}

/**
 * vLLM's SamplingParams fields that a TTS request may carry (clients written for vLLM send them at the top
 * level, and vLLM-Omni's request model drops what it does not use). `temperature` and `seed` are applied
 * (temperature as extra_params.temperature, when that is not set); the rest no model here reads, so they are
 * accepted with any value and named in X-Ignored-Fields. A field that is nobody's stays a 400.
 */
export const VLLM_SAMPLING_FIELDS = [
  "n",
  "best_of",
  "presence_penalty",
  "frequency_penalty",
  "repetition_penalty",
  "top_p",
  "top_k",
  "min_p",
  "stop",
  "stop_token_ids",
  "bad_words",
  "ignore_eos",
  "max_tokens",
  "min_tokens",
  "logprobs",
  "prompt_logprobs",
  "detokenize",
  "skip_special_tokens",
  "spaces_between_special_tokens",
  "include_stop_str_in_output",
  "truncate_prompt_tokens",
  "logit_bias",
  "allowed_token_ids",
  "guided_decoding",
  "structured_outputs",
  "extra_args",
  "output_kind",
  "length_penalty",
  "use_beam_search",
  "early_stopping",
] as const;

/** Fields shared by a single request, a batch item and batch-level defaults. */
export const speechFieldShape = {
  model: optional(z.string()),
  voice: optional(voiceField),
  instructions: optional(z.string()),
  response_format: optional(z.enum(RESPONSE_FORMATS, { error: `response_format must be one of ${RESPONSE_FORMATS.join(", ")}` })),
  sample_rate: optional(z.number({ error: "sample_rate must be an integer" }).int("sample_rate must be an integer").positive("sample_rate must be positive")),
  speed: optional(z.number({ error: "speed must be a number" }).min(0.25, "speed must be between 0.25 and 4.0").max(4, "speed must be between 0.25 and 4.0")),
  seed: optional(seedField),
  ref_audio: optional(z.string()),
  ref_text: optional(z.string().max(MAX_REF_TEXT_CHARS, `ref_text must be at most ${MAX_REF_TEXT_CHARS} characters`)),
  language: optional(z.string()),
  max_new_tokens: optional(z.number({ error: "max_new_tokens must be an integer" }).int("max_new_tokens must be an integer").min(1, "max_new_tokens must be ≥ 1")),
  extra_params: optional(z.record(z.string(), z.unknown(), { error: "extra_params must be a JSON object" })),
  word_timestamps: optional(z.boolean()),
  apply_text_normalization: optional(z.enum(TEXT_NORMALIZATION_MODES, { error: `apply_text_normalization must be one of ${TEXT_NORMALIZATION_MODES.join(", ")}` })),
  // vLLM-Omni's fields for the models it serves (Qwen3-TTS, MOSS-TTSD, MOSS-SoundEffect), with its types: a
  // client written for it sends them, and a model here that cannot use one ignores it (X-Ignored-Fields).
  speaker: optional(voiceField),
  task_type: optional(z.enum(TASK_TYPES, { error: `task_type must be one of ${TASK_TYPES.join(", ")}` })),
  x_vector_only_mode: optional(z.boolean({ error: "x_vector_only_mode must be a boolean" })),
  non_streaming_mode: optional(z.boolean({ error: "non_streaming_mode must be a boolean" })),
  initial_codec_chunk_frames: optional(z.number({ error: "initial_codec_chunk_frames must be an integer" }).int("initial_codec_chunk_frames must be an integer").min(0, "initial_codec_chunk_frames must be ≥ 0")),
  speaker_embedding: optional(speakerEmbeddingField),
  ref_audio_2: optional(z.string({ error: "ref_audio_2 must be a string" })),
  ambient_sound: optional(z.string({ error: "ambient_sound must be a string" })),
  duration_seconds: optional(z.number({ error: "duration_seconds must be a number" }).min(0, "duration_seconds must be ≥ 0")),
  references: optional(
    z
      .array(z.strictObject({ audio_path: z.string({ error: "references[].audio_path must be a string" }), text: optional(z.string().max(MAX_REF_TEXT_CHARS, `references[].text must be at most ${MAX_REF_TEXT_CHARS} characters`)) }), {
        error: "references must be a list of {audio_path, text}",
      })
      .min(1, "references must not be empty"),
  ),
  temperature: optional(z.number({ error: "temperature must be a number in 0..2" }).min(0, "temperature must be a number in 0..2").max(2, "temperature must be a number in 0..2")),
  ...vllmSamplingFieldShape(),
};

function vllmSamplingFieldShape(): Record<(typeof VLLM_SAMPLING_FIELDS)[number], ReturnType<typeof optional<z.ZodUnknown>>> {
  return Object.fromEntries(VLLM_SAMPLING_FIELDS.map((field) => [field, optional(z.unknown())])) as Record<(typeof VLLM_SAMPLING_FIELDS)[number], ReturnType<typeof optional<z.ZodUnknown>>>;
}

/** Fields of vLLM-Omni's schema that only its other models read: no model here uses them. */
export const OTHER_MODELS_FIELDS = ["task_type", "x_vector_only_mode", "non_streaming_mode", "initial_codec_chunk_frames", "speaker_embedding", "ref_audio_2", "ambient_sound", "duration_seconds"] as const;

/**
 * `speaker` is vLLM-Omni's other name for `voice`: the parsed request carries it as `voice`. Both naming
 * different voices is a 400 rather than a silent choice.
 */
function withSpeakerAlias<Schema extends z.ZodType<{ voice?: VoiceField; speaker?: VoiceField; ref_audio?: string; ref_text?: string; references?: { audio_path: string; text?: string }[] }>>(schema: Schema): Schema {
  return schema
    .superRefine(({ voice, speaker, ref_audio, ref_text, references }, context) => {
      if (voice !== undefined && speaker !== undefined && voiceId(voice).toLowerCase() !== voiceId(speaker).toLowerCase()) {
        context.addIssue({ code: "custom", path: ["speaker"], message: "speaker is another name for voice, and the two name different voices; send one of them" });
      }
      const reference = references?.[0];
      if (reference && ref_audio !== undefined && ref_audio !== reference.audio_path) {
        context.addIssue({ code: "custom", path: ["references"], message: "references[0].audio_path is another name for ref_audio, and the two differ; send one of them" });
      }
      if (reference?.text !== undefined && ref_text !== undefined && ref_text !== reference.text) {
        context.addIssue({ code: "custom", path: ["references"], message: "references[0].text is another name for ref_text, and the two differ; send one of them" });
      }
    })
    // vLLM-Omni's `references` ([{audio_path, text}]) is its list form of ref_audio/ref_text: the first
    // entry is the reference (a model here conditions on one clip); the parsed request carries it as those.
    .overwrite((request) => ({
      ...request,
      voice: request.voice ?? request.speaker,
      speaker: undefined,
      ref_audio: request.ref_audio ?? request.references?.[0]?.audio_path,
      ref_text: request.ref_text ?? request.references?.[0]?.text,
    }));
}

/** Its length cap is --max-input-chars, so the speech service checks it, the one place that knows the configuration. */
const inputField = z.string({ error: "input must be a string" }).refine((text) => text.trim().length > 0, "input must not be empty");

export const speechRequestSchema = withSpeakerAlias(
  z.strictObject({
    input: inputField,
    ...speechFieldShape,
    stream: optional(z.boolean()),
    stream_format: optional(z.enum(["sse", "audio"], { error: "stream_format must be sse or audio" })),
  }),
);
export type SpeechRequest = z.infer<typeof speechRequestSchema>;

export const batchItemSchema = withSpeakerAlias(z.strictObject({ input: inputField, ...speechFieldShape }));

/** Items stay loosely typed here: each is validated on its own so one bad item fails alone. */
export const batchRequestSchema = withSpeakerAlias(
  z.strictObject({
    ...speechFieldShape,
    items: z.array(z.unknown(), { error: "items must be an array" }).min(1, "items must not be empty"),
  }),
);
export type BatchRequest = z.infer<typeof batchRequestSchema>;

export const SPLIT_GRANULARITIES = ["none", "sentence", "clause"] as const;

/** WebSocket `session.config`: any speech field but `input`, plus the streaming options. */
/**
 * vLLM-Omni's WebSocket streaming modes: "sentence" (text is cut into sentences as it arrives; the default),
 * "token_level" (text arrives a token at a time: the same segmentation, which already waits for nothing but
 * a sentence's end) and "sentence_commit" (the client says where sentences end: text waits for input.commit,
 * which speaks it as one sentence).
 */
export const STREAMING_MODES = ["sentence", "token_level", "sentence_commit"] as const;
export type StreamingMode = (typeof STREAMING_MODES)[number];

export const streamSessionConfigSchema = withSpeakerAlias(
  z.strictObject({
    type: z.literal("session.config"),
    ...speechFieldShape,
    stream_audio: optional(z.boolean({ error: "stream_audio must be a boolean" })),
    split_granularity: optional(z.enum(SPLIT_GRANULARITIES, { error: `split_granularity must be one of ${SPLIT_GRANULARITIES.join(", ")}` })),
    streaming_mode: optional(z.enum(STREAMING_MODES, { error: `streaming_mode must be one of ${STREAMING_MODES.join(", ")}` })),
  }),
);
export type StreamSessionConfig = z.infer<typeof streamSessionConfigSchema>;

/** The message types a client may send; any other is answered with a non-fatal error. */
export const STREAM_CLIENT_MESSAGE_TYPES = ["session.config", "input.text", "input.commit", "input.done", "session.close"] as const;

export const streamClientMessageSchema = z.discriminatedUnion(
  "type",
  [
    streamSessionConfigSchema,
    z.strictObject({ type: z.literal("input.text"), text: z.string({ error: "text must be a string" }) }),
    z.strictObject({ type: z.literal("input.commit"), commit_id: optional(z.union([z.string(), z.number()], { error: "commit_id must be a string or a number" })) }),
    z.strictObject({ type: z.literal("input.done") }),
    z.strictObject({ type: z.literal("session.close") }),
  ],
  { error: `type must be one of ${STREAM_CLIENT_MESSAGE_TYPES.join(", ")}` },
);
export type StreamClientMessage = z.infer<typeof streamClientMessageSchema>;
