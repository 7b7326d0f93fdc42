/**
 * FlowLM's AR step over many streams in one call, built at load time from the bundle's own weights
 * (flow-lm-weights.ts; the model: docs/pocket-tts.md §1.7; the design constraints: architecture.md §5).
 *
 * Inputs, R rows (one per stream) and T cache positions shared by the call:
 * - `latents` f32 [R, latentDim]: each stream's input latent, a NaN row for BOS;
 * - `positions` int64 [R]: each stream's filled positions, its RoPE offset and the length its attention sees;
 * - `keys_<l>` f32 [R, H, Dh, T] and `values_<l>` f32 [R, H, T, Dh] per layer: the runner's cache slots as
 *   they are (keys stored transposed, so attention reads both without a Transpose); rows ≥ a stream's
 *   position are never read, T ≥ every position + 1.
 * Outputs: `conditioning` [R, D], `eos_logit` [R, 1], and per layer only the new rows, `new_keys_<l>` and
 * `new_values_<l>` [R, D] (after RoPE for keys), which the runner writes into its slots: no cache is
 * copied, in or out.
 *
 * Row independence, so a stream's numbers do not depend on who runs beside it:
 * - every op is row-wise (LayerNorm over the last axis, batched MatMuls, elementwise);
 * - attention combines the cache's scores with the new row's own through `Where` on positions (past:
 *   the cache, at the position: the new key, after: −∞), so a stream's scores are the same values whatever
 *   T is; softmax over −∞ adds exact zeros; probabilities past a stream's position are zeroed before the
 *   values' MatMul and the new row's value is added after it;
 * - int8 linears quantize each row on its own (`quantize_dynamic`'s DynamicQuantizeLinear semantics, per
 *   row: min/max including 0, scale (max − min)/255, zero point round(−min/scale), q = sat(round(x/scale) +
 *   zp)), accumulate in int32 (exact in any order) and take each row's zero point as an exact int32
 *   correction; the weight side is the published graph's int8 weight, scale and zero point.
 * A stream alone and the same stream batched give bit-identical outputs where the runtime's kernels are
 * row-wise (checked at load: stages/flow-lm-slots.ts); against the published batch-1 graph the difference
 * is rounding (the new key's score and value enter outside the cache's MatMuls), well within 1e-5.
 */
import { OnnxGraphBuilder } from "../../../onnx/graph-builder.ts";
import { zeroPointColumnSums } from "../../../onnx/row-quantization.ts";
import type { FlowLmWeights, LayerNormWeights, LinearWeights } from "./flow-lm-weights.ts";

/** RoPE max period of every Pocket FlowLM (§1.7). */
export const FLOW_LM_ROPE_MAX_PERIOD = 10_000;

/** Opset 17: ReduceMean/Min/Max take `axes` as an attribute, ReduceSum, Split, Squeeze and Unsqueeze as inputs. */
const OPSET = 17;

export const BATCHED_STEP_INPUTS = { latents: "latents", positions: "positions" } as const;
export const batchedKeysInput = (layer: number) => `keys_${layer}`;
export const batchedValuesInput = (layer: number) => `values_${layer}`;
export const batchedNewKeysOutput = (layer: number) => `new_keys_${layer}`;
export const batchedNewValuesOutput = (layer: number) => `new_values_${layer}`;

export function buildBatchedFlowLmStep(weights: FlowLmWeights): Uint8Array {
  const g = new OnnxGraphBuilder("flow_lm_batched_step");
  const { heads, headDim, latentDim, modelDim, layers } = weights;
  const R = "rows";
  const T = "positions";
  const latents = g.input(BATCHED_STEP_INPUTS.latents, "float", [R, latentDim]);
  const positions = g.input(BATCHED_STEP_INPUTS.positions, "int64", [R]);

  const bos = g.initializer("bos_emb", { type: "float", dims: [latentDim], data: weights.bosEmbedding });
  let x = linear(g, "input_linear", g.apply("Where", [g.apply("IsNaN", [latents]), bos, latents]), weights.inputLinear);

  // RoPE angles per row: position × freqs, freqs = exp(j · (−2 ln P / Dh)), computed in the graph as the
  // published graph does (Exp and Cos/Sin of the runtime, elementwise).
  const half = headDim / 2;
  const frequencyStep = Math.fround(Math.fround(1 / headDim) * Math.fround(-Math.log(FLOW_LM_ROPE_MAX_PERIOD) * 2));
  const frequencies = g.apply("Exp", [g.constant("float", Array.from({ length: half }, (_, j) => Math.fround(j * frequencyStep)))]);
  const positionsColumn = g.apply("Reshape", [positions, g.constant("int64", [-1, 1, 1])]);
  const angles = g.apply("Mul", [frequencies, g.apply("Cast", [positionsColumn], { to: 1 })]); // [R, 1, half]
  const cos = g.apply("Cos", [angles]);
  const sin = g.apply("Sin", [angles]);

  // Attention masks over the call's T positions, per row: before the stream's position, at it.
  const positionsFour = g.apply("Reshape", [positions, g.constant("int64", [-1, 1, 1, 1])]);
  const cachePositions = g.apply("Gather", [g.apply("Shape", [batchedKeysInput(0)]), g.scalar("int64", 3)], { axis: 0 });
  const index = g.apply("Range", [g.scalar("int64", 0), cachePositions, g.scalar("int64", 1)]);
  const isPast = g.apply("Less", [index, positionsFour]); // [R, 1, 1, T]
  const isNew = g.apply("Equal", [index, positionsFour]);
  const minusInfinity = g.scalar("float", -Infinity);
  const zero = g.scalar("float", 0);
  const scoreScale = g.scalar("float", Math.fround(Math.sqrt(headDim)));

  for (let layer = 0; layer < layers; layer++) {
    const weightsOf = weights.layerList[layer]!;
    const keys = g.input(batchedKeysInput(layer), "float", [R, heads, headDim, T]);
    const values = g.input(batchedValuesInput(layer), "float", [R, heads, T, headDim]);
    const h = layerNorm(g, x, weightsOf.norm1, weights.layerNormEpsilon);
    const qkv = g.apply("Reshape", [linear(g, `l${layer}_in_proj`, h, weightsOf.inProj), g.constant("int64", [-1, 3, heads, headDim])]);
    const [qSplit, kSplit, vSplit] = g.op("Split", [qkv, g.constant("int64", [1, 1, 1])], { axis: 1 }, undefined, 3) as [string, string, string];
    const squeeze = (value: string) => g.apply("Squeeze", [value, g.constant("int64", [1])]); // [R, H, Dh]
    const q = rope(g, squeeze(qSplit), cos, sin, heads, headDim);
    const k = rope(g, squeeze(kSplit), cos, sin, heads, headDim);
    const v = squeeze(vSplit);

    const query = g.apply("Reshape", [q, g.constant("int64", [-1, heads, 1, headDim])]);
    const cacheScores = g.apply("MatMul", [query, keys]); // [R, H, 1, T]
    const newScore = g.apply("MatMul", [query, g.apply("Reshape", [k, g.constant("int64", [-1, heads, headDim, 1])])]); // [R, H, 1, 1]
    const scores = g.apply("Where", [isNew, newScore, g.apply("Where", [isPast, cacheScores, minusInfinity])]);
    const probabilities = g.apply("Softmax", [g.apply("Div", [scores, scoreScale])], { axis: -1 });
    const pastProbabilities = g.apply("Where", [isPast, probabilities, zero]);
    const newProbability = g.apply("ReduceSum", [g.apply("Where", [isNew, probabilities, zero]), g.constant("int64", [-1])], { keepdims: 1 }); // [R, H, 1, 1]
    const newValue = g.apply("Reshape", [v, g.constant("int64", [-1, heads, 1, headDim])]);
    const attended = g.apply("Add", [g.apply("MatMul", [pastProbabilities, values]), g.apply("Mul", [newProbability, newValue])]); // [R, H, 1, Dh]
    const flat = g.apply("Reshape", [attended, g.constant("int64", [-1, modelDim])]);
    x = g.apply("Add", [x, linear(g, `l${layer}_out_proj`, flat, weightsOf.outProj)]);

    const hidden = linear(g, `l${layer}_linear1`, layerNorm(g, x, weightsOf.norm2, weights.layerNormEpsilon), weightsOf.linear1);
    x = g.apply("Add", [x, linear(g, `l${layer}_linear2`, gelu(g, hidden), weightsOf.linear2)]);

    g.output(g.apply("Reshape", [k, g.constant("int64", [-1, modelDim])]), batchedNewKeysOutput(layer), "float", [R, modelDim]);
    g.output(g.apply("Reshape", [v, g.constant("int64", [-1, modelDim])]), batchedNewValuesOutput(layer), "float", [R, modelDim]);
  }

  const conditioning = layerNorm(g, x, weights.outNorm, weights.layerNormEpsilon);
  g.output(conditioning, "conditioning", "float", [R, modelDim]);
  const eosWeight = g.initializer("out_eos_weight", { type: "float", dims: [1, modelDim], data: weights.eosWeight });
  const eosBias = g.initializer("out_eos_bias", { type: "float", dims: [1], data: Float32Array.of(weights.eosBias) });
  g.output(g.apply("Gemm", [conditioning, eosWeight, eosBias], { transB: 1 }), "eos_logit", "float", [R, 1]);
  return g.toModel(OPSET);
}

/** LayerNorm as the published graph computes it: (x − mean) / sqrt(mean((x − mean)²) + ε) · w + b. */
function layerNorm(g: OnnxGraphBuilder, x: string, norm: LayerNormWeights, epsilon: number): string {
  const weight = g.initializer(`norm_weight_${x}`, { type: "float", dims: [norm.weight.length], data: norm.weight });
  const bias = g.initializer(`norm_bias_${x}`, { type: "float", dims: [norm.bias.length], data: norm.bias });
  const centered = g.apply("Sub", [x, g.apply("ReduceMean", [x], { axes: [-1] })]);
  const variance = g.apply("ReduceMean", [g.apply("Pow", [centered, g.scalar("float", 2)])], { axes: [-1] });
  const normalized = g.apply("Div", [centered, g.apply("Sqrt", [g.apply("Add", [variance, g.scalar("float", epsilon)])])]);
  return g.apply("Add", [g.apply("Mul", [normalized, weight]), bias]);
}

/** GELU (erf), in the published graph's order: x · (erf(x / √2) + 1) · 0.5. */
function gelu(g: OnnxGraphBuilder, x: string): string {
  const erf = g.apply("Erf", [g.apply("Div", [x, g.scalar("float", Math.fround(Math.SQRT2))])]);
  return g.apply("Mul", [g.apply("Mul", [x, g.apply("Add", [erf, g.scalar("float", 1)])]), g.scalar("float", 0.5)]);
}

/** Interleaved (GPT-J) rotary embedding of x [R, H, Dh] by the rows' angles [R, 1, Dh/2]. */
function rope(g: OnnxGraphBuilder, x: string, cos: string, sin: string, heads: number, headDim: number): string {
  const pairs = g.apply("Reshape", [x, g.constant("int64", [-1, heads, headDim / 2, 2])]);
  const real = g.apply("Gather", [pairs, g.scalar("int64", 0)], { axis: 3 });
  const imaginary = g.apply("Gather", [pairs, g.scalar("int64", 1)], { axis: 3 });
  const rotatedReal = g.apply("Sub", [g.apply("Mul", [real, cos]), g.apply("Mul", [imaginary, sin])]);
  const rotatedImaginary = g.apply("Add", [g.apply("Mul", [real, sin]), g.apply("Mul", [imaginary, cos])]);
  const last = g.constant("int64", [-1]);
  const stacked = g.apply("Concat", [g.apply("Unsqueeze", [rotatedReal, last]), g.apply("Unsqueeze", [rotatedImaginary, last])], { axis: -1 });
  return g.apply("Reshape", [stacked, g.constant("int64", [-1, heads, headDim])]);
}

/** x [R, in] · W: a float MatMul, or the int8 path with every row quantized on its own. */
function linear(g: OnnxGraphBuilder, name: string, x: string, weights: LinearWeights): string {
  const dims = [weights.inFeatures, weights.outFeatures];
  if (weights.kind === "float") return g.apply("MatMul", [x, g.initializer(name, { type: "float", dims, data: weights.weight })]);

  const weight = g.initializer(name, { type: weights.weightType, dims, data: weights.weight });
  const weightZeroPoint = g.initializer(`${name}_zero_point`, { type: weights.weightType, dims: [], data: weights.weightType === "int8" ? Int8Array.of(weights.zeroPoint) : Uint8Array.of(weights.zeroPoint) });
  const sums = zeroPointColumnSums(weights.weight, weights.inFeatures, weights.outFeatures, weights.zeroPoint);
  const columnSums = g.initializer(`${name}_column_sums`, { type: "int32", dims: [1, weights.outFeatures], data: sums });

  // DynamicQuantizeLinear, one row at a time: the range always includes 0.
  const low = g.apply("Min", [g.apply("ReduceMin", [x], { axes: [-1], keepdims: 1 }), g.scalar("float", 0)]);
  const high = g.apply("Max", [g.apply("ReduceMax", [x], { axes: [-1], keepdims: 1 }), g.scalar("float", 0)]);
  const range = g.apply("Sub", [high, low]);
  const scale = g.apply("Where", [g.apply("Equal", [high, low]), g.scalar("float", 1), g.apply("Div", [range, g.scalar("float", 255)])]);
  const byte = [g.scalar("float", 0), g.scalar("float", 255)];
  const zeroPoint = g.apply("Round", [g.apply("Clip", [g.apply("Neg", [g.apply("Div", [low, scale])]), ...byte])]); // [R, 1]
  const quantized = g.apply("Cast", [g.apply("Clip", [g.apply("Add", [g.apply("Round", [g.apply("Div", [x, scale])]), zeroPoint]), ...byte])], { to: 2 });
  const integer = g.apply("MatMulInteger", [quantized, weight, "", weightZeroPoint]);
  const corrected = g.apply("Sub", [integer, g.apply("Mul", [g.apply("Cast", [zeroPoint], { to: 6 }), columnSums])]);
  const rescale = g.apply("Mul", [scale, g.scalar("float", weights.scale)]);
  return g.apply("Mul", [g.apply("Cast", [corrected], { to: 1 }), rescale]);
}
