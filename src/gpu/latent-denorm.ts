/**
 * Host side of kernels/latent-denorm.wgsl: normalised FlowLM latents [N, T, D] → z = latent · emb_std +
 * emb_mean, channel-major [N, D, T] for the quantizer's 1×1 output projection (docs/pocket-tts.md §1.6).
 */
import { kernelDispatch, validateInputs, type KernelDispatch, type UniformFields } from "./kernel.ts";

export interface LatentDenormShape {
  batch: number;
  latentDim: number;
  frames: number;
}

export function latentDenormUniforms(shape: LatentDenormShape): UniformFields {
  return [
    ["u32", shape.batch],
    ["u32", shape.latentDim],
    ["u32", shape.frames],
  ];
}

export function latentDenormDispatch(
  device: GPUDevice,
  shape: LatentDenormShape,
  buffers: { latents: GPUBuffer; embStd: GPUBuffer; embMean: GPUBuffer; output: GPUBuffer },
): KernelDispatch {
  const { batch, latentDim, frames } = shape;
  validateInputs("latent-denorm", {
    dims: { batch, latentDim, frames },
    buffers: {
      latents: [buffers.latents, batch * frames * latentDim],
      emb_std: [buffers.embStd, latentDim],
      emb_mean: [buffers.embMean, latentDim],
      output: [buffers.output, batch * frames * latentDim],
    },
  });
  return kernelDispatch(device, { name: "latent-denorm" }, latentDenormUniforms(shape), [[1, buffers.latents], [2, buffers.embStd], [3, buffers.embMean], [4, buffers.output]], [
    Math.ceil(frames / 64),
    latentDim,
    batch,
  ]);
}
