/**
 * Loads a Pocket TTS ONNX bundle from a directory into one typed `PocketBundle`, whatever its layout
 * (docs/pocket-tts.md §3):
 *
 * - `kevinahm-v2` (§3.3): `bundle.json` names the model flags and both state manifests. The manifests are
 *   the only source of state order: 24-layer FlowLM states are sorted lexicographically (§3.1, §6.11), so
 *   index arithmetic would mis-map them.
 * - `kevinahm-january` (§3.2) and `sherpa-onnx` (§3.4): no `bundle.json`. Their states are rebuilt from the
 *   graphs' declared inputs (`flowLmManifestFromGraphInputs`, `mimiManifestFromGraphInputs`), and the flags
 *   take the v1 model's upstream values.
 *
 * Every loader returns the same `PocketBundle`; nothing here creates an onnxruntime session.
 */
import { existsSync, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import { z } from "zod";
import { readOnnxGraphInputs, type OnnxGraphInput } from "../../onnx/proto.ts";
import { parseNpyFloat32 } from "../../formats/npy.ts";

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

const BUNDLE_JSON = "bundle.json";
const BOS_BEFORE_VOICE_FILE = "bos_before_voice.npy";
const VOICE_FOLDER_NAMES = ["voices", "embeddings"] as const;

/** Upstream constants (§1.1), used where a layout does not state them. */
const UPSTREAM_SAMPLE_RATE_HZ = 24_000;
const UPSTREAM_FRAME_RATE_HZ = 12.5;
const UPSTREAM_LATENT_DIM = 32;
const UPSTREAM_MAX_TOKENS_PER_CHUNK = 50;

/** Finds the layout of `directory` and loads it. */
export async function loadPocketBundle(directory: string, options: LoadBundleOptions = {}): Promise<PocketBundle> {
  const root = resolve(directory);
  if (!existsSync(root) || !statSync(root).isDirectory()) throw new BundleError(root, "not a directory");
  if (existsSync(join(root, BUNDLE_JSON))) return loadKevinAhmV2Bundle(root, options);
  if (pickGraph(root, "lm_main", "sherpa-onnx", "fp32")) return loadSherpaOnnxBundle(root, options);
  if (pickGraph(root, "flow_lm_main", "kevinahm", "fp32") || pickGraph(join(root, "onnx"), "flow_lm_main", "kevinahm", "fp32")) {
    return loadKevinAhmJanuaryBundle(root, options);
  }
  throw new BundleError(root, `no ${BUNDLE_JSON}, flow_lm_main[_int8].onnx (also under onnx/) or lm_main[.int8].onnx`);
}

// ---------------------------------------------------------------------------------------------------
// KevinAHM v2 (§3.3)

const stateEntrySchema = z.object({
  index: z.number().int().nonnegative(),
  input_name: z.string().min(1),
  output_name: z.string().min(1),
  module: z.string().min(1),
  key: z.string().min(1),
  dtype: z.enum(["float32", "int64", "bool"]),
  shape: z.array(z.number().int().nonnegative()),
  fill: z.enum(["nan", "zeros", "ones", "empty", "mixed"]),
});

/**
 * The LM writer's schema (§3.3). Only the manifests are required: the other fields default to the
 * upstream values, since the published files are not all verified (§8).
 */
const bundleJsonSchema = z.object({
  schema_version: z.literal(2),
  bundle_name: z.string().optional(),
  language: z.string().optional(),
  sample_rate: z.number().int().positive().default(UPSTREAM_SAMPLE_RATE_HZ),
  frame_rate: z.number().positive().default(UPSTREAM_FRAME_RATE_HZ),
  samples_per_frame: z.number().int().positive().optional(),
  latent_dim: z.number().int().positive().default(UPSTREAM_LATENT_DIM),
  conditioning_dim: z.number().int().positive().optional(),
  pad_with_spaces_for_short_inputs: z.boolean().default(false),
  remove_semicolons: z.boolean().default(false),
  model_recommended_frames_after_eos: z.number().int().nonnegative().nullable().default(null),
  max_token_per_chunk: z.number().int().positive().default(UPSTREAM_MAX_TOKENS_PER_CHUNK),
  insert_bos_before_voice: z.boolean().default(false),
  tokenizer_file: z.string().default("tokenizer.model"),
  bos_before_voice_file: z.string().nullable().default(null),
  predefined_voices: z.array(z.string()).default([]),
  flow_lm_state_manifest: z.array(stateEntrySchema).min(1),
  mimi_state_manifest: z.array(stateEntrySchema).min(1),
});

export async function loadKevinAhmV2Bundle(directory: string, options: LoadBundleOptions = {}): Promise<PocketBundle> {
  const root = resolve(directory);
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(join(root, BUNDLE_JSON), "utf8"));
  } catch (error) {
    throw new BundleError(root, `${BUNDLE_JSON} is not readable JSON (${(error as Error).message})`);
  }
  const parsed = bundleJsonSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new BundleError(root, `${BUNDLE_JSON} field ${issue.path.join(".") || "(root)"}: ${issue.message}`);
  }
  const json = parsed.data;
  const flowLmStateManifest = json.flow_lm_state_manifest.map(toStateEntry);
  const mimiStateManifest = json.mimi_state_manifest.map(toStateEntry);
  checkManifestOrder(flowLmStateManifest, (reason) => new BundleError(root, `flow_lm_state_manifest: ${reason}`));
  checkManifestOrder(mimiStateManifest, (reason) => new BundleError(root, `mimi_state_manifest: ${reason}`));
  const flowLm = describeFlowLmManifest(root, flowLmStateManifest);

  const samplesPerFrame = json.samples_per_frame ?? json.sample_rate / json.frame_rate;
  if (samplesPerFrame * json.frame_rate !== json.sample_rate) {
    throw new BundleError(root, `samples_per_frame ${samplesPerFrame} × frame_rate ${json.frame_rate} ≠ sample_rate ${json.sample_rate}`);
  }
  const conditioningDim = json.conditioning_dim ?? flowLm.conditioningDim;

  let bosBeforeVoice: Float32Array | null = null;
  if (json.insert_bos_before_voice) {
    if (json.bos_before_voice_file === null) throw new BundleError(root, "insert_bos_before_voice is set but bos_before_voice_file is null");
    bosBeforeVoice = await readBosBeforeVoice(root, join(root, json.bos_before_voice_file), conditioningDim);
  }

  const precision = options.precision ?? "fp32";
  return {
    layout: "kevinahm-v2",
    directory: root,
    name: json.bundle_name ?? basename(root),
    language: json.language ?? "english",
    graphs: requireGraphs(root, root, "kevinahm", precision),
    tokenizer: { format: "sentencepiece", modelPath: requireFile(root, join(root, json.tokenizer_file)) },
    dims: {
      sampleRateHz: json.sample_rate,
      frameRateHz: json.frame_rate,
      samplesPerFrame,
      latentDim: json.latent_dim,
      conditioningDim,
      flowLmCachePositions: flowLm.cachePositions,
      flowLmLayers: flowLm.layers,
    },
    flags: {
      padWithSpacesForShortInputs: json.pad_with_spaces_for_short_inputs,
      removeSemicolons: json.remove_semicolons,
      recommendedFramesAfterEos: json.model_recommended_frames_after_eos,
      maxTokensPerChunk: json.max_token_per_chunk,
      insertBosBeforeVoice: json.insert_bos_before_voice,
    },
    flowLmStateManifest,
    mimiStateManifest,
    bosBeforeVoice,
    predefinedVoices: json.predefined_voices,
    voicesDirectory: findVoicesDirectory(root),
  };
}

/** Parameter `flow_lm.bos_before_voice`, stored as float32 [1, 1, d_model] (§3.3). */
async function readBosBeforeVoice(root: string, path: string, conditioningDim: number): Promise<Float32Array> {
  const npy = parseNpyFloat32(await readFile(requireFile(root, path)), path);
  if (npy.data.length !== conditioningDim) throw new BundleError(root, `${path} has shape [${npy.shape.join(", ")}], expected [1, 1, ${conditioningDim}]`);
  return npy.data;
}

function toStateEntry(entry: z.infer<typeof stateEntrySchema>): StateEntry {
  return {
    index: entry.index,
    inputName: entry.input_name,
    outputName: entry.output_name,
    module: entry.module,
    key: entry.key,
    dtype: entry.dtype,
    shape: entry.shape,
    fill: entry.fill,
  };
}

/** Manifests list the states in flatten order; each index must appear once so that none goes unfed (§6.12). */
function checkManifestOrder(manifest: readonly StateEntry[], fail: (reason: string) => Error): void {
  manifest.forEach((entry, position) => {
    if (entry.index !== position) throw fail(`entry ${position} has index ${entry.index}`);
  });
  const inputs = new Set(manifest.map((entry) => entry.inputName));
  if (inputs.size !== manifest.length) throw fail("an input name repeats");
}

/**
 * Parses a manifest in the `bundle.json` format from elsewhere, e.g. the `mimi_state_manifest` of a
 * fixture's golden.json, for a decoder graph that travels without a bundle.
 */
export function parseStateManifest(raw: unknown, source: string): StateEntry[] {
  const parsed = z.array(stateEntrySchema).min(1).safeParse(raw);
  if (!parsed.success) throw new Error(`${source}: not a state manifest (${parsed.error.issues[0]!.message} at ${parsed.error.issues[0]!.path.join(".")})`);
  const manifest = parsed.data.map(toStateEntry);
  checkManifestOrder(manifest, (reason) => new Error(`${source}: ${reason}`));
  return manifest;
}

/**
 * Reads the FlowLM geometry from its manifest: one `cache` f32 [2, 1, positions, heads, headDim] and one
 * `step` int64 [1] per layer (§3.1), keyed by module name, never by position.
 */
function describeFlowLmManifest(root: string, manifest: readonly StateEntry[]): { layers: number; cachePositions: number; conditioningDim: number } {
  const modules = new Map<string, Set<string>>();
  let cacheShape: readonly number[] | undefined;
  for (const entry of manifest) {
    const keys = modules.get(entry.module) ?? new Set<string>();
    keys.add(entry.key);
    modules.set(entry.module, keys);
    if (entry.key === "cache") {
      if (entry.dtype !== "float32" || entry.shape.length !== 5 || entry.shape[0] !== 2) {
        throw new BundleError(root, `FlowLM state ${entry.inputName} (${entry.module}/cache) is ${entry.dtype} [${entry.shape.join(", ")}], expected float32 [2, 1, T, H, D]`);
      }
      if (cacheShape && cacheShape.join() !== entry.shape.join()) throw new BundleError(root, "FlowLM cache shapes differ between layers");
      cacheShape = entry.shape;
    }
    if (entry.key === "step" && (entry.dtype !== "int64" || entry.shape.join() !== "1")) {
      throw new BundleError(root, `FlowLM state ${entry.inputName} (${entry.module}/step) must be int64 [1]`);
    }
  }
  for (const [module, keys] of modules) {
    if (!keys.has("cache") || !keys.has("step")) throw new BundleError(root, `FlowLM module ${module} lacks a cache or step state`);
  }
  const [, , positions, heads, headDim] = cacheShape!;
  return { layers: modules.size, cachePositions: positions!, conditioningDim: heads! * headDim! };
}

// ---------------------------------------------------------------------------------------------------
// January (§3.2) and sherpa-onnx (§3.4): no bundle.json, v1 model

/** The v1 model (`english_2026-01`) flags, upstream config `b6369a24` (§0, §1.12, §1.13). */
const V1_FLAGS: PocketModelFlags = Object.freeze({
  padWithSpacesForShortInputs: true,
  removeSemicolons: false,
  recommendedFramesAfterEos: null,
  maxTokensPerChunk: UPSTREAM_MAX_TOKENS_PER_CHUNK,
  insertBosBeforeVoice: false,
});

/**
 * The January HF repo keeps the graphs in `onnx/` and `tokenizer.model` at the root (§3.2); a copy of
 * `onnx/` with the tokenizer beside the graphs works as well. A `bos_before_voice.npy` beside the graphs
 * (a v2 folder without its bundle.json) turns the v2 voice BOS on.
 */
export async function loadKevinAhmJanuaryBundle(directory: string, options: LoadBundleOptions = {}): Promise<PocketBundle> {
  const root = resolve(directory);
  const graphDirectory = pickGraph(root, "flow_lm_main", "kevinahm", "fp32") ? root : join(root, "onnx");
  const graphs = requireGraphs(root, graphDirectory, "kevinahm", options.precision ?? "fp32");
  const tokenizerPath = [join(graphDirectory, "tokenizer.model"), join(root, "tokenizer.model")].find((path) => existsSync(path));
  if (!tokenizerPath) throw new BundleError(root, "no tokenizer.model beside the graphs or at the root");
  const bundle = await bundleFromGraphInputs(root, "kevinahm-january", graphs, { format: "sentencepiece", modelPath: tokenizerPath });
  const bosPath = join(graphDirectory, BOS_BEFORE_VOICE_FILE);
  if (!existsSync(bosPath)) return bundle;
  return {
    ...bundle,
    flags: { ...bundle.flags, padWithSpacesForShortInputs: false, insertBosBeforeVoice: true },
    bosBeforeVoice: await readBosBeforeVoice(root, bosPath, bundle.dims.conditioningDim),
  };
}

/** sherpa-onnx archives: renamed KX graphs of the v1 model and a JSON tokenizer (§3.4). */
export async function loadSherpaOnnxBundle(directory: string, options: LoadBundleOptions = {}): Promise<PocketBundle> {
  const root = resolve(directory);
  const graphs = requireGraphs(root, root, "sherpa-onnx", options.precision ?? "fp32");
  const tokenizer: TokenizerFiles = {
    format: "sherpa-json",
    vocabPath: requireFile(root, join(root, "vocab.json")),
    scoresPath: requireFile(root, join(root, "token_scores.json")),
  };
  return bundleFromGraphInputs(root, "sherpa-onnx", graphs, tokenizer);
}

async function bundleFromGraphInputs(root: string, layout: BundleLayout, graphs: PocketGraphs, tokenizer: TokenizerFiles): Promise<PocketBundle> {
  const [flowInputs, mimiInputs] = await Promise.all([readOnnxGraphInputs(graphs.flowLmMain.path), readOnnxGraphInputs(graphs.mimiDecoder.path)]);
  const flowLmStateManifest = flowLmManifestFromGraphInputs(root, flowInputs);
  const mimiStateManifest = mimiManifestFromGraphInputs(root, mimiInputs);
  const flowLm = describeFlowLmManifest(root, flowLmStateManifest);
  return {
    layout,
    directory: root,
    name: basename(root),
    language: "english",
    graphs,
    tokenizer,
    dims: {
      sampleRateHz: UPSTREAM_SAMPLE_RATE_HZ,
      frameRateHz: UPSTREAM_FRAME_RATE_HZ,
      samplesPerFrame: UPSTREAM_SAMPLE_RATE_HZ / UPSTREAM_FRAME_RATE_HZ,
      latentDim: UPSTREAM_LATENT_DIM,
      conditioningDim: flowLm.conditioningDim,
      flowLmCachePositions: flowLm.cachePositions,
      flowLmLayers: flowLm.layers,
    },
    flags: { ...V1_FLAGS },
    flowLmStateManifest,
    mimiStateManifest,
    bosBeforeVoice: null,
    predefinedVoices: [],
    voicesDirectory: findVoicesDirectory(root),
  };
}

/** Graph inputs `state_<k>` in index order; the outputs are `out_state_<k>` (§3.1). */
function stateInputs(root: string, graphName: string, inputs: readonly OnnxGraphInput[]): OnnxGraphInput[] {
  const states = inputs.filter((input) => /^state_\d+$/.test(input.name));
  states.sort((a, b) => Number(a.name.slice(6)) - Number(b.name.slice(6)));
  states.forEach((input, index) => {
    if (input.name !== `state_${index}`) throw new BundleError(root, `${graphName} state inputs are not numbered 0..${states.length - 1}`);
  });
  return states;
}

/**
 * Rebuilds the FlowLM manifest from the graph inputs. The exporter flattens the Python-`sorted` module
 * names `transformer.layers.<i>.self_attn`, each with keys cache < current_end < step (§3.1), so the
 * module of state k is the (k div 3)-th of the sorted names: lexicographic, 0, 1, 10, 11, … for 24 layers.
 * The cache starts as zeros, like KR1 and sherpa (identical to NaN, §3.1).
 */
function flowLmManifestFromGraphInputs(root: string, inputs: readonly OnnxGraphInput[]): StateEntry[] {
  const states = stateInputs(root, "flow_lm_main", inputs);
  const keys = ["cache", "current_end", "step"] as const;
  if (states.length === 0 || states.length % keys.length !== 0) throw new BundleError(root, `flow_lm_main has ${states.length} state inputs, not 3 per layer`);
  const modules = Array.from({ length: states.length / keys.length }, (_, layer) => `transformer.layers.${layer}.self_attn`).sort();
  return states.map((input, index) => {
    const key = keys[index % keys.length]!;
    const entry = stateEntryFromInput(root, input, index, modules[Math.floor(index / keys.length)]!, key);
    const expected: StateDtype = key === "step" ? "int64" : "float32";
    if (entry.dtype !== expected) throw new BundleError(root, `flow_lm_main ${input.name} is ${entry.dtype}, expected ${expected} for ${key}`);
    return entry;
  });
}

/**
 * The Mimi state paths in the exporter's flatten order (§3.1 table): the same 56 for v1 and v2 and for
 * every width, since only channel counts differ.
 */
const MIMI_STATE_PATHS: readonly string[] = [
  ...["decoder.model.0", "decoder.model.11"].flatMap((module) => [`${module}/first`, `${module}/previous`]),
  "decoder.model.2/partial",
  ...["decoder.model.3.block.1", "decoder.model.3.block.3"].flatMap((module) => [`${module}/first`, `${module}/previous`]),
  "decoder.model.5/partial",
  ...["decoder.model.6.block.1", "decoder.model.6.block.3"].flatMap((module) => [`${module}/first`, `${module}/previous`]),
  "decoder.model.8/partial",
  ...["decoder.model.9.block.1", "decoder.model.9.block.3"].flatMap((module) => [`${module}/first`, `${module}/previous`]),
  ...[0, 1].flatMap((layer) => ["cache", "end_offset", "offset"].map((key) => `decoder_transformer.transformer.layers.${layer}.self_attn/${key}`)),
  "downsample.conv/first",
  "downsample.conv/previous",
  ...["0", "1.block.1", "1.block.3", "11", "3", "4.block.1", "4.block.3", "6", "7.block.1", "7.block.3", "9"].flatMap((suffix) => [
    `encoder.model.${suffix}/first`,
    `encoder.model.${suffix}/previous`,
  ]),
  ...[0, 1].flatMap((layer) => ["cache", "end_offset", "offset"].map((key) => `encoder_transformer.transformer.layers.${layer}.self_attn/${key}`)),
  "upsample.convtr/partial",
];

const MIMI_KEY_DTYPES: Readonly<Record<string, StateDtype>> = {
  first: "bool",
  previous: "float32",
  partial: "float32",
  cache: "float32",
  end_offset: "int64",
  offset: "int64",
};

/** KX's fills (§3.1 table): `first` flags true, everything else zero; zero-length `previous` tensors are empty. */
function mimiManifestFromGraphInputs(root: string, inputs: readonly OnnxGraphInput[]): StateEntry[] {
  const states = stateInputs(root, "mimi_decoder", inputs);
  if (states.length !== MIMI_STATE_PATHS.length) throw new BundleError(root, `mimi_decoder has ${states.length} state inputs, expected ${MIMI_STATE_PATHS.length}`);
  return states.map((input, index) => {
    const [module, key] = MIMI_STATE_PATHS[index]!.split("/") as [string, string];
    const entry = stateEntryFromInput(root, input, index, module, key);
    if (entry.dtype !== MIMI_KEY_DTYPES[key]) throw new BundleError(root, `mimi_decoder ${input.name} is ${entry.dtype}, expected ${MIMI_KEY_DTYPES[key]} for ${module}/${key}`);
    return entry;
  });
}

function stateEntryFromInput(root: string, input: OnnxGraphInput, index: number, module: string, key: string): StateEntry {
  const dtype = ({ float: "float32", int64: "int64", bool: "bool" } as const)[input.elementType as "float" | "int64" | "bool"];
  if (!dtype) throw new BundleError(root, `state input ${input.name} has element type ${input.elementType}`);
  // States have static shapes in every KX-lineage export; a symbolic dim would make the fill ambiguous.
  const shape = input.dims.map((dim) => {
    if (typeof dim !== "number") throw new BundleError(root, `state input ${input.name} has a symbolic dimension '${dim}'`);
    return dim;
  });
  const elementCount = shape.reduce((product, dim) => product * dim, 1);
  const fill: StateFill = elementCount === 0 ? "empty" : key === "first" ? "ones" : "zeros";
  return { index, inputName: input.name, outputName: `out_${input.name}`, module, key, dtype, shape, fill };
}

// ---------------------------------------------------------------------------------------------------
// Files

type GraphNaming = "kevinahm" | "sherpa-onnx";
const GRAPH_STEMS: Readonly<Record<GraphNaming, Record<keyof PocketGraphs, string>>> = {
  kevinahm: { textConditioner: "text_conditioner", voiceEncoder: "mimi_encoder", flowLmMain: "flow_lm_main", flowLmFlow: "flow_lm_flow", mimiDecoder: "mimi_decoder" },
  // §3.4 renames.
  "sherpa-onnx": { textConditioner: "text_conditioner", voiceEncoder: "encoder", flowLmMain: "lm_main", flowLmFlow: "lm_flow", mimiDecoder: "decoder" },
};

function findGraph(directory: string, stem: string, naming: GraphNaming, precision: GraphPrecision): string | undefined {
  // KevinAHM writes `<stem>_int8.onnx`, sherpa `<stem>.int8.onnx` (§3.2, §3.4).
  const name = precision === "fp32" ? `${stem}.onnx` : naming === "kevinahm" ? `${stem}_int8.onnx` : `${stem}.int8.onnx`;
  const path = join(directory, name);
  return existsSync(path) ? path : undefined;
}

function pickGraph(directory: string, stem: string, naming: GraphNaming, preferred: GraphPrecision): GraphFile | null {
  const other: GraphPrecision = preferred === "fp32" ? "int8" : "fp32";
  for (const precision of [preferred, other]) {
    const path = findGraph(directory, stem, naming, precision);
    if (path) return { path, precision };
  }
  return null;
}

function requireGraphs(root: string, directory: string, naming: GraphNaming, precision: GraphPrecision): PocketGraphs {
  const stems = GRAPH_STEMS[naming];
  const required = (role: Exclude<keyof PocketGraphs, "voiceEncoder">): GraphFile => {
    const graph = pickGraph(directory, stems[role], naming, precision);
    if (!graph) throw new BundleError(root, `missing ${stems[role]}.onnx`);
    return graph;
  };
  return {
    textConditioner: required("textConditioner"),
    voiceEncoder: pickGraph(directory, stems.voiceEncoder, naming, precision),
    flowLmMain: required("flowLmMain"),
    flowLmFlow: required("flowLmFlow"),
    mimiDecoder: required("mimiDecoder"),
  };
}

function requireFile(root: string, path: string): string {
  if (!existsSync(path)) throw new BundleError(root, `missing ${path}`);
  return path;
}

function findVoicesDirectory(root: string): string | null {
  for (const name of VOICE_FOLDER_NAMES) {
    const path = join(root, name);
    if (existsSync(path) && statSync(path).isDirectory()) return path;
  }
  return null;
}

// ---------------------------------------------------------------------------------------------------
// File formats found in bundles: .npy (bos_before_voice) and safetensors with int64 (voice states)

