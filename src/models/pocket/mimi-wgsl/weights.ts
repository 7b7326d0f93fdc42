/**
 * The Mimi decoder's weights under their upstream checkpoint names (docs/pocket-tts.md §4), as float32,
 * from any of the three places they ship in:
 *
 * - an fp32 `mimi_decoder.onnx`: conv weights keep their names (prefixed `mimi.`), `emb_std`/`emb_mean` are
 *   top-level, and the transformer linears are anonymous `onnx::MatMul_<n>` initializers stored transposed
 *   ([in, out]), found through the MatMul node whose name keeps the module path;
 * - the int8 variant (§3.6): those linears become `<W>_quantized` int8 + `<W>_scale` + `<W>_zero_point`
 *   feeding a MatMulInteger node; they are dequantised here ((q − zero point) · scale, per tensor);
 * - an upstream `model.safetensors` / `tts_*.safetensors` (bf16 in the released files, upcast on read).
 *
 * Linear weights are returned in upstream [out, in] layout whatever the source.
 */
import { readFile } from "node:fs/promises";
import { readOnnxGraphWeights, type OnnxGraphWeights, type OnnxInitializer } from "../../../onnx/proto.ts";
import { decodeSafetensors } from "../../../formats/safetensors.ts";
import { transposeMatrix } from "./transformer.ts";

export interface WeightTensor {
  dims: number[];
  values: Float32Array;
}

/** Upstream name → tensor, restricted to what the decoder path reads (§4 "Mimi decoder path"). */
export type MimiDecoderWeights = Map<string, WeightTensor>;

export const EMB_STD = "flow_lm.emb_std";
export const EMB_MEAN = "flow_lm.emb_mean";
const DECODER_PREFIXES = ["mimi.quantizer.output_proj.", "mimi.upsample.", "mimi.decoder_transformer.", "mimi.decoder."];

function isDecoderWeight(name: string): boolean {
  return name === EMB_STD || name === EMB_MEAN || DECODER_PREFIXES.some((prefix) => name.startsWith(prefix));
}

// MatMul node path → the nn.Linear it came from, e.g.
// /decoder_transformer/transformer/layers.0/self_attn/in_proj/MatMul → …layers.0.self_attn.in_proj.weight
const LINEAR_NODE = /^\/decoder_transformer\/transformer\/layers\.(\d+)\/(self_attn\/in_proj|self_attn\/out_proj|linear1|linear2)\//;

function linearName(nodeName: string): string | null {
  const match = LINEAR_NODE.exec(nodeName);
  return match ? `mimi.decoder_transformer.transformer.layers.${match[1]}.${match[2]!.replace("/", ".")}.weight` : null;
}

function floatInitializer(tensor: OnnxInitializer | undefined, what: string): Float32Array {
  if (!tensor || !(tensor.values instanceof Float32Array)) throw new Error(`${what}: no float initializer ${tensor ? `(found ${tensor.elementType})` : ""}`);
  return tensor.values;
}

/** Per-tensor symmetric or asymmetric int8/uint8 weights back to float32 (§3.6). */
function dequantised(graph: OnnxGraphWeights, quantizedName: string, zeroPointName: string | undefined): { dims: number[]; values: Float32Array } {
  const quantized = graph.initializers.get(quantizedName);
  if (!quantized || !(quantized.values instanceof Int8Array || quantized.values instanceof Uint8Array)) throw new Error(`${quantizedName}: not an int8/uint8 initializer`);
  const base = quantizedName.replace(/_quantized$/, "");
  const scale = floatInitializer(graph.initializers.get(`${base}_scale`), `${base}_scale`);
  if (scale.length !== 1) throw new Error(`${base}_scale has ${scale.length} values; only per-tensor quantisation (§3.6) is supported`);
  const zeroPointTensor = zeroPointName ? graph.initializers.get(zeroPointName) : undefined;
  const zeroPoint = zeroPointTensor ? Number(zeroPointTensor.values[0]!) : 0;
  if (zeroPointTensor && zeroPointTensor.values.length !== 1) throw new Error(`${zeroPointName} has ${zeroPointTensor.values.length} values; only per-tensor quantisation is supported`);
  const values = new Float32Array(quantized.values.length);
  for (let index = 0; index < values.length; index++) values[index] = (quantized.values[index]! - zeroPoint) * scale[0]!;
  return { dims: quantized.dims, values };
}

/** Weights of an fp32 or int8 `mimi_decoder.onnx` (parsed from the protobuf; no session needed). */
export function mimiWeightsFromOnnx(graph: OnnxGraphWeights): MimiDecoderWeights {
  const weights: MimiDecoderWeights = new Map();
  for (const [name, tensor] of graph.initializers) {
    const upstream = name === "emb_std" ? EMB_STD : name === "emb_mean" ? EMB_MEAN : name;
    if (isDecoderWeight(upstream) && tensor.values instanceof Float32Array) weights.set(upstream, { dims: tensor.dims, values: tensor.values });
  }
  for (const node of graph.nodes) {
    const name = linearName(node.name);
    if (!name) continue;
    let stored: { dims: number[]; values: Float32Array };
    if (node.opType === "MatMul") {
      const tensor = graph.initializers.get(node.inputs[1] ?? "");
      stored = { dims: tensor?.dims ?? [], values: floatInitializer(tensor, `${node.name} weight ${node.inputs[1]}`) };
    } else if (node.opType === "MatMulInteger") {
      stored = dequantised(graph, node.inputs[1] ?? "", node.inputs[3]);
    } else {
      continue;
    }
    const [inFeatures, outFeatures] = stored.dims as [number, number];
    if (stored.dims.length !== 2) throw new Error(`${node.name}: weight of shape [${stored.dims.join(", ")}] is not a matrix`);
    weights.set(name, { dims: [outFeatures, inFeatures], values: transposeMatrix(stored.values, inFeatures, outFeatures) });
  }
  return weights;
}

export async function readMimiWeightsFromOnnx(path: string): Promise<MimiDecoderWeights> {
  return mimiWeightsFromOnnx(await readOnnxGraphWeights(path));
}

/** Weights of an upstream checkpoint (F32, F16 or BF16 tensors, all upcast to float32). */
export function mimiWeightsFromSafetensors(bytes: Uint8Array): MimiDecoderWeights {
  const weights: MimiDecoderWeights = new Map();
  for (const [name, tensor] of Object.entries(decodeSafetensors(bytes).tensors)) {
    if (isDecoderWeight(name)) weights.set(name, { dims: tensor.shape, values: tensor.data });
  }
  return weights;
}

export async function readMimiWeightsFromSafetensors(path: string): Promise<MimiDecoderWeights> {
  return mimiWeightsFromSafetensors(new Uint8Array(await readFile(path)));
}
