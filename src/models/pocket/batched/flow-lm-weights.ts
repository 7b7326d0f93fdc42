/**
 * FlowLM's weights read back out of a loaded flow_lm_main graph (docs/pocket-tts.md §1.7, §3.1), for the
 * batched step graph built from them (flow-lm-graph.ts): the fp32 initializers, or the int8 graph's
 * MatMulInteger weights with their scales and zero points (`quantize_dynamic`, §3.6), so each precision
 * computes what its published graph computes.
 *
 * Exporters name nodes differently (the TorchScript export says `/transformer/layers.0/self_attn/in_proj`,
 * others `/in_proj_1`), so weights are found by structure, in graph order: the constant-weight linears are
 * input_linear then (in_proj, out_proj, linear1, linear2) per layer; the LayerNorm affines are (norm1,
 * norm2) per layer then out_norm; every shape is checked against the model's dimensions. A graph that does
 * not read this way gives null and keeps running one stream per call.
 */
import type { OnnxGraphWeights, OnnxInitializer, OnnxNode } from "../../../onnx/proto.ts";

export type LinearWeights =
  | { kind: "float"; inFeatures: number; outFeatures: number; weight: Float32Array }
  | {
      kind: "int8";
      inFeatures: number;
      outFeatures: number;
      /** [in, out] row-major, as MatMulInteger's B. */
      weight: Int8Array | Uint8Array;
      weightType: "int8" | "uint8";
      /** Per-tensor weight scale and zero point (quantize_dynamic with per_channel = False). */
      scale: number;
      zeroPoint: number;
    };

export interface LayerNormWeights {
  weight: Float32Array;
  bias: Float32Array;
}

export interface FlowLmLayerWeights {
  norm1: LayerNormWeights;
  inProj: LinearWeights;
  outProj: LinearWeights;
  norm2: LayerNormWeights;
  linear1: LinearWeights;
  linear2: LinearWeights;
}

export interface FlowLmDimensions {
  layers: number;
  heads: number;
  headDim: number;
  latentDim: number;
}

export interface FlowLmWeights extends FlowLmDimensions {
  modelDim: number;
  hiddenDim: number;
  /** Replaces a NaN input latent (BOS, §1.7). */
  bosEmbedding: Float32Array;
  inputLinear: LinearWeights;
  layerList: FlowLmLayerWeights[];
  outNorm: LayerNormWeights;
  /** out_eos: Linear D → 1 with bias. */
  eosWeight: Float32Array;
  eosBias: number;
  layerNormEpsilon: number;
  precision: "fp32" | "int8";
}

/** The default LayerNorm epsilon (§1.7), for a graph whose epsilon is not a plain constant. */
const LAYER_NORM_EPSILON = 1e-5;

/** FlowLM's weights from its graph, or null (with the reason) when the graph does not have FlowLM's shape. */
export function flowLmWeightsFromGraph(graph: OnnxGraphWeights, dims: FlowLmDimensions): { weights: FlowLmWeights } | { reason: string } {
  try {
    return { weights: readWeights(graph, dims) };
  } catch (error) {
    return { reason: (error as Error).message };
  }
}

function readWeights(graph: OnnxGraphWeights, dims: FlowLmDimensions): FlowLmWeights {
  const { initializers, nodes } = graph;
  const producers = new Map<string, OnnxNode>();
  const consumers = new Map<string, OnnxNode[]>();
  for (const node of nodes) {
    for (const output of node.outputs) producers.set(output, node);
    for (const input of node.inputs) consumers.set(input, [...(consumers.get(input) ?? []), node]);
  }
  const constant = (name: string | undefined) => (name === undefined ? undefined : initializers.get(name));
  const floats = (tensor: OnnxInitializer | undefined, what: string, length?: number): Float32Array => {
    if (!tensor || tensor.elementType !== "float" || (length !== undefined && tensor.values.length !== length)) throw new Error(`${what} is not a float tensor of ${length ?? "any"} values`);
    return tensor.values as Float32Array;
  };

  const linears: LinearWeights[] = [];
  for (const node of nodes) {
    if (node.domain !== "" && node.domain !== "ai.onnx") continue;
    if (node.opType === "MatMul") {
      const weight = constant(node.inputs[1]);
      if (weight?.elementType === "float" && weight.dims.length === 2) linears.push({ kind: "float", inFeatures: weight.dims[0]!, outFeatures: weight.dims[1]!, weight: weight.values as Float32Array });
    } else if (node.opType === "MatMulInteger") {
      const weight = constant(node.inputs[1]);
      if (!weight || weight.dims.length !== 2) continue;
      if (producers.get(node.inputs[0]!)?.opType !== "DynamicQuantizeLinear") throw new Error("an int8 linear is not dynamically quantized");
      if (weight.elementType !== "int8" && weight.elementType !== "uint8") throw new Error(`an int8 linear's weight is ${weight.elementType}`);
      const zeroPoint = constant(node.inputs[3]);
      linears.push({
        kind: "int8",
        inFeatures: weight.dims[0]!,
        outFeatures: weight.dims[1]!,
        weight: weight.values as Int8Array | Uint8Array,
        weightType: weight.elementType,
        scale: weightScaleOf(node, consumers, producers, initializers),
        zeroPoint: zeroPoint ? Number(zeroPoint.values[0]) : 0,
      });
    }
  }

  const norms: LayerNormWeights[] = [];
  for (const node of nodes) {
    if (node.opType !== "Mul" || producers.get(node.inputs[0]!)?.opType !== "Div") continue;
    const weight = constant(node.inputs[1]);
    const add = (consumers.get(node.outputs[0]!) ?? []).find((each) => each.opType === "Add");
    const bias = constant(add?.inputs.find((input) => input !== node.outputs[0]));
    if (weight?.elementType === "float" && weight.dims.length === 1 && bias?.elementType === "float" && bias.dims.length === 1) {
      norms.push({ weight: weight.values as Float32Array, bias: bias.values as Float32Array });
    }
  }

  const { layers, heads, headDim, latentDim } = dims;
  const modelDim = heads * headDim;
  if (linears.length !== 1 + 4 * layers) throw new Error(`found ${linears.length} constant-weight linears, expected ${1 + 4 * layers}`);
  if (norms.length !== 2 * layers + 1) throw new Error(`found ${norms.length} LayerNorms, expected ${2 * layers + 1}`);
  const hiddenDim = linears[3]!.outFeatures;
  const expectShape = (linear: LinearWeights, inFeatures: number, outFeatures: number, what: string) => {
    if (linear.inFeatures !== inFeatures || linear.outFeatures !== outFeatures) throw new Error(`${what} is [${linear.inFeatures}, ${linear.outFeatures}], expected [${inFeatures}, ${outFeatures}]`);
    return linear;
  };
  const expectNorm = (norm: LayerNormWeights, what: string) => {
    if (norm.weight.length !== modelDim || norm.bias.length !== modelDim) throw new Error(`${what} has ${norm.weight.length} values, expected ${modelDim}`);
    return norm;
  };
  const layerList = Array.from({ length: layers }, (_, layer): FlowLmLayerWeights => {
    const [inProj, outProj, linear1, linear2] = linears.slice(1 + 4 * layer, 5 + 4 * layer) as [LinearWeights, LinearWeights, LinearWeights, LinearWeights];
    return {
      norm1: expectNorm(norms[2 * layer]!, `layer ${layer} norm1`),
      inProj: expectShape(inProj, modelDim, 3 * modelDim, `layer ${layer} in_proj`),
      outProj: expectShape(outProj, modelDim, modelDim, `layer ${layer} out_proj`),
      norm2: expectNorm(norms[2 * layer + 1]!, `layer ${layer} norm2`),
      linear1: expectShape(linear1, modelDim, hiddenDim, `layer ${layer} linear1`),
      linear2: expectShape(linear2, hiddenDim, modelDim, `layer ${layer} linear2`),
    };
  });
  const kinds = new Set(linears.map((linear) => linear.kind));
  if (kinds.size !== 1) throw new Error("the graph mixes fp32 and int8 linears");

  const isNan = nodes.find((node) => node.opType === "IsNaN");
  const bosWhere = isNan && (consumers.get(isNan.outputs[0]!) ?? []).find((node) => node.opType === "Where");
  // Either the embedding itself or an Expand of it to the sequence's shape.
  const bosSource = bosWhere && (constant(bosWhere.inputs[1]) ?? constant(producers.get(bosWhere.inputs[1]!)?.opType === "Expand" ? producers.get(bosWhere.inputs[1]!)!.inputs[0] : undefined));
  const bosEmbedding = floats(bosSource, "bos_emb", latentDim);

  const eos = producers.get("eos_logit");
  if (!eos || eos.opType !== "Gemm") throw new Error("eos_logit is not a Gemm");
  const eosWeight = constant(eos.inputs[1]);
  if (!eosWeight || eosWeight.dims.length !== 2 || eosWeight.values.length !== modelDim) throw new Error("out_eos weight is not [1, D] or [D, 1]");
  const eosBias = floats(constant(eos.inputs[2]), "out_eos bias", 1);

  return {
    layers,
    heads,
    headDim,
    latentDim,
    modelDim,
    hiddenDim,
    bosEmbedding,
    inputLinear: expectShape(linears[0]!, latentDim, modelDim, "input_linear"),
    layerList,
    outNorm: expectNorm(norms[2 * layers]!, "out_norm"),
    eosWeight: floats(eosWeight, "out_eos weight"),
    eosBias: eosBias[0]!,
    layerNormEpsilon: layerNormEpsilonOf(nodes, producers, initializers),
    precision: kinds.has("int8") ? "int8" : "fp32",
  };
}

/** quantize_dynamic's `Mul(Cast(MatMulInteger(…)), Mul(A_scale, W_scale))`: W_scale. */
function weightScaleOf(matMul: OnnxNode, consumers: ReadonlyMap<string, OnnxNode[]>, producers: ReadonlyMap<string, OnnxNode>, initializers: OnnxGraphWeights["initializers"]): number {
  const cast = (consumers.get(matMul.outputs[0]!) ?? []).find((node) => node.opType === "Cast");
  const rescale = cast && (consumers.get(cast.outputs[0]!) ?? []).find((node) => node.opType === "Mul");
  const scaleProduct = rescale && producers.get(rescale.inputs.find((input) => input !== cast.outputs[0])!);
  const weightScale = scaleProduct?.opType === "Mul" ? scaleProduct.inputs.map((input) => initializers.get(input)).find((tensor) => tensor?.elementType === "float" && tensor.values.length === 1) : undefined;
  if (!weightScale) throw new Error("an int8 linear's weight scale is not a constant of quantize_dynamic's pattern");
  return (weightScale.values as Float32Array)[0]!;
}

/** The epsilon added to the variance of the first LayerNorm: `Add(ReduceMean(Pow(…)), ε)`. */
function layerNormEpsilonOf(nodes: readonly OnnxNode[], producers: ReadonlyMap<string, OnnxNode>, initializers: OnnxGraphWeights["initializers"]): number {
  for (const node of nodes) {
    if (node.opType !== "Add") continue;
    const mean = producers.get(node.inputs[0]!);
    if (mean?.opType !== "ReduceMean" || producers.get(mean.inputs[0]!)?.opType !== "Pow") continue;
    const epsilon = initializers.get(node.inputs[1]!);
    if (epsilon?.elementType === "float" && epsilon.values.length === 1) return (epsilon.values as Float32Array)[0]!;
  }
  return LAYER_NORM_EPSILON;
}
