/**
 * Streaming self-attention over a ring KV cache (kernels/attention.wgsl, docs/pocket-tts.md §1.4): two
 * dispatches, `attend` (reads the ring and this call's keys) then `store_kv` (writes this call's keys into
 * the ring). qkv must already carry RoPE on q and k (rope.ts).
 *
 *   qkv     [streams, steps, 3, heads, headDim]
 *   cache   [slots, 2, context, heads, headDim]   zero-initialised; slot per stream via the stream table
 *   output  [streams, steps, heads · headDim]
 */
import { kernelDispatch, storageBuffer, validateInputs, type KernelDispatch, type UniformFields } from "./kernel.ts";

export interface AttentionShape {
  streams: number;
  steps: number;
  heads: number;
  headDim: number;
  /** Positions a query sees, itself included: key j is visible to query i iff 0 ≤ i − j < context. */
  context: number;
  /** Slots in the cache buffer (streams that can hold a ring at once). */
  slots: number;
}

export interface AttentionBuffers {
  streamTable: GPUBuffer;
  qkv: GPUBuffer;
  cache: GPUBuffer;
  output: GPUBuffer;
}

// The WGSL MAX_HEAD_DIM: each of the 64 threads accumulates up to 4 output dimensions.
const MAX_HEAD_DIM = 256;
const STORE_WORKGROUP_SIZE = 64;

/** Floats in a KV-cache buffer of `slots` rings. */
export function kvCacheFloats(shape: Pick<AttentionShape, "slots" | "context" | "heads" | "headDim">): number {
  return shape.slots * 2 * shape.context * shape.heads * shape.headDim;
}

/** A zeroed KV-cache buffer; a fresh stream needs no clearing, since no key before its offset is read. */
export function createKvCache(device: GPUDevice, shape: Pick<AttentionShape, "slots" | "context" | "heads" | "headDim">, label = "kv cache"): GPUBuffer {
  return storageBuffer(device, kvCacheFloats(shape) * 4, label);
}

/** Mirrors `AttentionParams`. */
export function attentionUniforms(shape: AttentionShape): UniformFields {
  return [
    ["u32", shape.streams],
    ["u32", shape.steps],
    ["u32", shape.heads],
    ["u32", shape.headDim],
    ["u32", shape.context],
    ["f32", 1 / Math.sqrt(shape.headDim)],
  ];
}

export function attention(device: GPUDevice, shape: AttentionShape, buffers: AttentionBuffers): KernelDispatch[] {
  const { streams, steps, heads, headDim, context, slots } = shape;
  validateInputs("attention", {
    dims: { streams, steps, heads, headDim, context, slots },
    rules: [
      [`headDim ≤ ${MAX_HEAD_DIM}`, headDim <= MAX_HEAD_DIM, `head_dim ${headDim} exceeds the kernel's ${MAX_HEAD_DIM}`],
      ["slots ≥ streams", slots >= streams, `${streams} streams need at least as many cache slots, not ${slots}`],
    ],
    buffers: {
      qkv: [buffers.qkv, streams * steps * 3 * heads * headDim],
      output: [buffers.output, streams * steps * heads * headDim],
      cache: [buffers.cache, kvCacheFloats(shape)],
      "stream table": [buffers.streamTable, streams * 2],
    },
  });
  const uniforms = attentionUniforms(shape);
  return [
    kernelDispatch(
      device,
      { name: "attention", entryPoint: "attend" },
      uniforms,
      [
        [1, buffers.streamTable],
        [2, buffers.qkv],
        [3, buffers.cache],
        [4, buffers.output],
      ],
      [heads, steps, streams],
    ),
    kernelDispatch(device, { name: "attention", entryPoint: "store_kv" }, uniforms, [[1, buffers.streamTable], [2, buffers.qkv], [3, buffers.cache]], [
      Math.ceil((heads * headDim) / STORE_WORKGROUP_SIZE),
      steps,
      streams,
    ]),
  ];
}
