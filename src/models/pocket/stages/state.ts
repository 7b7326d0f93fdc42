/**
 * Model states as values owned by the request: tensors in a graph's state manifest order, fed by name and
 * taken back from the outputs (docs/pocket-tts.md §3.3). Tensors are built with the session's own `Tensor` class (onnx/runtime.ts).
 */
import type * as ort from "onnxruntime-web";
import type { StateEntry } from "../bundle/pocket-bundle.ts";
import { applyScatterND, type CacheWritePlan } from "../../../onnx/cache-writes.ts";
import type { OnnxSession } from "../../../onnx/runtime.ts";

/** Axis of the positions in FlowLM's caches [2, 1, 1000, H, Dh]. */
export const FLOW_LM_POSITIONS_AXIS = 2;

/** A float32 tensor crossing a stage boundary: `data` in row-major order of `dims`. */
export interface Float32Tensor {
  data: Float32Array;
  dims: readonly number[];
}

/** The state tensors of a stateful graph, in manifest order. */
export interface StateTensors {
  readonly tensors: readonly ort.Tensor[];
}

/** Bytes a state's tensors hold. */
export function stateBytes(state: StateTensors): number {
  return state.tensors.reduce((sum, tensor) => sum + (tensor.data as ArrayBufferView).byteLength, 0);
}

/** FlowLM KV caches and step counters after `positions` conditioning and latent positions (§2.2 table). */
export interface FlowLmState extends StateTensors {
  readonly positions: number;
}

/** Mimi decoder streaming state (§1.3); fresh for every text chunk (§6.13). */
export interface MimiState extends StateTensors {
  /** Latent frames decoded since the state was fresh. */
  readonly frames: number;
}

/**
 * Builds the initial state of a manifest; `cacheRows`, if given, replaces the positions axis of the FlowLM
 * caches (windowed caches, FlowLm).
 */
export function initialStateTensors(manifest: readonly StateEntry[], Tensor: typeof ort.Tensor, cacheRows?: number): ort.Tensor[] {
  return manifest.map((entry) => {
    const shape = [...entry.shape];
    if (cacheRows !== undefined && entry.key === "cache" && shape.length === 5) shape[2] = cacheRows;
    const elementCount = shape.reduce((product, dim) => product * dim, 1);
    // `mixed` (a tensor whose exporter-time values were not uniform) starts at zeros: zeros are
    // equivalent to every documented fill (NaN caches, `first` = true flags) for these graphs (§3.1 [RUN]).
    const one = entry.fill === "ones";
    switch (entry.dtype) {
      case "float32":
        return new Tensor("float32", new Float32Array(elementCount).fill(entry.fill === "nan" ? NaN : one ? 1 : 0), shape);
      case "int64":
        return new Tensor("int64", new BigInt64Array(elementCount).fill(one ? 1n : 0n), shape);
      case "bool":
        return new Tensor("bool", new Uint8Array(elementCount).fill(one ? 1 : 0), shape);
    }
  });
}

export function stateFeeds(manifest: readonly StateEntry[], state: StateTensors, feeds: Record<string, ort.Tensor>): Record<string, ort.Tensor> {
  manifest.forEach((entry, index) => {
    feeds[entry.inputName] = state.tensors[index]!;
  });
  return feeds;
}

/**
 * The next state of a stateful graph from one run's outputs: each state output is taken as returned, or,
 * for a cache the graph writes with ScatterND (cache-writes.ts), rebuilt from the input cache and the
 * graph's writes, copied first unless the caller gives up the input state (`reuseState`).
 */
export class StateOutputs {
  /** Per manifest entry: how its output is rebuilt, or undefined: fetched whole. */
  private readonly plans: (CacheWritePlan | undefined)[];
  /** Everything the graph returns but the rebuilt caches. */
  readonly fetches: string[];

  constructor(
    private readonly session: OnnxSession,
    private readonly manifest: readonly StateEntry[],
    cacheWrites: readonly CacheWritePlan[],
    private readonly graph: string,
  ) {
    this.plans = manifest.map((entry) => (entry.dtype === "float32" ? cacheWrites.find((plan) => plan.outputName === entry.outputName) : undefined));
    const rebuilt = new Set(this.plans.flatMap((plan) => (plan ? [plan.outputName] : [])));
    this.fetches = session.outputNames.filter((name) => !rebuilt.has(name));
  }

  next(state: StateTensors, outputs: ort.InferenceSession.ReturnType, options: StepOptions): ort.Tensor[] {
    return this.manifest.map((entry, index) => {
      const plan = this.plans[index];
      if (!plan) return requiredOutput(outputs, entry.outputName, this.graph);
      const input = state.tensors[index]!;
      const cache = options.reuseState ? (input.data as Float32Array) : new Float32Array(input.data as Float32Array);
      for (const write of plan.writes) {
        const indices = requiredOutput(outputs, write.indices, this.graph);
        const updates = requiredOutput(outputs, write.updates, this.graph);
        applyScatterND(cache, input.dims, indices.data as BigInt64Array, indices.dims, updates.data as Float32Array);
      }
      return options.reuseState ? input : new this.session.Tensor("float32", cache, [...input.dims]);
    });
  }
}

export function requiredOutput(outputs: ort.InferenceSession.ReturnType, name: string, graph: string): ort.Tensor {
  const tensor = outputs[name];
  if (!tensor) throw new Error(`${graph} returned no ${name}`);
  return tensor;
}

export function float32Output(outputs: ort.InferenceSession.ReturnType, name: string, graph: string): Float32Tensor {
  const tensor = outputs[name];
  if (!tensor || tensor.type !== "float32") throw new Error(`${graph} returned no float32 '${name}'`);
  return { data: tensor.data as Float32Array, dims: tensor.dims };
}

export interface StepOptions {
  /**
   * The caller never uses the input state again, so its KV caches are updated in place instead of copied
   * (the generation loop's own state; never a cached voice state, which every chunk starts from).
   */
  reuseState?: boolean;
}
