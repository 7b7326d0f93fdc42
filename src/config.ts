/**
 * One schema for every setting. Each option has a flag and an environment variable; flags override the
 * environment, the environment overrides defaults. `voxedge --help` prints this table.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { availableParallelism, homedir } from "node:os";
import { containerMemoryLimitBytes } from "./system/memory-limit.ts";
import { join, sep } from "node:path";
import { z } from "zod";
import { DEFAULT_MAX_INPUT_CHARS, MAX_INPUT_CHARS_LIMIT } from "./api/speech.ts";
import { voiceAliasTableText } from "./api/voice-aliases.ts";

const commaList = z
  .string()
  .transform((text) => text.split(",").map((item) => item.trim()).filter((item) => item.length > 0));

const booleanText = z.union([z.boolean(), z.enum(["true", "false", "1", "0"]).transform((text) => text === "true" || text === "1")]);

/** A repeated flag arrives as a list; one flag or the environment variable may hold several, comma-separated. */
const keyList = z
  .union([z.array(z.string()), z.string()])
  .transform((given) => (Array.isArray(given) ? given : [given]).flatMap((text) => text.split(",")).map((key) => key.trim()).filter((key) => key.length > 0))
  // An empty value is a secret that did not arrive (an unset variable in a template): serving without auth then would be silent.
  .refine((keys) => keys.length > 0, "holds no key; leave it unset to serve without API keys");

interface OptionSpec {
  flag: string;
  env: string;
  schema: z.ZodType;
  description: string;
  secret?: boolean;
  /** A switch: `--flag` alone means true; `--flag=false` (or `--flag false`) turns it off. */
  switch?: boolean;
  /** The flag may be given more than once. */
  repeatable?: boolean;
  /** The default in words, where its value depends on the machine (its cores, a container's limit). */
  defaultText?: string;
}

/**
 * Streams the engine runs at once by default: what two cores keep ahead of their listeners from the first
 * frame with the real-size Pocket model (bench/load.ts, docs/benchmarks.md: 8 streams never underrun a 200 ms jitter
 * buffer; 16 run ahead of real time once started, but 16 starting together underrun it in their first
 * second or so). A queue of four times that absorbs a burst of arrivals, each waiting a few seconds,
 * instead of refusing it.
 */
export const DEFAULT_MAX_STREAMS = 8;
/**
 * Mimi decoder workers by default: one per core, at most four. The decoder is the costliest stage once
 * FlowLM steps are batched (bench/mimi-frames.ts: ~5 ms a frame at 4+ frames per call, flat beyond, so
 * more rows per call do not help), and each stream decodes on one worker: on two cores a second worker
 * took 8 streams from 14.6 to 21.6 audio seconds per wall second (bench/load.ts, CHANGELOG.md). Each worker
 * costs ~150 MB resident at full size (its runtime and decoder session), so a container limited to
 * SMALL_HOST_BYTES or less gets one.
 */
const SMALL_HOST_BYTES = 2 * 1024 ** 3;

const MEMORY_UNITS: Record<string, number> = { "": 1, b: 1, k: 1e3, kb: 1e3, kib: 1024, m: 1e6, mb: 1e6, mib: 1024 ** 2, g: 1e9, gb: 1e9, gib: 1024 ** 3 };
/** "900MiB", "1GiB", "1e9", "none" → bytes, or null for no budget. */
const memoryBudgetText = z.union([
  z.number().positive().nullable(),
  z.string().transform((text, context) => {
    const trimmed = text.trim().toLowerCase();
    if (trimmed === "none" || trimmed === "0") return null;
    const match = /^(\d+(?:\.\d+)?(?:e\d+)?)\s*([a-z]*)$/.exec(trimmed);
    const unit = match ? MEMORY_UNITS[match[2]!] : undefined;
    if (!match || unit === undefined) {
      context.addIssue({ code: "custom", message: `'${text}' is not a size (e.g. 900MiB, 1GiB, 1000000000, none)` });
      return z.NEVER;
    }
    return Math.round(Number(match[1]) * unit);
  }),
]);
export const DEFAULT_DECODER_WORKERS = defaultDecoderWorkers(containerMemoryLimitBytes());

export function defaultDecoderWorkers(memoryLimitBytes: number | undefined): number {
  if (memoryLimitBytes !== undefined && memoryLimitBytes <= SMALL_HOST_BYTES) return 1;
  return Math.max(1, Math.min(4, availableParallelism()));
}
export const DEFAULT_MAX_QUEUE = 32;
/**
 * A listener who is told "try again" at once can go to another replica; one kept waiting cannot. Two
 * seconds: a voice assistant's reply that starts later than that is already a bad one.
 */
export const DEFAULT_MAX_QUEUE_WAIT_SECONDS = 2;
/**
 * How long a stream may take to its first audio when it starts beside others (a lone request always may
 * start): a listener waits a second for a voice assistant's answer, not more.
 */
export const DEFAULT_FIRST_AUDIO_BUDGET_SECONDS = 1;

const OPTIONS = {
  host: { flag: "host", env: "VOXEDGE_HOST", schema: z.string().min(1).default("0.0.0.0"), description: "address to listen on" },
  port: { flag: "port", env: "VOXEDGE_PORT", schema: z.coerce.number().int().min(0).max(65535).default(8000), description: "TCP port (0 = any free port)" },
  wyomingPort: {
    flag: "wyoming-port",
    env: "VOXEDGE_WYOMING_PORT",
    schema: z.coerce.number().int().min(0).max(65535).optional(),
    description: "also serve the Wyoming protocol (Home Assistant's Assist) on this TCP port of --wyoming-host; 10200 is the customary one (unset = off; no authentication: a trusted network only)",
  },
  wyomingHost: {
    flag: "wyoming-host",
    env: "VOXEDGE_WYOMING_HOST",
    schema: z.string().min(1).optional(),
    description: "address the Wyoming listener binds to; the protocol has no authentication, so with API keys set it binds to loopback unless this names another address (a warning is logged when it listens beyond loopback)",
    defaultText: "127.0.0.1 when API keys are set, else --host",
  },
  wyomingUploadedVoices: {
    flag: "wyoming-uploaded-voices",
    env: "VOXEDGE_WYOMING_UPLOADED_VOICES",
    schema: booleanText.optional(),
    description: "list and speak uploaded (cloned) voices over Wyoming, to anyone who reaches its port; the model's own voices are always served",
    defaultText: "false when API keys are set (the HTTP API asks a key for them), else true",
    switch: true,
  },
  wyomingZeroconf: {
    flag: "wyoming-zeroconf",
    env: "VOXEDGE_WYOMING_ZEROCONF",
    schema: booleanText.default(false),
    description: "announce the Wyoming listener over zeroconf (mDNS, _wyoming._tcp) so Home Assistant discovers it; where multicast is unavailable a warning is logged and serving goes on",
    switch: true,
  },
  lexicon: {
    flag: "lexicon",
    env: "VOXEDGE_LEXICON",
    schema: z.string().min(1).optional(),
    description: "pronunciation lexicon applied to every request before normalization: a W3C PLS file of <alias> rules, or a tab-separated file of written and spoken forms (case-insensitive whole words)",
  },
  readMarkdown: {
    flag: "read-markdown",
    env: "VOXEDGE_READ_MARKDOWN",
    schema: booleanText.default(true),
    description: "read markdown as a person would on every route (headings, list items and table rows as sentences, emphasis and links as their words, code blocks skipped); false speaks the text's symbols as sent",
  },
  codeBlockPlaceholder: {
    flag: "code-block-placeholder",
    env: "VOXEDGE_CODE_BLOCK_PLACEHOLDER",
    schema: z.string().max(200).default("Code omitted."),
    description: "what is said in place of a fenced code block when markdown is read (empty: nothing)",
  },
  emoji: {
    flag: "emoji",
    env: "VOXEDGE_EMOJI",
    schema: z.enum(["drop", "name"]).default("drop"),
    description: "emoji when markdown is read: dropped, or said by their English names (\"thumbs up\")",
  },
  engine: {
    flag: "engine",
    env: "VOXEDGE_ENGINE",
    schema: z.enum(["auto", "pocket", "classic"]).default("auto"),
    description: "speech engine: auto serves Pocket TTS when --model is set or a pulled bundle is cached, else the offline classic engine",
  },
  model: { flag: "model", env: "VOXEDGE_MODEL", schema: z.string().min(1).optional(), description: "Pocket TTS bundle folder (KevinAHM bundle.json, January, or sherpa-onnx layout)" },
  modelCacheDir: {
    flag: "model-cache-dir",
    env: "VOXEDGE_MODEL_CACHE_DIR",
    schema: z.string().min(1).default(join(homedir(), ".cache", "voxedge", "models")),
    description: "where `models pull` stores bundles",
  },
  graphCacheDir: {
    flag: "graph-cache-dir",
    env: "VOXEDGE_GRAPH_CACHE_DIR",
    schema: z.string().min(1).default(join(homedir(), ".cache", "voxedge", "graphs")),
    description: "where the graphs rewritten from a bundle at load time are kept, so later starts load them as files (a folder that cannot be written: they are made in memory at every start)",
  },
  hubUrl: { flag: "hub-url", env: "VOXEDGE_HUB_URL", schema: z.url().default("https://huggingface.co"), description: "model hub that `models pull` downloads from" },
  device: {
    flag: "device",
    env: "VOXEDGE_DEVICE",
    schema: z.enum(["auto", "gpu", "cpu"]).default("auto"),
    description: "compute device for neural stages: auto uses a WebGPU device only when it is a real GPU, gpu any adapter (software included), cpu never",
  },
  decoder: {
    flag: "decoder",
    env: "VOXEDGE_DECODER",
    schema: z.enum(["auto", "wgsl", "onnx"]).default("auto"),
    description: "Pocket TTS Mimi decoder: wgsl (our WebGPU kernels) or onnx (the bundle's graph through onnxruntime, on the language model's device); auto picks wgsl on a GPU the device policy allows",
  },
  decoderWorkers: {
    flag: "decoder-workers",
    env: "VOXEDGE_DECODER_WORKERS",
    schema: z.coerce.number().int().min(1).max(64).default(DEFAULT_DECODER_WORKERS),
    description: "Mimi decoder worker threads on the CPU (onnxruntime-node); each stream decodes on one, so several streams decode at once on different cores",
    defaultText: "one per core, at most 4; 1 in a container limited to 2 GiB or less",
  },
  encoderThreads: {
    flag: "encoder-threads",
    env: "VOXEDGE_ENCODER_THREADS",
    schema: z.coerce.number().int().min(1).max(16).default(1),
    description: "worker threads that encode the responses (files, their speed change, and every stream's encoder), so no encode holds the event loop; a stream stays on one, a file goes to the least loaded",
  },
  speakerDir: {
    flag: "speaker-dir",
    env: "SPEAKER_SAMPLES_DIR",
    schema: z.string().min(1).default(join(homedir(), ".cache", "voxedge", "speakers")),
    description: "folder where uploaded voices are stored",
  },
  voiceStore: {
    flag: "voice-store",
    env: "VOXEDGE_VOICE_STORE",
    schema: z.string().min(1).optional(),
    description: "where uploaded voices are kept: s3://BUCKET/PREFIX for a bucket shared by replicas (credentials and endpoint from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL), or a folder",
    defaultText: "the speaker folder (--speaker-dir)",
  },
  maxUploadedVoices: { flag: "max-uploaded-voices", env: "SPEAKER_MAX_UPLOADED", schema: z.coerce.number().int().min(0).default(1000), description: "cap on uploaded voices" },
  maxInputChars: {
    flag: "max-input-chars",
    env: "VOXEDGE_MAX_INPUT_CHARS",
    schema: z.coerce.number().int().min(1).max(MAX_INPUT_CHARS_LIMIT).default(DEFAULT_MAX_INPUT_CHARS),
    description: `longest accepted input text, in characters (one request, one batch item, one WebSocket segment); up to ${MAX_INPUT_CHARS_LIMIT} for long-form text, which streams as it is made`,
  },
  maxInstructionsChars: { flag: "max-instructions-chars", env: "VOXEDGE_MAX_INSTRUCTIONS_CHARS", schema: z.coerce.number().int().min(0).default(500), description: "longest accepted instructions text" },
  batchMaxItems: { flag: "batch-max-items", env: "VOXEDGE_BATCH_MAX_ITEMS", schema: z.coerce.number().int().min(1).default(32), description: "most items in one batch request" },
  batchMaxAudioSeconds: {
    flag: "batch-max-audio-seconds",
    env: "VOXEDGE_BATCH_MAX_AUDIO_SECONDS",
    schema: z.coerce.number().positive().default(600),
    description: "most seconds of audio one batch request may produce; items past it fail",
  },
  maxBodyBytes: { flag: "max-body-bytes", env: "VOXEDGE_MAX_BODY_BYTES", schema: z.coerce.number().int().min(1024).default(16 * 1024 * 1024), description: "largest JSON request body" },
  allowedLocalMediaPath: { flag: "allowed-local-media-path", env: "VOXEDGE_ALLOWED_LOCAL_MEDIA_PATH", schema: z.string().optional(), description: "folder that file:// ref_audio may read from (unset = file:// refused)" },
  allowedMediaDomains: { flag: "allowed-media-domains", env: "VOXEDGE_ALLOWED_MEDIA_DOMAINS", schema: commaList.default([]), description: "comma-separated hosts that ref_audio URLs may fetch from, and no others (exact names; a listed host may resolve to a private or loopback address); empty = any host whose addresses are all public" },
  modelAliases: {
    flag: "model-aliases",
    env: "VOXEDGE_MODEL_ALIASES",
    schema: commaList.default([]),
    description: "comma-separated model names accepted as aliases of the served model, beside the speech models the openai SDK names (tts-1, tts-1-hd, gpt-4o-mini-tts and its dated snapshots), which are always accepted",
  },
  voiceAliases: {
    flag: "voice-aliases",
    env: "VOXEDGE_VOICE_ALIASES",
    schema: voiceAliasTableText.default({}),
    description: "voices that names or ids speak with, as alloy=<voice>,21m00Tcm4TlvDq8ikWAM=<voice>,narrator=<voice> (case-insensitive); OpenAI's voice names and ElevenLabs' premade voice ids and names left out speak with the model's default voice; a name the model or an upload has keeps its own",
  },
  apiKeys: {
    flag: "api-key",
    env: "VOXEDGE_API_KEY",
    schema: keyList.default([]),
    description: "API keys clients must send (Authorization: Bearer <key>, X-API-Key: <key> or xi-api-key: <key>); repeat the flag or comma-separate for several (key rotation, one per client); none = no auth",
    secret: true,
    repeatable: true,
  },
  apiKeyFile: {
    flag: "api-key-file",
    env: "VOXEDGE_API_KEY_FILE",
    schema: z.string().min(1).optional(),
    description: "file of API keys, one per line (blank lines and # comments ignored), read at start and added to --api-key's (a mounted secret)",
  },
  publicListings: {
    flag: "public-listings",
    env: "VOXEDGE_PUBLIC_LISTINGS",
    schema: booleanText.default(false),
    description: "with API keys set, GET /v1/models, /v1/audio/models and /v1/audio/voices also answer without one (uploaded voices without consent ids or transcripts), for clients such as Open WebUI that call them without credentials",
    switch: true,
  },
  protectHealth: {
    flag: "protect-health",
    env: "VOXEDGE_PROTECT_HEALTH",
    schema: booleanText.default(false),
    description: "with API keys set, /health and /health/ready require one too (default: open, for probes that send no credentials)",
    switch: true,
  },
  protectMetrics: {
    flag: "protect-metrics",
    env: "VOXEDGE_PROTECT_METRICS",
    schema: booleanText.default(false),
    description: "with API keys set, /metrics requires one too (Prometheus sends it with `authorization: {credentials: <key>}`)",
    switch: true,
  },
  shutdownGraceSeconds: {
    flag: "shutdown-grace",
    env: "VOXEDGE_SHUTDOWN_GRACE",
    schema: z.coerce.number().min(0).max(3600).default(25),
    description: "seconds active streams and WebSocket utterances may take to finish after SIGTERM/SIGINT (readiness is 503 and new work is refused meanwhile); then they are ended and the process exits 0. Keep it below the orchestrator's kill timeout",
  },
  wsConfigTimeoutSeconds: { flag: "ws-config-timeout", env: "VOXEDGE_WS_CONFIG_TIMEOUT", schema: z.coerce.number().positive().default(10), description: "seconds a WebSocket client has to send session.config" },
  wsIdleTimeoutSeconds: { flag: "ws-idle-timeout", env: "VOXEDGE_WS_IDLE_TIMEOUT", schema: z.coerce.number().positive().default(30), description: "seconds without a client message (and no work pending) before a WebSocket closes" },
  wsMaxQueuedSegments: {
    flag: "ws-max-queued-segments",
    env: "VOXEDGE_WS_MAX_QUEUED_SEGMENTS",
    schema: z.coerce.number().int().min(1).default(1000),
    description: "most segments (and utterance ends, each a session.done still to send) a WebSocket session may have waiting; beyond it: error and close 1008",
  },
  wsMaxQueuedChars: {
    flag: "ws-max-queued-chars",
    env: "VOXEDGE_WS_MAX_QUEUED_CHARS",
    // At least the unsegmented text a session may hold (--max-input-chars, checked in loadConfig), so one full input can always wait its turn.
    schema: z.coerce.number().int().min(DEFAULT_MAX_INPUT_CHARS).default(1_000_000),
    description: "most characters of text a WebSocket session may have waiting to be spoken; beyond it: error and close 1008",
  },
  bodyTimeoutSeconds: {
    flag: "body-timeout",
    env: "VOXEDGE_BODY_TIMEOUT",
    schema: z.coerce.number().positive().default(30),
    description: "seconds a request body may take to arrive in full (else 408)",
  },
  keepAliveTimeoutSeconds: {
    flag: "keep-alive-timeout",
    env: "VOXEDGE_KEEP_ALIVE_TIMEOUT",
    // Bun takes whole seconds up to 255.
    schema: z.coerce.number().int().min(1).max(255).default(75),
    description: "seconds an idle connection (keep-alive, or headers not yet complete) stays open; a request in progress is never cut by it",
  },
  streamStallTimeoutSeconds: {
    flag: "stream-stall-timeout",
    env: "VOXEDGE_STREAM_STALL_TIMEOUT",
    // The server sees a client's reads only when the kernel's send buffer drains by a burst (up to ~1.9 MB
    // measured on Linux): at the slowest real-time rate (8 kHz pcm16, 16 kB/s) that takes ~120 s, so a
    // player reading in real time is never taken for stalled.
    schema: z.coerce.number().positive().default(180),
    description: "seconds a streaming client (raw, SSE, batch, WebSocket) may go without taking audio while audio waits for it; then the stream is aborted and its state freed",
  },
  maxStreams: {
    flag: "max-streams",
    env: "VOXEDGE_MAX_STREAMS",
    schema: z.coerce.number().int().min(1).max(1024).default(DEFAULT_MAX_STREAMS),
    description: "requests the engine runs at once (each HTTP stream, file, batch item or WebSocket sentence being spoken); more wait in the queue",
  },
  memoryBudget: {
    flag: "memory-budget",
    env: "VOXEDGE_MEMORY_BUDGET",
    schema: memoryBudgetText.default(containerMemoryLimitBytes() ?? null),
    description: "resident memory the server plans within (bytes, or with a unit: 900MiB, 1GiB; none = no budget); a request that would take the server past 90 % of it waits in the queue or gets a 429, never an out-of-memory kill. Default: the container's memory limit (cgroup) when it has one",
    defaultText: "the container's memory limit (cgroup v2 memory.max or v1 memory.limit_in_bytes), else none",
  },
  maxQueue: {
    flag: "max-queue",
    env: "VOXEDGE_MAX_QUEUE",
    schema: z.coerce.number().int().min(0).max(100_000).default(DEFAULT_MAX_QUEUE),
    description: "requests that may wait for a running place; past it requests are refused with 429 and Retry-After (batch items wait instead)",
  },
  maxQueueWait: {
    flag: "max-queue-wait",
    env: "VOXEDGE_MAX_QUEUE_WAIT",
    schema: z.coerce.number().min(0).max(3600).default(DEFAULT_MAX_QUEUE_WAIT_SECONDS),
    description: "seconds a request may wait for a running place: one that would wait longer (by the places the engine runs in real time and how long its requests run) is refused at once with 429 and Retry-After, and one still waiting after it is refused then; 0 never queues. Batch items wait however long",
  },
  firstAudioBudget: {
    flag: "first-audio-budget",
    env: "VOXEDGE_FIRST_AUDIO_BUDGET",
    schema: z.coerce.number().positive().max(3600).default(DEFAULT_FIRST_AUDIO_BUDGET_SECONDS),
    description: "seconds a stream starting beside others may take to its first audio, by the engine's measured starts (Pocket): one that would take longer is refused at once with 429 and Retry-After; a request with none other starting always starts",
  },
  logLevel: { flag: "log-level", env: "VOXEDGE_LOG_LEVEL", schema: z.enum(["debug", "info", "warn", "error"]).default("info"), description: "log verbosity" },
  cors: { flag: "cors", env: "VOXEDGE_CORS", schema: booleanText.default(true), description: "allow cross-origin browser requests", switch: true },
} satisfies Record<string, OptionSpec>;

type OptionName = keyof typeof OPTIONS;
export type Config = { [K in OptionName]: z.output<(typeof OPTIONS)[K]["schema"]> };

export class ConfigError extends Error {}

/** The Wyoming listener as the options and API keys make it. */
export interface WyomingExposure {
  host: string;
  /** Uploaded voices are listed in `info` and spoken. */
  uploadedVoices: boolean;
  /** It listens beyond loopback while API keys guard the HTTP API: Wyoming has no authentication, so this is worth a warning. */
  unauthenticatedBeyondLoopback: boolean;
}

/**
 * Wyoming has no authentication. Without API keys the HTTP API is open too, and the listener stays where it
 * always was (--host, uploads served). With keys, what it serves would bypass them: it binds to loopback and
 * keeps uploads off unless an option explicitly says otherwise.
 */
export function wyomingExposure(config: Pick<Config, "host" | "wyomingHost" | "wyomingUploadedVoices" | "apiKeys">): WyomingExposure {
  const keysSet = config.apiKeys.length > 0;
  const host = config.wyomingHost ?? (keysSet ? LOOPBACK_HOST : config.host);
  return { host, uploadedVoices: config.wyomingUploadedVoices ?? !keysSet, unauthenticatedBeyondLoopback: keysSet && !isLoopbackHost(host) };
}

const LOOPBACK_HOST = "127.0.0.1";

/** 127.0.0.0/8, ::1 (and its IPv4-mapped form), localhost: addresses no other machine reaches. */
export function isLoopbackHost(host: string): boolean {
  const address = host.trim().toLowerCase().replace(/^\[(.*)\]$/, "$1");
  if (address === "localhost" || address === "::1" || address === "0:0:0:0:0:0:0:1") return true;
  const ipv4 = address.replace(/^::ffff:/, "");
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(ipv4);
}

/** Flags and environment → validated config. Throws ConfigError naming the bad option. */
export function loadConfig(flags: Record<string, string | string[] | boolean | undefined>, env: Record<string, string | undefined>): Config {
  const resolved: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(OPTIONS) as [OptionName, OptionSpec][]) {
    const raw = flags[spec.flag] ?? env[spec.env];
    const parsed = spec.schema.safeParse(raw);
    if (!parsed.success) {
      const source = flags[spec.flag] !== undefined ? `--${spec.flag}` : spec.env;
      throw new ConfigError(`invalid ${source}: ${parsed.error.issues.map((issue) => issue.message).join("; ")}`);
    }
    resolved[name] = parsed.data;
  }
  const config = resolved as Config;
  if (config.apiKeyFile !== undefined) config.apiKeys = [...new Set([...config.apiKeys, ...readApiKeyFile(config.apiKeyFile, flags["api-key-file"] !== undefined ? "--api-key-file" : "VOXEDGE_API_KEY_FILE")])];
  if (config.wyomingZeroconf && config.wyomingPort === undefined) {
    throw new ConfigError("invalid --wyoming-zeroconf: it announces the Wyoming listener, which --wyoming-port (VOXEDGE_WYOMING_PORT) turns on; set it too");
  }
  for (const [name, given] of [["wyoming-host", config.wyomingHost], ["wyoming-uploaded-voices", config.wyomingUploadedVoices]] as const) {
    if (given !== undefined && config.wyomingPort === undefined) throw new ConfigError(`invalid --${name}: it configures the Wyoming listener, which --wyoming-port (VOXEDGE_WYOMING_PORT) turns on; set it too`);
  }
  if (config.wsMaxQueuedChars < config.maxInputChars) {
    throw new ConfigError(`invalid --ws-max-queued-chars: ${config.wsMaxQueuedChars} is less than --max-input-chars (${config.maxInputChars}); a WebSocket session must be able to hold one full input`);
  }
  return config;
}

/** One key per line; `#` starts a comment line. A missing or unreadable file stops the start, naming it. */
function readApiKeyFile(path: string, source: string): string[] {
  let text: string;
  try {
    text = readFileSync(path, "utf-8");
  } catch (error) {
    throw new ConfigError(`invalid ${source}: cannot read ${path} (${(error as { code?: string }).code ?? String(error)})`);
  }
  const keys = text.split(/\r?\n/).map((line) => line.trim()).filter((line) => line.length > 0 && !line.startsWith("#"));
  if (keys.length === 0) throw new ConfigError(`invalid ${source}: ${path} holds no key (one per line; # starts a comment)`);
  return keys;
}

/** parseArgs options for every config flag (each takes a value; switches get theirs from expandSwitches). */
export function configFlagOptions(): Record<string, { type: "string"; multiple?: boolean }> {
  return Object.fromEntries((Object.values(OPTIONS) as OptionSpec[]).map((spec) => [spec.flag, { type: "string" as const, ...(spec.repeatable ? { multiple: true } : {}) }]));
}

const SWITCH_VALUES = new Set(["true", "false", "1", "0"]);

/** `--public-listings` alone reads as `--public-listings=true`; followed by true/false/1/0 it takes that value. */
function expandSwitches(argv: string[]): string[] {
  const switches = new Set([...(Object.values(OPTIONS) as OptionSpec[]), ...(Object.values(COMMAND_OPTIONS) as CommandOptionSpec[])].filter((spec) => spec.switch).map((spec) => `--${spec.flag}`));
  return argv.map((arg, index) => (switches.has(arg) && !SWITCH_VALUES.has(argv[index + 1] ?? "") ? `${arg}=true` : arg));
}

interface CommandOptionSpec {
  flag: string;
  short?: string;
  /** The commands that read it. */
  commands: readonly string[];
  description: string;
  /** `--flag` alone means true. */
  switch?: boolean;
}

/** Options of one command each: not configuration, so no environment variable. */
const COMMAND_OPTIONS = {
  output: { flag: "output", short: "o", commands: ["say"], description: "file to write; its extension picks the format unless --format is given (else wav)" },
  voice: { flag: "voice", commands: ["say"], description: "voice to speak with (else the model's default voice)" },
  format: { flag: "format", commands: ["say"], description: "wav, pcm, mp3, flac, opus or aac" },
  speed: { flag: "speed", commands: ["say"], description: "speaking rate, 0.25 to 4, pitch kept" },
  seed: { flag: "seed", commands: ["say"], description: "int64 seed: the same seed and text give the same bytes" },
  language: { flag: "language", commands: ["models pull", "normalize"], description: "models pull: the bundle's language (else the catalog entry's default, english); normalize: the text's language as a BCP 47 tag (else en)" },
  precision: { flag: "precision", commands: ["models pull"], description: "int8 or fp32 graphs (else the catalog entry's default, int8)" },
  from: { flag: "from", commands: ["models pull", "voices copy"], description: "models pull: an s3://BUCKET/PREFIX mirror of the model cache to read the bundle from instead of the hub; voices copy: the store to copy from (a speaker folder, vLLM-Omni's included, or s3://BUCKET/PREFIX)" },
  to: { flag: "to", commands: ["voices copy"], description: "the store to copy into (a folder or s3://BUCKET/PREFIX)" },
  decoder: { flag: "decoder", commands: ["conformance"], description: "onnx (default) or wgsl: the Mimi decoder the golden cases run through" },
  batch: { flag: "batch", commands: ["conformance"], description: "1 to 256: each golden stream runs inside model calls of that many streams" },
  provider: { flag: "provider", commands: ["conformance"], description: "auto, onnxruntime-node, onnxruntime-web or webgpu (the language-model graphs on the WebGPU EP; the default with --device gpu)" },
  ssml: { flag: "ssml", commands: ["normalize"], switch: true, description: "read the whole input as the speech routes do: a <speak> document or text with break tags, printed part by part with each pause as <break time=\"…ms\"/>" },
  browser: { flag: "browser", commands: ["conformance"], switch: true, description: "run the golden cases inside headless Chromium, through the page's engine worker (onnxruntime-web's wasm EP, or its WebGPU EP with --provider webgpu)" },
} satisfies Record<string, CommandOptionSpec>;

function commandFlagOptions(): { [Name in keyof typeof COMMAND_OPTIONS]: { type: "string"; short?: string } } {
  return Object.fromEntries(
    Object.entries(COMMAND_OPTIONS).map(([name, spec]: [string, CommandOptionSpec]) => [name, { type: "string" as const, ...(spec.short ? { short: spec.short } : {}) }]),
  ) as { [Name in keyof typeof COMMAND_OPTIONS]: { type: "string"; short?: string } };
}

export function parseCommandLine(argv: string[]) {
  return parseArgs({
    args: expandSwitches(argv),
    allowPositionals: true,
    strict: true,
    options: {
      ...configFlagOptions(),
      help: { type: "boolean", short: "h" },
      ...commandFlagOptions(),
    },
  });
}

/** One row of the option tables, as docs/configuration.md shows them. */
export interface OptionRow {
  flag: string;
  short?: string;
  /** Environment variable; none for a command's own options. */
  env?: string;
  /** The default as written on a command line, machine-independent (`~/.cache/…`, not one home folder)… */
  defaultValue?: string;
  /** …or in words: "unset", "empty", or one that depends on the machine. */
  defaultText?: string;
  description: string;
  commands?: readonly string[];
  switch?: boolean;
  repeatable?: boolean;
}

/** Every configuration option (flag, environment variable, default), in --help's order. */
export function configOptionRows(): OptionRow[] {
  const home = homedir();
  return (Object.values(OPTIONS) as OptionSpec[]).map((spec) => ({
    flag: spec.flag,
    env: spec.env,
    ...(spec.defaultText !== undefined ? { defaultText: spec.defaultText } : defaultOf(spec.schema, home)),
    description: spec.description,
    ...(spec.switch ? { switch: true } : {}),
    ...(spec.repeatable ? { repeatable: true } : {}),
  }));
}

/** The options of the commands other than serve. */
export function commandOptionRows(): OptionRow[] {
  return (Object.values(COMMAND_OPTIONS) as CommandOptionSpec[]).map((spec) => ({ flag: spec.flag, ...(spec.short ? { short: spec.short } : {}), commands: spec.commands, description: spec.description }));
}

function defaultOf(schema: z.ZodType, home: string): { defaultValue: string } | { defaultText: string } {
  const parsed = schema.safeParse(undefined);
  if (!parsed.success || parsed.data === undefined || parsed.data === null) return { defaultText: "unset" };
  const value: unknown = parsed.data;
  if (typeof value === "string") return { defaultValue: value.startsWith(home + sep) ? `~${value.slice(home.length)}` : value };
  if (typeof value === "object") return Object.keys(value as object).length === 0 ? { defaultText: "empty" } : { defaultValue: JSON.stringify(value) };
  return { defaultValue: String(value) };
}

/** The config as logged at start: secrets masked. */
export function describeConfig(config: Config): Record<string, unknown> {
  const shown: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(OPTIONS) as [OptionName, OptionSpec][]) {
    const value = config[name];
    shown[name] = spec.secret && value !== undefined ? (Array.isArray(value) ? value.map(() => "***") : "***") : value;
  }
  return shown;
}

export function configHelp(): string {
  const lines = ["Options (flag / environment variable / default):"];
  for (const spec of Object.values(OPTIONS) as OptionSpec[]) {
    const parsedDefault = spec.schema.safeParse(undefined);
    const shownDefault = parsedDefault.success && parsedDefault.data !== undefined ? JSON.stringify(parsedDefault.data) : "unset";
    lines.push(`  --${spec.flag.padEnd(26)} ${spec.env.padEnd(34)} ${spec.description} [default: ${spec.secret ? "unset" : shownDefault}]`);
  }
  return lines.join("\n");
}
