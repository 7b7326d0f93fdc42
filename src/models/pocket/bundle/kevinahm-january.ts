/** KevinAHM's January layout (docs/pocket-tts.md §3.2): no `bundle.json`, the v1 model. */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { pickGraph, readBosBeforeVoice, requireGraphs } from "./files.ts";
import { bundleFromGraphInputs } from "./graph-input-bundle.ts";
import { BundleError, type LoadBundleOptions, type PocketBundle } from "./pocket-bundle.ts";

const BOS_BEFORE_VOICE_FILE = "bos_before_voice.npy";

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
