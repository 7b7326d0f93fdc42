/**
 * Which Mimi decoder serves a bundle: our WGSL kernels on a WebGPU device (src/models/pocket/mimi-wgsl/decoder.ts) or the
 * ONNX graph on the CPU (worker-client.ts, ../stages/mimi-decoder.ts).
 *
 * `--decoder wgsl` forces the WGSL decoder on whatever adapter there is (a software one included: slow, but
 * it is how the kernels are checked without a GPU); `--decoder onnx` forces the ONNX one. `auto` uses WGSL
 * only on a real GPU (architecture.md: a software adapter is slower than the CPU path), unless `--device cpu`,
 * and with `--device gpu` any adapter. The WGSL decoder takes the bundle's fp32 graph (fp32 on WebGPU).
 */
import { existsSync, readdirSync } from "node:fs";
import { loadPocketBundle } from "../bundle/load.ts";
import type { PocketBundle } from "../bundle/pocket-bundle.ts";
import type { MimiGpuDecoder } from "../mimi-wgsl/decoder.ts";
import type { Logger } from "../../../log/logger.ts";

export type DecoderChoice = "auto" | "wgsl" | "onnx";

/** Streams the WGSL decoder holds state for at once (the engine makes further requests wait). */
export const WGSL_DECODER_STREAMS = 16;
export type DevicePolicy = "auto" | "gpu" | "cpu";

export interface WgslDecoderChoice {
  decoder: MimiGpuDecoder;
  adapterDescription: string;
}

/**
 * The WebGPU device the language-model graphs run on (onnxruntime-web's WebGPU EP, fp32), or null for the
 * CPU: `--device gpu` takes any adapter (and fails without one), `auto` only a real GPU, `cpu` none.
 */
export async function chooseLanguageModelGpu(device: DevicePolicy = "auto"): Promise<GPUDevice | null> {
  if (policyRulesOutGpu(device)) return null;
  const { acquireGpu } = await import("../../../gpu/device.ts");
  try {
    return (await acquireGpu({ allowSoftware: device === "gpu" })).device;
  } catch (error) {
    if (device === "gpu") throw new Error(`--device gpu needs a WebGPU device: ${(error as Error).message}`, { cause: error });
    return null;
  }
}

/**
 * Whether both the language model and the Mimi decoder are known to run on the CPU without opening a GPU:
 * `--device cpu`, or `auto` on a host with no GPU device node, and no forced WGSL decoder.
 */
export function knownCpuPlacement(options: { decoder?: DecoderChoice; device?: DevicePolicy }): boolean {
  return (options.decoder ?? "auto") !== "wgsl" && policyRulesOutGpu(options.device ?? "auto");
}

/** The device policy alone says CPU, with no adapter probed: `cpu`, or `auto` on a host with no GPU device node. */
function policyRulesOutGpu(device: DevicePolicy): boolean {
  return device === "cpu" || (device === "auto" && !mayHaveRealGpu());
}

/** The WGSL decoder, or null with the reason when the ONNX one is to be used. */
export async function chooseWgslDecoder(bundleDir: string, bundle: PocketBundle, options: { decoder?: DecoderChoice; device?: DevicePolicy; logger: Logger }): Promise<WgslDecoderChoice | { reason: string }> {
  const decoder = options.decoder ?? "auto";
  const device = options.device ?? "auto";
  if (decoder === "onnx") return { reason: "--decoder onnx" };
  if (decoder === "auto" && device === "cpu") return { reason: "--device cpu" };
  if (decoder === "auto" && device === "auto" && !mayHaveRealGpu()) return { reason: "no GPU device node" };
  const [{ acquireGpu }, { MimiGpuDecoder }, { readMimiWeightsFromOnnx }] = await Promise.all([import("../../../gpu/device.ts"), import("../mimi-wgsl/decoder.ts"), import("../mimi-wgsl/weights.ts")]);
  let context;
  try {
    context = await acquireGpu({ allowSoftware: decoder === "wgsl" || device === "gpu" });
  } catch (error) {
    // Forced: no fallback, the operator asked for the GPU decoder.
    if (decoder === "wgsl") throw new Error(`--decoder wgsl needs a WebGPU device: ${(error as Error).message}`, { cause: error });
    return { reason: (error as Error).message };
  }
  try {
    // Heads are not in the weights: the graph's KV cache state [2, 1, heads, positions, headDim] has them (docs/pocket-tts.md §3.1).
    const cache = bundle.mimiStateManifest.find((entry) => entry.module.startsWith("decoder_transformer.") && entry.key === "cache");
    if (!cache || cache.shape.length !== 5) throw new Error("the bundle's Mimi state manifest has no decoder_transformer KV cache to read the head count from");
    const fp32 = await loadPocketBundle(bundleDir, { precision: "fp32" });
    const gpuDecoder = new MimiGpuDecoder(context.device, await readMimiWeightsFromOnnx(fp32.graphs.mimiDecoder.path), { heads: cache.shape[2]!, maxStreams: WGSL_DECODER_STREAMS });
    if (gpuDecoder.config.samplesPerFrame !== bundle.dims.samplesPerFrame || gpuDecoder.config.latentDim !== bundle.dims.latentDim) {
      gpuDecoder.destroy();
      throw new Error(`the WGSL decoder makes ${gpuDecoder.config.samplesPerFrame} samples from ${gpuDecoder.config.latentDim}-value latents; the bundle expects ${bundle.dims.samplesPerFrame} from ${bundle.dims.latentDim}`);
    }
    return { decoder: gpuDecoder, adapterDescription: context.adapterDescription };
  } catch (error) {
    if (decoder === "wgsl") throw error;
    // auto: the ONNX decoder still works.
    options.logger.warn("decoding with the ONNX graph: the WGSL Mimi decoder could not be set up", { error: (error as Error).message });
    return { reason: (error as Error).message };
  }
}

/**
 * False on a Linux machine without any GPU device node (DRM render nodes, NVIDIA's, WSL's /dev/dxg): it has
 * no real GPU, so `auto` skips the adapter probe, which loads Dawn and lets Mesa print warnings at start.
 * Elsewhere the probe decides.
 */
function mayHaveRealGpu(): boolean {
  // A page has no process: there navigator.gpu's adapter decides.
  if (typeof process === "undefined" || process.platform !== "linux") return true;
  try {
    if (existsSync("/dev/dxg") || existsSync("/dev/nvidia0")) return true;
  } catch {
    // Deno wants --allow-all to look at some device paths: let the probe decide.
    return true;
  }
  try {
    return readdirSync("/dev/dri").some((name) => name.startsWith("renderD"));
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "ENOENT";
  }
}
