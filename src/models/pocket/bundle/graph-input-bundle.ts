/**
 * A bundle without `bundle.json` (kevinahm-january, sherpa-onnx): the v1 model, whose flags take their
 * upstream values and whose state manifests are rebuilt from the graphs' declared inputs.
 */
import { basename } from "node:path";
import { readOnnxGraphInputs, type OnnxGraphInput } from "../../../onnx/proto.ts";
import { findVoicesDirectory } from "./files.ts";
import {
  BundleError,
  UPSTREAM_FRAME_RATE_HZ,
  UPSTREAM_LATENT_DIM,
  UPSTREAM_MAX_TOKENS_PER_CHUNK,
  UPSTREAM_SAMPLE_RATE_HZ,
  type BundleLayout,
  type PocketBundle,
  type PocketGraphs,
  type PocketModelFlags,
  type StateDtype,
  type StateEntry,
  type StateFill,
  type TokenizerFiles,
} from "./pocket-bundle.ts";
import { describeFlowLmManifest } from "./state-manifest.ts";

/** The v1 model (`english_2026-01`) flags, upstream config `b6369a24` (docs/pocket-tts.md §0, §1.12, §1.13). */
const V1_FLAGS: PocketModelFlags = Object.freeze({
  padWithSpacesForShortInputs: true,
  removeSemicolons: false,
  recommendedFramesAfterEos: null,
  maxTokensPerChunk: UPSTREAM_MAX_TOKENS_PER_CHUNK,
  insertBosBeforeVoice: false,
});

export async function bundleFromGraphInputs(root: string, layout: BundleLayout, graphs: PocketGraphs, tokenizer: TokenizerFiles): Promise<PocketBundle> {
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
