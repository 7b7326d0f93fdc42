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
 * symbolic axis FlowLM feeds only the rows in use (stages.ts, after checking the results are identical).
 */
import { concatBytes } from "../../audio/concat.ts";
import { parseValueInfo } from "./onnx.ts";
import { lengthDelimitedField as lengthDelimited, protobufFields, varintField, WIRE_LENGTH_DELIMITED } from "./protobuf.ts";

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
   * follows the fed size (rather than a baked-in 1000) is checked by running it (stages.ts), not assumed.
   */
  positionsAxis?: number;
}

// onnx.proto field numbers.
const MODEL_GRAPH = 7;
const GRAPH_NODE = 1;
const GRAPH_INPUT = 11;
const GRAPH_OUTPUT = 12;
const NODE_INPUT = 1;
const NODE_OUTPUT = 2;
const NODE_OP_TYPE = 4;
const NODE_ATTRIBUTE = 5;
const NODE_DOMAIN = 7;
const ATTRIBUTE_NAME = 1;
const ATTRIBUTE_STRING = 4;
const VALUE_INFO_NAME = 1;
const VALUE_INFO_TYPE = 2;
const TYPE_TENSOR = 1;
const TENSOR_TYPE_ELEMENT = 1;
const TENSOR_TYPE_SHAPE = 2;
const SHAPE_DIM = 1;
const DIM_VALUE = 1;
const DIM_PARAM = 2;
const ELEMENT_FLOAT = 1;
const ELEMENT_INT64 = 7;

interface GraphNode {
  opType: string;
  domain: string;
  inputs: string[];
  outputs: string[];
  reduction: string;
}

/**
 * Finds the scatter chain of each `{inputName, outputName}` pair and returns the rewritten model, or null
 * when no pair is such a chain (the graph is then used as it is).
 */
export function rewriteCacheWrites(model: Uint8Array, states: readonly { inputName: string; outputName: string }[], options: RewriteOptions = {}): RewrittenGraph | null {
  const text = new TextDecoder();
  let graphField: { start: number; payloadStart: number; next: number } | undefined;
  for (const field of protobufFields(model)) {
    if (field.number === MODEL_GRAPH && field.wireType === WIRE_LENGTH_DELIMITED) graphField = { start: field.start, payloadStart: field.payloadStart, next: field.next };
  }
  if (!graphField) return null;
  const graph = model.subarray(graphField.payloadStart, graphField.next);

  const producers = new Map<string, GraphNode>();
  const graphOutputs = new Set<string>();
  for (const field of protobufFields(graph)) {
    if (field.number === GRAPH_OUTPUT) {
      for (const infoField of protobufFields(field.payload)) if (infoField.number === VALUE_INFO_NAME) graphOutputs.add(text.decode(infoField.payload));
    }
    if (field.number !== GRAPH_NODE) continue;
    const node: GraphNode = { opType: "", domain: "", inputs: [], outputs: [], reduction: "none" };
    for (const nodeField of protobufFields(field.payload)) {
      if (nodeField.number === NODE_INPUT) node.inputs.push(text.decode(nodeField.payload));
      else if (nodeField.number === NODE_OUTPUT) node.outputs.push(text.decode(nodeField.payload));
      else if (nodeField.number === NODE_OP_TYPE) node.opType = text.decode(nodeField.payload);
      else if (nodeField.number === NODE_DOMAIN) node.domain = text.decode(nodeField.payload);
      else if (nodeField.number === NODE_ATTRIBUTE) {
        let name = "";
        let value = "";
        for (const attributeField of protobufFields(nodeField.payload)) {
          if (attributeField.number === ATTRIBUTE_NAME) name = text.decode(attributeField.payload);
          if (attributeField.number === ATTRIBUTE_STRING) value = text.decode(attributeField.payload);
        }
        if (name === "reduction") node.reduction = value;
      }
    }
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
    const isValueInfo = field.number === GRAPH_INPUT || field.number === GRAPH_OUTPUT;
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
        added.push(lengthDelimited(GRAPH_OUTPUT, valueInfo(name, elementType)));
      }
    }
  }
  // Repeated fields may appear anywhere in a message, so the new outputs are appended to the graph bytes
  // and only the graph's length prefix changes.
  const newGraph = concatBytes([...fields, ...added]);
  return {
    model: concatBytes([model.subarray(0, graphField.start), lengthDelimited(MODEL_GRAPH, newGraph), model.subarray(graphField.next)]),
    plans,
    windowed: [...windowed],
  };
}

const CACHE_POSITIONS_SYMBOL = "cache_positions";

/** The writes from `inputName` to `outputName` if the output is a chain of plain ScatterNDs on the input. */
function scatterChain(producers: ReadonlyMap<string, GraphNode>, inputName: string, outputName: string): ScatterWrite[] | null {
  const writes: ScatterWrite[] = [];
  let tensor = outputName;
  while (tensor !== inputName) {
    const node = producers.get(tensor);
    if (!node || node.opType !== "ScatterND" || (node.domain !== "" && node.domain !== "ai.onnx") || node.reduction !== "none" || node.inputs.length !== 3) return null;
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
function valueInfo(name: string, elementType: number, dims?: readonly (number | string)[]): Uint8Array {
  const encoder = new TextEncoder();
  const parts = [varintField(TENSOR_TYPE_ELEMENT, elementType)];
  if (dims) {
    const dimFields = dims.map((dim) =>
      lengthDelimited(SHAPE_DIM, typeof dim === "number" ? varintField(DIM_VALUE, dim) : dim === "?" ? new Uint8Array(0) : lengthDelimited(DIM_PARAM, encoder.encode(dim))),
    );
    parts.push(lengthDelimited(TENSOR_TYPE_SHAPE, concatBytes(dimFields)));
  }
  return concatBytes([lengthDelimited(VALUE_INFO_NAME, encoder.encode(name)), lengthDelimited(VALUE_INFO_TYPE, lengthDelimited(TYPE_TENSOR, concatBytes(parts)))]);
}
