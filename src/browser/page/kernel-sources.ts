/** The WGSL kernels, bundled into the browser build as text (the page has no kernels/ folder to read). */
import attention from "../../../kernels/attention.wgsl" with { type: "text" };
import convTranspose1d from "../../../kernels/conv-transpose1d.wgsl" with { type: "text" };
import conv1d from "../../../kernels/conv1d.wgsl" with { type: "text" };
import elu from "../../../kernels/elu.wgsl" with { type: "text" };
import gelu from "../../../kernels/gelu.wgsl" with { type: "text" };
import latentDenorm from "../../../kernels/latent-denorm.wgsl" with { type: "text" };
import layerNorm from "../../../kernels/layer-norm.wgsl" with { type: "text" };
import layerScale from "../../../kernels/layer-scale.wgsl" with { type: "text" };
import matmul from "../../../kernels/matmul.wgsl" with { type: "text" };
import rope from "../../../kernels/rope.wgsl" with { type: "text" };
import transpose from "../../../kernels/transpose.wgsl" with { type: "text" };

export const KERNEL_SOURCES: Readonly<Record<string, string>> = {
  "attention": attention,
  "conv-transpose1d": convTranspose1d,
  "conv1d": conv1d,
  "elu": elu,
  "gelu": gelu,
  "latent-denorm": latentDenorm,
  "layer-norm": layerNorm,
  "layer-scale": layerScale,
  "matmul": matmul,
  "rope": rope,
  "transpose": transpose,
};
