/**
 * Picks and loads the speech engine: Pocket TTS when a bundle is configured (`--model`) or was pulled into
 * the model cache, the offline classic engine otherwise (or when asked for by `--engine classic`).
 */
import type { Config } from "../config.ts";
import type { Logger } from "../log/logger.ts";
import type { SpeechModel } from "./contract.ts";
import { createClassicModel } from "./classic/model.ts";
import { findCachedBundle } from "../weights/download.ts";
import { releaseFreeMemory, tuneAllocator } from "../system/allocator.ts";

export async function loadModel(config: Config, logger: Logger): Promise<SpeechModel> {
  if (config.engine === "classic") return createClassicModel();
  const bundleDir = config.model ?? (config.engine === "auto" ? await findCachedBundle(config.modelCacheDir) : undefined);
  if (config.engine === "pocket" && !bundleDir) {
    throw new Error(`--engine pocket needs a bundle: pass --model <dir> or run \`voxedge models pull\` (cache: ${config.modelCacheDir})`);
  }
  if (!bundleDir) return createClassicModel();
  // Before any session exists, so every buffer the model ever allocates is placed by the tuned allocator.
  if (!(await tuneAllocator())) logger.debug("the allocator keeps its defaults (not glibc under Bun): resident memory may stay near its peak");
  // onnxruntime-web is loaded only when a neural bundle is actually served.
  const { PocketModel } = await import("./pocket/model.ts");
  const model = await PocketModel.load(bundleDir, {}, { decoder: config.decoder, decoderWorkers: config.decoderWorkers, device: config.device, graphCacheDir: config.graphCacheDir, logger });
  await releaseFreeMemory();
  return model;
}
