/**
 * Reading .onnx files without a session: the declared graph inputs and outputs, and the weights (initializers,
 * Constant nodes, node wiring), straight from the protobuf; one set of onnx.proto field numbers for these
 * readers and the graph rewrite (cache-writes.ts).
 */
import { open, readFile, type FileHandle } from "node:fs/promises";
import { protobufFields, readFieldHeader, readVarint, WIRE_FIXED32, WIRE_LENGTH_DELIMITED, WIRE_VARINT, type ProtobufField, type ProtobufFieldHeader } from "../formats/protobuf.ts";

export interface OnnxGraphInput {
  name: string;
  /** ONNX TensorProto.DataType name in lower case: float, int64, bool, … */
  elementType: string;
  /** The TensorProto.DataType number itself (0: not declared). */
  elementTypeCode: number;
  /** A number for a fixed dimension, the symbol's name for a symbolic one. */
  dims: (number | string)[];
}

/** onnx.proto TensorProto.DataType values. */
const ELEMENT_TYPES: Readonly<Record<number, string>> = {
  1: "float",
  2: "uint8",
  3: "int8",
  4: "uint16",
  5: "int16",
  6: "int32",
  7: "int64",
  8: "string",
  9: "bool",
  10: "float16",
  11: "double",
  12: "uint32",
  13: "uint64",
  16: "bfloat16",
};

/** Field numbers in onnx.proto (also used by the graph rewrite, cache-writes.ts). */
export const MODEL_GRAPH_FIELD = 7;
export const GRAPH_INPUT_FIELD = 11;
export const GRAPH_OUTPUT_FIELD = 12;
export const VALUE_INFO_NAME_FIELD = 1;
export const VALUE_INFO_TYPE_FIELD = 2;
export const TYPE_TENSOR_FIELD = 1;
export const TENSOR_TYPE_ELEMENT_FIELD = 1;
export const TENSOR_TYPE_SHAPE_FIELD = 2;
export const SHAPE_DIM_FIELD = 1;
export const DIM_VALUE_FIELD = 1;
export const DIM_PARAM_FIELD = 2;

const READ_WINDOW_BYTES = 1 << 16;

/**
 * The graph's declared inputs (`ModelProto.graph.input`). Initializers (the weights) are skipped by
 * length, so a 1.2 GB graph costs a few small reads per node and weight rather than a full read. The
 * January and sherpa layouts have no manifest, so this is where their state shapes come from (docs/pocket-tts.md §3.2, §3.4).
 */
export async function readOnnxGraphInputs(path: string): Promise<OnnxGraphInput[]> {
  const handle = await open(path, "r");
  try {
    const reader = new PositionedReader(handle, (await handle.stat()).size);
    const inputs: OnnxGraphInput[] = [];
    for await (const field of reader.fields(0, reader.sizeBytes)) {
      if (field.number !== MODEL_GRAPH_FIELD || field.wireType !== WIRE_LENGTH_DELIMITED) continue;
      for await (const graphField of reader.fields(field.payloadStart, field.next)) {
        if (graphField.number !== GRAPH_INPUT_FIELD || graphField.wireType !== WIRE_LENGTH_DELIMITED) continue;
        inputs.push(parseValueInfo(await reader.bytes(graphField.payloadStart, graphField.next - graphField.payloadStart)));
      }
    }
    if (inputs.length === 0) throw new Error("no graph inputs found");
    return inputs;
  } catch (error) {
    throw new Error(`${path} is not a readable ONNX model: ${(error as Error).message}`, { cause: error });
  } finally {
    await handle.close();
  }
}

/** Walks the fields of a message stored in a file, reading only field headers and what the caller asks for. */
class PositionedReader {
  private window = new Uint8Array(0);
  private windowStart = 0;

  constructor(
    private readonly handle: FileHandle,
    readonly sizeBytes: number,
  ) {}

  async bytes(position: number, length: number): Promise<Uint8Array> {
    if (position < this.windowStart || position + length > this.windowStart + this.window.length) {
      const windowBytes = Math.min(Math.max(length, READ_WINDOW_BYTES), this.sizeBytes - position);
      const buffer = new Uint8Array(windowBytes);
      let filled = 0;
      while (filled < windowBytes) {
        const { bytesRead } = await this.handle.read(buffer, filled, windowBytes - filled, position + filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      this.window = buffer.subarray(0, filled);
      this.windowStart = position;
      if (filled < length) throw new Error(`file ends at byte ${position + filled}, needed ${position + length}`);
    }
    return this.window.subarray(position - this.windowStart, position - this.windowStart + length);
  }

  /** Fields of the message occupying [start, end) of the file, with absolute offsets. */
  async *fields(start: number, end: number): AsyncGenerator<ProtobufFieldHeader> {
    let position = start;
    while (position < end) {
      // A tag and a length are at most 10 bytes each.
      const field = readFieldHeader(await this.bytes(position, Math.min(20, end - position)), 0);
      const absolute = { ...field, payloadStart: position + field.payloadStart, next: position + field.next };
      if (absolute.next > end) throw new Error(`field ${field.number} at byte ${position} runs past its parent's end ${end}`);
      position = absolute.next;
      yield absolute;
    }
  }
}

/** A tensor ValueInfoProto (a graph input or output); a dimension with neither value nor name is "?". */
export function parseValueInfo(bytes: Uint8Array): OnnxGraphInput {
  const input: OnnxGraphInput = { name: "", elementType: "undefined", elementTypeCode: 0, dims: [] };
  const text = new TextDecoder();
  for (const field of protobufFields(bytes)) {
    if (field.number === VALUE_INFO_NAME_FIELD) input.name = text.decode(field.payload);
    if (field.number !== VALUE_INFO_TYPE_FIELD) continue;
    for (const typeField of protobufFields(field.payload)) {
      if (typeField.number !== TYPE_TENSOR_FIELD) continue;
      for (const tensorField of protobufFields(typeField.payload)) {
        if (tensorField.number === TENSOR_TYPE_ELEMENT_FIELD) {
          input.elementTypeCode = tensorField.value;
          input.elementType = ELEMENT_TYPES[tensorField.value] ?? `type${tensorField.value}`;
        }
        if (tensorField.number !== TENSOR_TYPE_SHAPE_FIELD) continue;
        for (const dimField of protobufFields(tensorField.payload)) {
          if (dimField.number !== SHAPE_DIM_FIELD) continue;
          let dim: number | string = "?";
          for (const valueField of protobufFields(dimField.payload)) {
            if (valueField.number === DIM_VALUE_FIELD) dim = valueField.value;
            if (valueField.number === DIM_PARAM_FIELD) dim = text.decode(valueField.payload);
          }
          input.dims.push(dim);
        }
      }
    }
  }
  return input;
}

// ---------------------------------------------------------------------------------------------------
// Weights and node wiring, for code that runs a graph's math itself (the WGSL Mimi decoder, §4)

/** An initializer (or Constant node value): `values` decoded to numbers of its element type. */
export interface OnnxInitializer {
  name: string;
  elementType: string;
  dims: number[];
  /** float → Float32Array, int8 → Int8Array, uint8/bool → Uint8Array, int32 → Int32Array, int64 → BigInt64Array. */
  values: Float32Array | Int8Array | Uint8Array | Int32Array | BigInt64Array;
}

export interface OnnxNode {
  name: string;
  opType: string;
  /** Operator set domain: "" (or "ai.onnx") for the standard operators. */
  domain: string;
  inputs: string[];
  outputs: string[];
  /** The node's string attributes by name (e.g. ScatterND's `reduction`). */
  stringAttributes: Map<string, string>;
  /** The encoded TensorProto of a `value` attribute (Constant nodes), decoded only by whoever needs it. */
  valueTensor: Uint8Array | null;
}

export interface OnnxGraphWeights {
  /** Initializers and the tensor values of Constant nodes, by the name of the value they define. */
  initializers: Map<string, OnnxInitializer>;
  nodes: OnnxNode[];
}

/** More onnx.proto field numbers: GraphProto, NodeProto, AttributeProto, TensorProto. */
export const GRAPH_NODE_FIELD = 1;
const GRAPH_INITIALIZER_FIELD = 5;
const NODE_INPUT_FIELD = 1;
const NODE_OUTPUT_FIELD = 2;
const NODE_NAME_FIELD = 3;
const NODE_OP_TYPE_FIELD = 4;
const NODE_ATTRIBUTE_FIELD = 5;
const NODE_DOMAIN_FIELD = 7;
const ATTRIBUTE_NAME_FIELD = 1;
const ATTRIBUTE_STRING_FIELD = 4;
const ATTRIBUTE_TENSOR_FIELD = 5;
const TENSOR_DIMS_FIELD = 1;
const TENSOR_DATA_TYPE_FIELD = 2;
const TENSOR_FLOAT_DATA_FIELD = 4;
const TENSOR_INT32_DATA_FIELD = 5;
const TENSOR_INT64_DATA_FIELD = 7;
const TENSOR_NAME_FIELD = 8;
const TENSOR_RAW_DATA_FIELD = 9;
const TENSOR_EXTERNAL_DATA_FIELD = 13;

/**
 * Every initializer and node of a graph whose weights are embedded (the exports of §3 are single files).
 * Reads the whole file: this is for decoders that upload the weights elsewhere (the WGSL Mimi decoder).
 */
export async function readOnnxGraphWeights(path: string): Promise<OnnxGraphWeights> {
  return onnxGraphWeights(new Uint8Array(await readFile(path)), path);
}

/** readOnnxGraphWeights of a model already in memory (`source` names it in errors). */
export function onnxGraphWeights(bytes: Uint8Array, source: string): OnnxGraphWeights {
  try {
    const initializers = new Map<string, OnnxInitializer>();
    const nodes: OnnxNode[] = [];
    for (const field of protobufFields(bytes)) {
      if (field.number !== MODEL_GRAPH_FIELD || field.wireType !== WIRE_LENGTH_DELIMITED) continue;
      for (const graphField of protobufFields(field.payload)) {
        if (graphField.wireType !== WIRE_LENGTH_DELIMITED) continue;
        if (graphField.number === GRAPH_INITIALIZER_FIELD) {
          const tensor = parseTensor(graphField.payload);
          initializers.set(tensor.name, tensor);
        } else if (graphField.number === GRAPH_NODE_FIELD) {
          const node = parseNode(graphField.payload);
          nodes.push(node);
          if (node.opType === "Constant" && node.valueTensor && node.outputs[0]) initializers.set(node.outputs[0], { ...parseTensor(node.valueTensor), name: node.outputs[0] });
        }
      }
    }
    return { initializers, nodes };
  } catch (error) {
    throw new Error(`${source} is not a readable ONNX model: ${(error as Error).message}`, { cause: error });
  }
}

/** The operator types a model's main graph uses. */
export function operatorsOf(model: Uint8Array): Set<string> {
  const operators = new Set<string>();
  for (const field of protobufFields(model)) {
    if (field.number !== MODEL_GRAPH_FIELD || field.wireType !== WIRE_LENGTH_DELIMITED) continue;
    for (const graphField of protobufFields(field.payload)) if (graphField.number === GRAPH_NODE_FIELD) operators.add(parseNode(graphField.payload).opType);
  }
  return operators;
}

/** A NodeProto: names, operator, domain, string attributes, and a Constant's value still encoded. */
export function parseNode(bytes: Uint8Array): OnnxNode {
  const text = new TextDecoder();
  const node: OnnxNode = { name: "", opType: "", domain: "", inputs: [], outputs: [], stringAttributes: new Map(), valueTensor: null };
  for (const field of protobufFields(bytes)) {
    if (field.number === NODE_INPUT_FIELD) node.inputs.push(text.decode(field.payload));
    else if (field.number === NODE_OUTPUT_FIELD) node.outputs.push(text.decode(field.payload));
    else if (field.number === NODE_NAME_FIELD) node.name = text.decode(field.payload);
    else if (field.number === NODE_OP_TYPE_FIELD) node.opType = text.decode(field.payload);
    else if (field.number === NODE_DOMAIN_FIELD) node.domain = text.decode(field.payload);
    else if (field.number === NODE_ATTRIBUTE_FIELD) {
      let attributeName = "";
      let string: string | null = null;
      let tensor: Uint8Array | null = null;
      for (const attributeField of protobufFields(field.payload)) {
        if (attributeField.number === ATTRIBUTE_NAME_FIELD) attributeName = text.decode(attributeField.payload);
        if (attributeField.number === ATTRIBUTE_STRING_FIELD) string = text.decode(attributeField.payload);
        if (attributeField.number === ATTRIBUTE_TENSOR_FIELD) tensor = attributeField.payload;
      }
      if (string !== null) node.stringAttributes.set(attributeName, string);
      if (attributeName === "value" && tensor) node.valueTensor = tensor;
    }
  }
  return node;
}

/** Packed (or, for old writers, one-per-field) repeated varints. */
function repeatedVarints(field: ProtobufField): number[] {
  if (field.wireType === WIRE_VARINT) return [field.value];
  const values: number[] = [];
  for (let offset = 0; offset < field.payload.length; ) {
    const varint = readVarint(field.payload, offset);
    values.push(varint.value);
    offset = varint.next;
  }
  return values;
}

export function parseTensor(bytes: Uint8Array): OnnxInitializer {
  const text = new TextDecoder();
  let name = "";
  let dataType = 0;
  const dims: number[] = [];
  let raw: Uint8Array | null = null;
  const floats: number[] = [];
  const ints: number[] = [];
  for (const field of protobufFields(bytes)) {
    if (field.number === TENSOR_DIMS_FIELD) dims.push(...repeatedVarints(field));
    else if (field.number === TENSOR_DATA_TYPE_FIELD) dataType = field.value;
    else if (field.number === TENSOR_NAME_FIELD) name = text.decode(field.payload);
    else if (field.number === TENSOR_RAW_DATA_FIELD) raw = field.payload;
    else if (field.number === TENSOR_FLOAT_DATA_FIELD) {
      if (field.wireType === WIRE_FIXED32) floats.push(new DataView(bytes.buffer, bytes.byteOffset + field.payloadStart, 4).getFloat32(0, true));
      else {
        const view = new DataView(field.payload.buffer, field.payload.byteOffset, field.payload.byteLength);
        for (let offset = 0; offset + 4 <= field.payload.byteLength; offset += 4) floats.push(view.getFloat32(offset, true));
      }
    } else if (field.number === TENSOR_INT32_DATA_FIELD || field.number === TENSOR_INT64_DATA_FIELD) ints.push(...repeatedVarints(field));
    else if (field.number === TENSOR_EXTERNAL_DATA_FIELD) throw new Error(`tensor '${name}' keeps its data in an external file, which is not supported`);
  }
  const elementType = ELEMENT_TYPES[dataType] ?? `type${dataType}`;
  const count = dims.reduce((product, dim) => product * dim, 1);
  const values = tensorValues(elementType, count, raw, floats, ints);
  if (values.length !== count) throw new Error(`tensor '${name}' [${dims.join(", ")}] holds ${values.length} values`);
  return { name, elementType, dims, values };
}

function tensorValues(elementType: string, count: number, raw: Uint8Array | null, floats: number[], ints: number[]): OnnxInitializer["values"] {
  // raw_data is little-endian and not necessarily aligned inside the file: copy it out.
  const rawCopy = raw ? raw.slice().buffer : null;
  switch (elementType) {
    case "float":
      return rawCopy ? new Float32Array(rawCopy) : Float32Array.from(floats);
    case "int8":
      // int8 values live in int32_data when not raw (onnx.proto), as two's-complement varints.
      return rawCopy ? new Int8Array(rawCopy) : Int8Array.from(ints);
    case "uint8":
    case "bool":
      return rawCopy ? new Uint8Array(rawCopy) : Uint8Array.from(ints);
    case "int32":
      return rawCopy ? new Int32Array(rawCopy) : Int32Array.from(ints);
    case "int64":
      return rawCopy ? new BigInt64Array(rawCopy) : BigInt64Array.from(ints, (value) => BigInt.asIntN(64, BigInt(value)));
    default:
      throw new Error(`initializers of type ${elementType} are not supported (${count} values)`);
  }
}
