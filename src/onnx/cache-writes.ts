/**
 * FlowLM KV caches kept on our side of the runtime boundary (docs/pocket-tts.md §3.1, §6.10).
 *
 * flow_lm_main takes each layer's whole static cache ([2, 1, 1000, H, Dh], 8 MB per layer at full size)
 * and returns a whole new one, although a step writes one position of it. Copying ~49 MB out of the runtime
 * every step costs as much as the step itself (anchors.md; under Bun with onnxruntime-node a full-size int8
 * step took 32 ms with the caches fetched and 16 ms without). The exporters write the new rows with
 * `ScatterND(ScatterND(cache, k_indices, k_rows), v_indices, v_rows)`, so the graph is rewritten at load
 * time to also return each scatter's `indices` and `updates`, the cache outputs are left out of the fetches,
 * and the same writes are applied to our copy of the cache. The graph's arithmetic is untouched: attention
 * still reads the runtime's own updated cache, and `ScatterND` semantics (ONNX opset 11+, no reduction)
 * are replayed exactly, so the states are bit-identical to fetching the caches.
 *
 * A cache output that is not such a chain (another exporter) is simply fetched as before.
 *
 * The rewrite can also declare the caches' positions axis symbolic (`positionsAxis`). The graph copies its
 * caches internally on every step (the ScatterNDs), so a step's cost follows the cache's length; with a
 * symbolic axis FlowLM feeds only the rows in use (models/pocket/stages/flow-lm.ts, after checking the results are identical).
 */
import { concatBytes } from "../lib/concat.ts";
import { DIM_PARAM_FIELD, DIM_VALUE_FIELD, GRAPH_INPUT_FIELD, GRAPH_NODE_FIELD, GRAPH_OUTPUT_FIELD, MODEL_GRAPH_FIELD, parseNode, parseValueInfo, SHAPE_DIM_FIELD, TENSOR_TYPE_ELEMENT_FIELD, TENSOR_TYPE_SHAPE_FIELD, TYPE_TENSOR_FIELD, VALUE_INFO_NAME_FIELD, VALUE_INFO_TYPE_FIELD, type OnnxNode } from "./proto.ts";
import { lengthDelimitedField as lengthDelimited, protobufFields, varintField, WIRE_LENGTH_DELIMITED } from "../formats/protobuf.ts";

/** One `ScatterND(data, indices, updates)` of a cache chain, by tensor name. */
export interface ScatterWrite {
  indices: string;
  updates: string;
}

/** How one cache state output is rebuilt from its input and the writes the graph made to it. */
export interface CacheWritePlan {
  inputName: string;
  outputName: string;
  /** In the order the graph applies them. */
  writes: ScatterWrite[];
}

export interface RewrittenGraph {
  /** The model with every write's `indices` and `updates` added to the graph outputs. */
  model: Uint8Array;
  plans: CacheWritePlan[];
  /** Inputs and outputs whose positions axis was made symbolic (see `RewriteOptions.positionsAxis`). */
  windowed: string[];
}

export interface RewriteOptions {
  /**
   * The positions axis of the written caches (2 for FlowLM's [2, 1, 1000, H, Dh]): declared symbolic in the
   * rewritten graph, so a cache of only the rows in use can be fed. Whether the graph's arithmetic really
   * follows the fed size (rather than a baked-in 1000) is checked by running it (models/pocket/stages/flow-lm.ts), not assumed.
   */
  positionsAxis?: number;
}

// TensorProto.DataType codes of the added outputs.
const ELEMENT_FLOAT = 1;
const ELEMENT_INT64 = 7;

/**
 * Finds the scatter chain of each `{inputName, outputName}` pair and returns the rewritten model, or null
 * when no pair is such a chain (the graph is then used as it is).
 */
export function rewriteCacheWrites(model: Uint8Array, states: readonly { inputName: string; outputName: string }[], options: RewriteOptions = {}): RewrittenGraph | null {
  let graphField: { start: number; payloadStart: number; next: number } | undefined;
  for (const field of protobufFields(model)) {
    if (field.number === MODEL_GRAPH_FIELD && field.wireType === WIRE_LENGTH_DELIMITED) graphField = { start: field.start, payloadStart: field.payloadStart, next: field.next };
  }
  if (!graphField) return null;
  const graph = model.subarray(graphField.payloadStart, graphField.next);

  const producers = new Map<string, OnnxNode>();
  const graphOutputs = new Set<string>();
  for (const field of protobufFields(graph)) {
    if (field.number === GRAPH_OUTPUT_FIELD) graphOutputs.add(parseValueInfo(field.payload).name);
    if (field.number !== GRAPH_NODE_FIELD) continue;
    const node = parseNode(field.payload);
    for (const output of node.outputs) producers.set(output, node);
  }

  const plans: CacheWritePlan[] = [];
  for (const { inputName, outputName } of states) {
    const writes = scatterChain(producers, inputName, outputName);
    if (writes) plans.push({ inputName, outputName, writes });
  }
  if (plans.length === 0) return null;

  const windowed = new Set(options.positionsAxis === undefined ? [] : plans.flatMap((plan) => [plan.inputName, plan.outputName]));
  const fields: Uint8Array[] = [];
  for (const field of protobufFields(graph)) {
    const isValueInfo = field.number === GRAPH_INPUT_FIELD || field.number === GRAPH_OUTPUT_FIELD;
    const info = isValueInfo ? parseValueInfo(field.payload) : undefined;
    if (info && windowed.has(info.name) && info.dims.length > options.positionsAxis!) {
      info.dims[options.positionsAxis!] = CACHE_POSITIONS_SYMBOL;
      fields.push(lengthDelimited(field.number, valueInfo(info.name, info.elementTypeCode, info.dims)));
    } else {
      fields.push(graph.subarray(field.start, field.next));
    }
  }
  const added: Uint8Array[] = [];
  for (const { writes } of plans) {
    for (const { indices, updates } of writes) {
      for (const [name, elementType] of [[indices, ELEMENT_INT64], [updates, ELEMENT_FLOAT]] as const) {
        if (graphOutputs.has(name)) continue;
        graphOutputs.add(name);
        added.push(lengthDelimited(GRAPH_OUTPUT_FIELD, valueInfo(name, elementType)));
      }
    }
  }
  // Repeated fields may appear anywhere in a message, so the new outputs are appended to the graph bytes
  // and only the graph's length prefix changes.
  const newGraph = concatBytes([...fields, ...added]);
  return {
    model: concatBytes([model.subarray(0, graphField.start), lengthDelimited(MODEL_GRAPH_FIELD, newGraph), model.subarray(graphField.next)]),
    plans,
    windowed: [...windowed],
  };
}

const CACHE_POSITIONS_SYMBOL = "cache_positions";

/** The writes from `inputName` to `outputName` if the output is a chain of plain ScatterNDs on the input. */
function scatterChain(producers: ReadonlyMap<string, OnnxNode>, inputName: string, outputName: string): ScatterWrite[] | null {
  const writes: ScatterWrite[] = [];
  let tensor = outputName;
  while (tensor !== inputName) {
    const node = producers.get(tensor);
    if (!node || node.opType !== "ScatterND" || (node.domain !== "" && node.domain !== "ai.onnx") || (node.stringAttributes.get("reduction") ?? "none") !== "none" || node.inputs.length !== 3) return null;
    writes.unshift({ indices: node.inputs[1]!, updates: node.inputs[2]! });
    tensor = node.inputs[0]!;
  }
  return writes.length > 0 ? writes : null;
}

/**
 * `data` ← ScatterND(data, indices, updates) in place, per the ONNX operator: each index tuple (the last
 * axis of `indices`, q ≤ rank) selects a slice of `data`, which the matching slice of `updates` replaces.
 */
export function applyScatterND(data: Float32Array, dataDims: readonly number[], indices: BigInt64Array, indicesDims: readonly number[], updates: Float32Array): void {
  const tupleLength = indicesDims[indicesDims.length - 1]!;
  if (tupleLength > dataDims.length) throw new Error(`ScatterND index tuples of ${tupleLength} exceed the data rank ${dataDims.length}`);
  const strides = new Array<number>(dataDims.length);
  let stride = 1;
  for (let axis = dataDims.length - 1; axis >= 0; axis--) {
    strides[axis] = stride;
    stride *= dataDims[axis]!;
  }
  const sliceLength = tupleLength === 0 ? data.length : strides[tupleLength - 1]!;
  const tuples = indices.length / Math.max(tupleLength, 1);
  if (updates.length !== tuples * sliceLength) throw new Error(`ScatterND has ${updates.length} update values for ${tuples} slices of ${sliceLength}`);
  for (let tuple = 0; tuple < tuples; tuple++) {
    let offset = 0;
    for (let axis = 0; axis < tupleLength; axis++) {
      let index = Number(indices[tuple * tupleLength + axis]!);
      const dim = dataDims[axis]!;
      if (index < 0) index += dim;
      if (index < 0 || index >= dim) throw new RangeError(`ScatterND index ${indices[tuple * tupleLength + axis]} is outside axis ${axis} of size ${dim}`);
      offset += index * strides[axis]!;
    }
    data.set(updates.subarray(tuple * sliceLength, (tuple + 1) * sliceLength), offset);
  }
}

/** A tensor ValueInfoProto; without `dims` the shape is left unknown; a "?" dimension stays unknown. */
export function valueInfo(name: string, elementType: number, dims?: readonly (number | string)[]): Uint8Array {
  const encoder = new TextEncoder();
  const parts = [varintField(TENSOR_TYPE_ELEMENT_FIELD, elementType)];
  if (dims) {
    const dimFields = dims.map((dim) =>
      lengthDelimited(SHAPE_DIM_FIELD, typeof dim === "number" ? varintField(DIM_VALUE_FIELD, dim) : dim === "?" ? new Uint8Array(0) : lengthDelimited(DIM_PARAM_FIELD, encoder.encode(dim))),
    );
    parts.push(lengthDelimited(TENSOR_TYPE_SHAPE_FIELD, concatBytes(dimFields)));
  }
  return concatBytes([lengthDelimited(VALUE_INFO_NAME_FIELD, encoder.encode(name)), lengthDelimited(VALUE_INFO_TYPE_FIELD, lengthDelimited(TYPE_TENSOR_FIELD, concatBytes(parts)))]);
}
