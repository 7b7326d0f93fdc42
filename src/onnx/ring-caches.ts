/**
 * Graph rewrite: ring-buffer KV caches of another capacity than the export's.
 *
 * The exported Mimi decoder keeps each transformer layer's keys and values in a ring of 1000 positions
 * ([2, 1, 8, 1000, 64]: 3.9 MiB a layer in fp32, 7.8 MiB of a stream's 8.3 MiB decoder state), yet attends
 * over the last 250 only (docs/pocket-tts.md §1.4): three quarters of the ring are written and never read.
 * The capacity is in the caches' declared shapes and in constants of the graph: the modulus positions are
 * taken by, the slot indices each slot's position is computed from for the mask, and the like (listed at
 * `resizeRingCaches`). These are changed here and nothing else is. Whether the result computes what the export did is not assumed: its caller runs both on
 * the same latents and keeps the smaller ring only if the audio agrees (models/pocket/sessions.ts).
 */
import { concatBytes } from "../lib/concat.ts";
import { lengthDelimitedField as lengthDelimited, protobufFields } from "../formats/protobuf.ts";
import { valueInfo } from "./cache-writes.ts";
import { nodeProto, type TensorValue } from "./graph-builder.ts";
import type { StatePair } from "./pass-through-states.ts";
import { GRAPH_INPUT_FIELD, GRAPH_NODE_FIELD, GRAPH_OUTPUT_FIELD, MODEL_GRAPH_FIELD, parseNode, parseTensor, parseValueInfo } from "./proto.ts";

export interface RingResize {
  /** The axis of the caches' shapes that holds positions (3 for Mimi's [2, 1, H, T, Dh]). */
  positionsAxis: number;
  /** The ring's capacity in the export. */
  exportedPositions: number;
  /** The capacity wanted. */
  positions: number;
}

/** Operators the capacity feeds: the modulo, and the offsets that keep its dividend in range. */
const CAPACITY_ARITHMETIC = new Set(["Mod", "Add", "Sub"]);
/** Operators the slot indices feed: a slot's position is computed from its index, then compared. */
const SLOT_ARITHMETIC = new Set(["Sub", "Add", "GreaterOrEqual", "Greater", "LessOrEqual", "Less"]);

/**
 * The model with `caches` declared at `positions`, and each constant that holds the export's capacity C set
 * to the new one: an integer scalar C feeding only `Mod`, `Add` and `Sub`; a scalar −C feeding only `Slice`
 * (a long call's last C keys, for writing); the slot indices 0…C−1 feeding only arithmetic and comparisons;
 * a tensor of one repeated value along an axis of length C (a mask's filler). Null when the graph takes no
 * position modulo C or declares no such cache (another exporter: the graph is then used as it is).
 */
export function resizeRingCaches(model: Uint8Array, caches: readonly StatePair[], resize: RingResize): Uint8Array | null {
  let graphField: { start: number; payloadStart: number; next: number } | undefined;
  for (const field of protobufFields(model)) if (field.number === MODEL_GRAPH_FIELD) graphField = field;
  if (!graphField) return null;
  const graph = model.subarray(graphField.payloadStart, graphField.next);

  const readers = new Map<string, string[]>();
  for (const field of protobufFields(graph)) {
    if (field.number !== GRAPH_NODE_FIELD) continue;
    const node = parseNode(field.payload);
    for (const input of node.inputs) readers.set(input, [...(readers.get(input) ?? []), node.opType]);
  }
  /** What a Constant node becomes, or null to keep it. */
  const resizedConstant = (valueTensor: Uint8Array | null, output: string | undefined): { modulo: boolean; tensor: TensorValue } | null => {
    if (!valueTensor || output === undefined) return null;
    const tensor = parseTensor(valueTensor);
    const type = tensor.elementType;
    if (type !== "int64" && type !== "int32" && type !== "float" && type !== "bool") return null;
    const ops = readers.get(output) ?? [];
    if (ops.length === 0) return null;
    const { exportedPositions, positions } = resize;
    const values = Array.from(tensor.values as ArrayLike<number | bigint>, Number);
    const make = (dims: readonly number[], list: number[]): TensorValue => ({
      type,
      dims,
      data: type === "int64" ? BigInt64Array.from(list, BigInt) : type === "int32" ? Int32Array.from(list) : type === "float" ? Float32Array.from(list) : Uint8Array.from(list),
    });
    const integer = type === "int64" || type === "int32";
    if (integer && values.length === 1 && values[0] === exportedPositions && ops.every((op) => CAPACITY_ARITHMETIC.has(op))) {
      return { modulo: ops.includes("Mod"), tensor: make(tensor.dims, [positions]) };
    }
    if (integer && values.length === 1 && values[0] === -exportedPositions && ops.every((op) => op === "Slice")) return { modulo: false, tensor: make(tensor.dims, [-positions]) };
    if (integer && tensor.dims.length === 1 && values.length === exportedPositions && values.every((value, index) => value === index) && ops.every((op) => SLOT_ARITHMETIC.has(op))) {
      return { modulo: false, tensor: make([positions], Array.from({ length: positions }, (_, index) => index)) };
    }
    const ringAxes = tensor.dims.filter((dim) => dim === exportedPositions).length;
    if (ringAxes === 1 && values.length > 1 && values.every((value) => value === values[0])) {
      const dims = tensor.dims.map((dim) => (dim === exportedPositions ? positions : dim));
      return { modulo: false, tensor: make(dims, new Array<number>(dims.reduce((product, dim) => product * dim, 1)).fill(values[0]!)) };
    }
    return null;
  };

  const cacheNames = new Set(caches.flatMap(({ inputName, outputName }) => [inputName, outputName]));
  let capacities = 0;
  let shapes = 0;
  const fields: Uint8Array[] = [];
  for (const field of protobufFields(graph)) {
    if (field.number === GRAPH_NODE_FIELD) {
      const node = parseNode(field.payload);
      const resized = node.opType === "Constant" && (node.domain === "" || node.domain === "ai.onnx") ? resizedConstant(node.valueTensor, node.outputs[0]) : null;
      if (resized) {
        fields.push(lengthDelimited(GRAPH_NODE_FIELD, nodeProto("Constant", [], node.outputs, node.name, { value: { tensor: resized.tensor } })));
        if (resized.modulo) capacities++;
        continue;
      }
    }
    if (field.number === GRAPH_INPUT_FIELD || field.number === GRAPH_OUTPUT_FIELD) {
      const info = parseValueInfo(field.payload);
      if (cacheNames.has(info.name) && info.dims[resize.positionsAxis] === resize.exportedPositions) {
        info.dims[resize.positionsAxis] = resize.positions;
        fields.push(lengthDelimited(field.number, valueInfo(info.name, info.elementTypeCode, info.dims)));
        shapes++;
        continue;
      }
    }
    fields.push(graph.subarray(field.start, field.next));
  }
  if (capacities === 0 || shapes === 0) return null;
  return concatBytes([model.subarray(0, graphField.start), lengthDelimited(MODEL_GRAPH_FIELD, concatBytes(fields)), model.subarray(graphField.next)]);
}
