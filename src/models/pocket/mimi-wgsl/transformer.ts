/**
 * The Mimi decoder transformer on the GPU (docs/pocket-tts.md §1.4, upstream ProjectedTransformer with
 * identity input/output projections): N streams × T steps at 200 Hz in one compute pass.
 *
 *   input   [N, C, T]  channels-first, as the upsample leaves it
 *   output  [N, C, T]  channels-first, for decoder.model.0
 *
 * Per layer, on time-major rows x [N·T, C]:
 *   x += layerScale1 ⊙ out_proj(attention(rope(in_proj(norm1(x)))))
 *   x += layerScale2 ⊙ linear2(gelu(linear1(norm2(x))))
 *
 * Each stream's KV ring lives in a cache slot (one cache buffer per layer, `slots` rings each) chosen by
 * the stream table; its offset there is the stream's transformer position (16 per latent frame). The
 * caller writes the table before submitting and advances each offset by T afterwards.
 */
import { attention, createKvCache } from "../../../gpu/attention.ts";
import { gelu } from "../../../gpu/gelu.ts";
import { encodeDispatches, storageBuffer, validateInputs, type KernelDispatch } from "../../../gpu/kernel.ts";
import { layerNorm } from "../../../gpu/layer-norm.ts";
import { layerScale } from "../../../gpu/layer-scale.ts";
import { matmul } from "../../../gpu/matmul.ts";
import { rope, ropeFrequencyBuffer } from "../../../gpu/rope.ts";
import { transpose } from "../../../gpu/transpose.ts";

export interface MimiTransformerConfig {
  dModel: number;
  heads: number;
  layers: number;
  dimFeedforward: number;
  /** Positions each query sees, itself included (250 = 1.25 s at 200 Hz). */
  context: number;
  maxPeriod: number;
  /** nn.LayerNorm eps of norm1/norm2. */
  eps: number;
}

/** The released decoder transformer (and mimi-full's): 2 layers, 512 wide, 8 heads of 64, FFN 2048. */
export const MIMI_DECODER_TRANSFORMER: MimiTransformerConfig = { dModel: 512, heads: 8, layers: 2, dimFeedforward: 2048, context: 250, maxPeriod: 10_000, eps: 1e-5 };

/** Per-layer parameter names, after `….transformer.layers.{i}.` (§4). */
export const MIMI_TRANSFORMER_LAYER_WEIGHTS = [
  "self_attn.in_proj.weight",
  "self_attn.out_proj.weight",
  "norm1.weight",
  "norm1.bias",
  "norm2.weight",
  "norm2.bias",
  "linear1.weight",
  "linear2.weight",
  "layer_scale_1.scale",
  "layer_scale_2.scale",
] as const;

export type MimiTransformerLayerWeight = (typeof MIMI_TRANSFORMER_LAYER_WEIGHTS)[number];

/** Linear weights of a layer, by name, with their [in, out] sizes. */
function linearSizes(config: MimiTransformerConfig): Partial<Record<MimiTransformerLayerWeight, [number, number]>> {
  const { dModel, dimFeedforward } = config;
  return {
    "self_attn.in_proj.weight": [dModel, 3 * dModel],
    "self_attn.out_proj.weight": [dModel, dModel],
    "linear1.weight": [dModel, dimFeedforward],
    "linear2.weight": [dimFeedforward, dModel],
  };
}

/**
 * Uploads one transformer's weights. `tensor(name)` returns the parameter `layers.{i}.<name>`. Linear
 * weights go to the GPU as [in, out]: pass `linearLayout: "out-in"` for upstream / safetensors tensors
 * (nn.Linear's [out, in], transposed here) and `"in-out"` for an ONNX export's MatMul initializers.
 */
export function uploadMimiTransformerWeights(
  device: GPUDevice,
  config: MimiTransformerConfig,
  tensor: (name: string) => Float32Array,
  linearLayout: "out-in" | "in-out",
): Map<string, GPUBuffer> {
  const linears = linearSizes(config);
  const weights = new Map<string, GPUBuffer>();
  for (let layer = 0; layer < config.layers; layer++) {
    for (const name of MIMI_TRANSFORMER_LAYER_WEIGHTS) {
      const fullName = `layers.${layer}.${name}`;
      let values = tensor(fullName);
      const sizes = linears[name];
      const expected = sizes ? sizes[0] * sizes[1] : config.dModel;
      if (values.length !== expected) throw new Error(`Mimi transformer weight ${fullName} has ${values.length} values, expected ${expected}`);
      if (sizes && linearLayout === "out-in") values = transposeMatrix(values, sizes[1], sizes[0]);
      weights.set(fullName, storageBuffer(device, values, fullName));
    }
  }
  return weights;
}

/** [rows, cols] → [cols, rows]. */
export function transposeMatrix(values: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(values.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = values[r * cols + c]!;
  return out;
}

export interface MimiTransformerBuffers {
  /** [capacity ≥ N] × (slot, offset) words (stream-table.ts). */
  streamTable: GPUBuffer;
  input: GPUBuffer;
  output: GPUBuffer;
}

interface Scratch {
  rows: number;
  residual: GPUBuffer;
  normed: GPUBuffer;
  qkv: GPUBuffer;
  attended: GPUBuffer;
  update: GPUBuffer;
  hidden: GPUBuffer;
}

const PREPARED_SHAPES = 16;

export class MimiTransformer {
  /** Per layer: [slots, 2, context, heads, headDim] KV rings. */
  readonly caches: GPUBuffer[];
  private readonly frequencies: GPUBuffer;
  private scratch: Scratch | null = null;
  private readonly prepared = new Map<string, KernelDispatch[]>();
  private readonly bufferIds = new WeakMap<GPUBuffer, number>();
  private nextBufferId = 1;

  constructor(
    private readonly device: GPUDevice,
    readonly config: MimiTransformerConfig,
    private readonly weights: ReadonlyMap<string, GPUBuffer>,
    /** Streams whose KV rings the caches hold at once. */
    readonly slots: number,
  ) {
    const { dModel, heads, layers, dimFeedforward, context } = config;
    validateInputs("MimiTransformer", {
      dims: { dModel, heads, layers, dimFeedforward, context, slots },
      rules: [["heads of an even size", dModel % heads === 0 && (dModel / heads) % 2 === 0, `d_model ${dModel} does not split into ${heads} heads of an even size`]],
    });
    const linears = linearSizes(config);
    const weightSizes: Record<string, readonly [GPUBuffer, number]> = {};
    for (let layer = 0; layer < layers; layer++) {
      for (const name of MIMI_TRANSFORMER_LAYER_WEIGHTS) {
        const buffer = weights.get(`layers.${layer}.${name}`);
        if (!buffer) throw new Error(`MimiTransformer: weight layers.${layer}.${name} is missing`);
        const sizes = linears[name];
        weightSizes[`layers.${layer}.${name}`] = [buffer, sizes ? sizes[0] * sizes[1] : dModel];
      }
    }
    validateInputs("MimiTransformer", { buffers: weightSizes });
    const headDim = dModel / heads;
    this.caches = Array.from({ length: layers }, (_, layer) => createKvCache(device, { slots, context, heads, headDim }, `mimi transformer layer ${layer} kv`));
    this.frequencies = ropeFrequencyBuffer(device, headDim, config.maxPeriod);
  }

  /** Encodes one call for `streams` batch rows of `steps` steps each into `pass`. */
  encode(pass: GPUComputePassEncoder, streams: number, steps: number, buffers: MimiTransformerBuffers): void {
    encodeDispatches(pass, this.dispatches(streams, steps, buffers));
  }

  /** The call's dispatches, built once per (shape, buffers) and reused on every later step. */
  dispatches(streams: number, steps: number, buffers: MimiTransformerBuffers): KernelDispatch[] {
    validateInputs("MimiTransformer", { dims: { streams, steps } });
    const key = `${streams}x${steps}:${this.idOf(buffers.streamTable)}:${this.idOf(buffers.input)}:${this.idOf(buffers.output)}`;
    const cached = this.prepared.get(key);
    if (cached) return cached;
    const dispatches = this.build(streams, steps, buffers);
    // Callers keep their own plans and drop old I/O buffers; only recent shapes are worth keeping here.
    if (this.prepared.size >= PREPARED_SHAPES) this.prepared.delete(this.prepared.keys().next().value!);
    this.prepared.set(key, dispatches);
    return dispatches;
  }

  private idOf(buffer: GPUBuffer): number {
    let id = this.bufferIds.get(buffer);
    if (id === undefined) {
      id = this.nextBufferId++;
      this.bufferIds.set(buffer, id);
    }
    return id;
  }

  private scratchFor(rows: number): Scratch {
    if (this.scratch && this.scratch.rows >= rows) return this.scratch;
    // Dispatches bound to the old, smaller scratch must not be encoded again.
    this.prepared.clear();
    const { dModel, dimFeedforward } = this.config;
    const floats = (count: number, label: string) => storageBuffer(this.device, rows * count * 4, label);
    this.scratch = {
      rows,
      residual: floats(dModel, "mimi transformer residual"),
      normed: floats(dModel, "mimi transformer normed"),
      qkv: floats(3 * dModel, "mimi transformer qkv"),
      attended: floats(dModel, "mimi transformer attention"),
      update: floats(dModel, "mimi transformer update"),
      hidden: floats(dimFeedforward, "mimi transformer ffn"),
    };
    return this.scratch;
  }

  private build(streams: number, steps: number, buffers: MimiTransformerBuffers): KernelDispatch[] {
    const { device, config } = this;
    const { dModel, heads, dimFeedforward, context, eps } = config;
    const headDim = dModel / heads;
    const rows = streams * steps;
    validateInputs("MimiTransformer", { buffers: { input: [buffers.input, rows * dModel], output: [buffers.output, rows * dModel] } });
    const scratch = this.scratchFor(rows);
    const weight = (layer: number, name: MimiTransformerLayerWeight) => this.weights.get(`layers.${layer}.${name}`)!;
    const dispatches: KernelDispatch[] = [transpose(device, { batch: streams, rows: dModel, cols: steps }, { input: buffers.input, output: scratch.residual })];
    for (let layer = 0; layer < config.layers; layer++) {
      dispatches.push(
        layerNorm(device, { rows, channels: dModel, eps }, { input: scratch.residual, weight: weight(layer, "norm1.weight"), bias: weight(layer, "norm1.bias"), output: scratch.normed }),
        matmul(device, { rows, inner: dModel, cols: 3 * dModel }, { a: scratch.normed, b: weight(layer, "self_attn.in_proj.weight"), bias: null, out: scratch.qkv }),
        rope(device, { streams, steps, heads, headDim }, { streamTable: buffers.streamTable, frequencies: this.frequencies, qkv: scratch.qkv }),
        ...attention(device, { streams, steps, heads, headDim, context, slots: this.slots }, { streamTable: buffers.streamTable, qkv: scratch.qkv, cache: this.caches[layer]!, output: scratch.attended }),
        matmul(device, { rows, inner: dModel, cols: dModel }, { a: scratch.attended, b: weight(layer, "self_attn.out_proj.weight"), bias: null, out: scratch.update }),
        layerScale(device, { rows, channels: dModel }, { update: scratch.update, scale: weight(layer, "layer_scale_1.scale"), residual: scratch.residual }),
        layerNorm(device, { rows, channels: dModel, eps }, { input: scratch.residual, weight: weight(layer, "norm2.weight"), bias: weight(layer, "norm2.bias"), output: scratch.normed }),
        matmul(device, { rows, inner: dModel, cols: dimFeedforward }, { a: scratch.normed, b: weight(layer, "linear1.weight"), bias: null, out: scratch.hidden }),
        gelu(device, rows * dimFeedforward, scratch.hidden),
        matmul(device, { rows, inner: dimFeedforward, cols: dModel }, { a: scratch.hidden, b: weight(layer, "linear2.weight"), bias: null, out: scratch.update }),
        layerScale(device, { rows, channels: dModel }, { update: scratch.update, scale: weight(layer, "layer_scale_2.scale"), residual: scratch.residual }),
      );
    }
    dispatches.push(transpose(device, { batch: streams, rows: steps, cols: dModel }, { input: scratch.residual, output: buffers.output }));
    return dispatches;
  }
}
