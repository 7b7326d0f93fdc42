/**
 * What every layout's loader returns (docs/pocket-tts.md §3): one typed `PocketBundle`, whatever the folder
 * looks like, and the error a folder that is no bundle gives.
 */

export type BundleLayout = "kevinahm-v2" | "kevinahm-january" | "sherpa-onnx";
export type StateDtype = "float32" | "int64" | "bool";
/** How a state tensor starts (§3.3): `empty` is a zero-length tensor that must still be fed (§6.12). */
export type StateFill = "nan" | "zeros" | "ones" | "empty" | "mixed";

/** One entry of a state manifest: graph input `inputName` is fed back from output `outputName` (§3.1). */
export interface StateEntry {
  index: number;
  inputName: string;
  outputName: string;
  /** Upstream module path, e.g. `transformer.layers.10.self_attn` or `decoder.model.0`. */
  module: string;
  /** `cache` | `current_end` | `step` for FlowLM; `first` | `previous` | `partial` | `cache` | `offset` | `end_offset` for Mimi. */
  key: string;
  dtype: StateDtype;
  shape: readonly number[];
  fill: StateFill;
}

export type GraphPrecision = "fp32" | "int8";

export interface GraphFile {
  path: string;
  precision: GraphPrecision;
}

export interface PocketGraphs {
  /** token_ids int64 [1, n] → embeddings f32 [1, n, conditioningDim]. */
  textConditioner: GraphFile;
  /** audio f32 [1, 1, 1920·k] → voice conditioning f32 [1, k (+1 with a baked-in BOS), conditioningDim]. Absent: no cloning. */
  voiceEncoder: GraphFile | null;
  /** sequence f32 [1, s, latentDim] + text_embeddings f32 [1, n, conditioningDim] + states → conditioning [1, conditioningDim], eos_logit [1, 1]. */
  flowLmMain: GraphFile;
  /** c [B, conditioningDim], s [B, 1], t [B, 1], x [B, latentDim] → flow_dir [B, latentDim]. */
  flowLmFlow: GraphFile;
  /** latent f32 [1, n, latentDim] (normalised) + states → audio_frame f32 [1, 1, samplesPerFrame·n]. */
  mimiDecoder: GraphFile;
}

export type TokenizerFiles =
  | { format: "sentencepiece"; modelPath: string }
  /** sherpa-onnx ships no tokenizer.model, only {piece: id} and {piece: score} maps (§3.4). */
  | { format: "sherpa-json"; vocabPath: string; scoresPath: string };

export interface PocketDims {
  sampleRateHz: number;
  frameRateHz: number;
  /** 1920 at 24 kHz and 12.5 Hz (§1.1). */
  samplesPerFrame: number;
  /** FlowLM latent width, 32 (§1.1). */
  latentDim: number;
  /** FlowLM d_model: width of text and voice conditioning rows (1024 released, 64 in pocket-tiny). */
  conditioningDim: number;
  /** Positions of the static FlowLM KV cache (1000, §6.10): voice + text + generated frames must fit. */
  flowLmCachePositions: number;
  flowLmLayers: number;
}

/** Model flags that steer text preparation and the generation loop (§1.12, §1.13). */
export interface PocketModelFlags {
  padWithSpacesForShortInputs: boolean;
  removeSemicolons: boolean;
  /** Overrides the per-chunk "guess + 2" rule when set (8 for french_24l). */
  recommendedFramesAfterEos: number | null;
  maxTokensPerChunk: number;
  /** v2: a learned conditioning row goes before the voice tokens (§2.1 step 4). */
  insertBosBeforeVoice: boolean;
}

export interface PocketBundle {
  layout: BundleLayout;
  directory: string;
  name: string;
  language: string;
  graphs: PocketGraphs;
  tokenizer: TokenizerFiles;
  dims: PocketDims;
  flags: PocketModelFlags;
  flowLmStateManifest: readonly StateEntry[];
  mimiStateManifest: readonly StateEntry[];
  /** `flow_lm.bos_before_voice` [conditioningDim] when the model inserts it, else null. */
  bosBeforeVoice: Float32Array | null;
  predefinedVoices: readonly string[];
  /** A folder of `<voice>.safetensors` voice states shipped next to the graphs, if any. */
  voicesDirectory: string | null;
}

/** The bundles' language names (the catalog's, without a size suffix such as "_24l") as BCP 47 tags. */
const BUNDLE_LANGUAGE_TAGS: Readonly<Record<string, string>> = { english: "en", french: "fr", german: "de", italian: "it", portuguese: "pt", spanish: "es" };

/** A bundle's language ("english", "german_24l", or already a tag such as "en") as a BCP 47 tag; undefined when unknown. */
export function bundleLanguageTag(language: string): string | undefined {
  const name = language.trim().toLowerCase().split("_")[0]!;
  return BUNDLE_LANGUAGE_TAGS[name] ?? (/^[a-z]{2,3}(?:-[a-z0-9]+)*$/.test(name) ? name : undefined);
}

export interface LoadBundleOptions {
  /** Preferred graph precision; a graph that exists only in the other precision is used as is. Default fp32. */
  precision?: GraphPrecision;
}

export class BundleError extends Error {
  constructor(directory: string, reason: string) {
    super(`Pocket TTS bundle at ${directory}: ${reason}`);
    this.name = "BundleError";
  }
}

/** Upstream constants (§1.1), used where a layout does not state them. */
export const UPSTREAM_SAMPLE_RATE_HZ = 24_000;
export const UPSTREAM_FRAME_RATE_HZ = 12.5;
export const UPSTREAM_LATENT_DIM = 32;
export const UPSTREAM_MAX_TOKENS_PER_CHUNK = 50;
