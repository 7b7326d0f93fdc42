/**
 * Loads a Pocket TTS ONNX bundle from a directory, whatever its layout (docs/pocket-tts.md §3), one file each:
 *
 * - `kevinahm-v2` (§3.3, kevinahm-v2.ts): `bundle.json` names the model flags and both state manifests.
 * - `kevinahm-january` (§3.2, kevinahm-january.ts) and `sherpa-onnx` (§3.4, sherpa-onnx.ts): no
 *   `bundle.json`; their states are rebuilt from the graphs' declared inputs (graph-input-bundle.ts).
 *
 * Every loader returns the same `PocketBundle`; nothing here creates an onnxruntime session.
 */
import { existsSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { pickGraph } from "./files.ts";
import { loadKevinAhmJanuaryBundle } from "./kevinahm-january.ts";
import { BUNDLE_JSON, loadKevinAhmV2Bundle } from "./kevinahm-v2.ts";
import { BundleError, type LoadBundleOptions, type PocketBundle } from "./pocket-bundle.ts";
import { loadSherpaOnnxBundle } from "./sherpa-onnx.ts";

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
