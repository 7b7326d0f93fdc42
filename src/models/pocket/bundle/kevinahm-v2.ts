/**
 * KevinAHM v2 (docs/pocket-tts.md §3.3): `bundle.json` names the model flags and both state manifests. The manifests are the
 * only source of state order: 24-layer FlowLM states are sorted lexicographically (§3.1, §6.11), so index
 * arithmetic would mis-map them.
 */
import { readFile } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import { z } from "zod";
import { findVoicesDirectory, readBosBeforeVoice, requireFile, requireGraphs } from "./files.ts";
import {
  BundleError,
  UPSTREAM_FRAME_RATE_HZ,
  UPSTREAM_LATENT_DIM,
  UPSTREAM_MAX_TOKENS_PER_CHUNK,
  UPSTREAM_SAMPLE_RATE_HZ,
  type LoadBundleOptions,
  type PocketBundle,
} from "./pocket-bundle.ts";
import { checkManifestOrder, describeFlowLmManifest, stateEntrySchema, toStateEntry } from "./state-manifest.ts";

export const BUNDLE_JSON = "bundle.json";

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
