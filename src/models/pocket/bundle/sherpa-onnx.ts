/** sherpa-onnx's layout (docs/pocket-tts.md §3.4): no `bundle.json`, the v1 model's graphs renamed, a JSON tokenizer. */
import { join, resolve } from "node:path";
import { requireFile, requireGraphs } from "./files.ts";
import { bundleFromGraphInputs } from "./graph-input-bundle.ts";
import type { LoadBundleOptions, PocketBundle, TokenizerFiles } from "./pocket-bundle.ts";

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
