/**
 * Picks and loads the speech engine: Pocket TTS when a bundle is configured (`--model`) or was pulled into
 * the model cache, the offline classic engine otherwise (or when asked for by `--engine classic`).
 */
import type { Config } from "../config.ts";
import type { SpeechModelAdapter } from "./adapter.ts";
import { createClassicEngine } from "../models/classic/engine.ts";
import { findCachedBundle } from "../models/pocket/pull.ts";

export async function loadEngine(config: Config): Promise<SpeechModelAdapter> {
  if (config.engine === "classic") return createClassicEngine();
  const bundleDir = config.model ?? (config.engine === "auto" ? await findCachedBundle(config.modelCacheDir) : undefined);
  if (config.engine === "pocket" && !bundleDir) {
    throw new Error(`--engine pocket needs a bundle: pass --model <dir> or run \`voxedge models pull\` (cache: ${config.modelCacheDir})`);
  }
  if (!bundleDir) return createClassicEngine();
  // onnxruntime-web is loaded only when a neural bundle is actually served.
  const { PocketEngine } = await import("../models/pocket/engine.ts");
  return PocketEngine.load(bundleDir, {}, { decoder: config.decoder, device: config.device });
}
