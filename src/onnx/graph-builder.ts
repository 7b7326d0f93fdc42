/**
 * Writing ONNX models: a graph built node by node in TypeScript and encoded as a ModelProto with the
 * protobuf field writers the project already has (formats/protobuf.ts). For graphs built at load time from
 * a bundle's own weights (models/pocket/flow-lm-batch/), not a general-purpose exporter: the standard
 * operator domain only, tensors of float, int8, uint8, int32, int64 and bool.
 */
import { concatBytes } from "../lib/concat.ts";
import { lengthDelimitedField as lengthDelimited, lengthDelimitedHeader } from "../formats/protobuf.ts";

/** onnx.proto TensorProto.DataType values. */
export const ElementType = { float: 1, uint8: 2, int8: 3, int32: 6, int64: 7, bool: 9 } as const;
export type ElementTypeName = keyof typeof ElementType;

/** A dimension: a fixed size, or a symbol shared by every value that uses it. */
export type Dim = number | string;

export type AttributeValue = number | readonly number[] | string | { float: number } | { tensor: TensorValue } | { graph: Uint8Array };

export interface TensorValue {
  type: ElementTypeName;
  dims: readonly number[];
  data: ArrayBufferView;
}

// onnx.proto field numbers of the messages written here.
const MODEL = { irVersion: 1, producerName: 2, graph: 7, opsetImport: 8 } as const;
const OPSET = { domain: 1, version: 2 } as const;
const GRAPH = { node: 1, name: 2, initializer: 5, input: 11, output: 12 } as const;
const NODE = { input: 1, output: 2, name: 3, opType: 4, attribute: 5 } as const;
const ATTRIBUTE = { name: 1, f: 2, i: 3, s: 4, t: 5, g: 6, ints: 8, type: 20 } as const;
const ATTRIBUTE_TYPE = { float: 1, int: 2, string: 3, tensor: 4, graph: 5, ints: 7 } as const;
const TENSOR = { dims: 1, dataType: 2, name: 8, rawData: 9 } as const;
const VALUE_INFO = { name: 1, type: 2 } as const;
const TYPE_TENSOR = 1;
const TENSOR_TYPE = { element: 1, shape: 2 } as const;
const SHAPE_DIM = 1;
const DIM = { value: 1, param: 2 } as const;

/** IR version 8 (ONNX 1.10+), read by every onnxruntime this project supports. */
const IR_VERSION = 8;

const encoder = new TextEncoder();

/** A varint of any int64, negatives as ten-byte two's complement (onnx.proto's int64 fields). */
function int64Varint(value: number): number[] {
  let rest = BigInt.asUintN(64, BigInt(value));
  const bytes: number[] = [];
  while (rest >= 0x80n) {
    bytes.push(Number(rest & 0x7fn) | 0x80);
    rest >>= 7n;
  }
  bytes.push(Number(rest));
  return bytes;
}

function varint(fieldNumber: number, value: number): Uint8Array {
  return Uint8Array.from([...int64Varint(fieldNumber * 8), ...int64Varint(value)]);
}

function text(fieldNumber: number, value: string): Uint8Array {
  return lengthDelimited(fieldNumber, encoder.encode(value));
}

function fixed32Float(fieldNumber: number, value: number): Uint8Array {
  const bytes = new Uint8Array(5);
  bytes[0] = fieldNumber * 8 + 5;
  new DataView(bytes.buffer).setFloat32(1, value, true);
  return bytes;
}

/**
 * An encoded message as the pieces it is made of, concatenated once by whoever needs the bytes: a model's
 * weights (76 MB for the batched FlowLM step) are then copied once, not once per level of nesting (six
 * times, 0.6 s and as many transient copies at load).
 */
type Pieces = Uint8Array[];

function piecesLength(pieces: Pieces): number {
  let length = 0;
  for (const piece of pieces) length += piece.byteLength;
  return length;
}

/** A length-delimited field around `pieces`, without copying them. */
function lengthDelimitedPieces(fieldNumber: number, pieces: Pieces): Pieces {
  return [lengthDelimitedHeader(fieldNumber, piecesLength(pieces)), ...pieces];
}

function tensorProtoPieces(name: string, tensor: TensorValue): Pieces {
  const { data } = tensor;
  return [
    ...tensor.dims.map((dim) => varint(TENSOR.dims, dim)),
    varint(TENSOR.dataType, ElementType[tensor.type]),
    text(TENSOR.name, name),
    ...lengthDelimitedPieces(TENSOR.rawData, [new Uint8Array(data.buffer, data.byteOffset, data.byteLength)]),
  ];
}

/** A TensorProto with raw data. */
export function tensorProto(name: string, tensor: TensorValue): Uint8Array {
  return concatBytes(tensorProtoPieces(name, tensor));
}

function attributeProto(name: string, value: AttributeValue): Uint8Array {
  const parts = [text(ATTRIBUTE.name, name)];
  if (typeof value === "number") parts.push(varint(ATTRIBUTE.i, value), varint(ATTRIBUTE.type, ATTRIBUTE_TYPE.int));
  else if (typeof value === "string") parts.push(text(ATTRIBUTE.s, value), varint(ATTRIBUTE.type, ATTRIBUTE_TYPE.string));
  else if (Array.isArray(value)) parts.push(...value.map((each) => varint(ATTRIBUTE.ints, each)), varint(ATTRIBUTE.type, ATTRIBUTE_TYPE.ints));
  else if ("float" in (value as object)) parts.push(fixed32Float(ATTRIBUTE.f, (value as { float: number }).float), varint(ATTRIBUTE.type, ATTRIBUTE_TYPE.float));
  else if ("graph" in (value as object)) parts.push(lengthDelimited(ATTRIBUTE.g, (value as { graph: Uint8Array }).graph), varint(ATTRIBUTE.type, ATTRIBUTE_TYPE.graph));
  else parts.push(lengthDelimited(ATTRIBUTE.t, tensorProto("", (value as { tensor: TensorValue }).tensor)), varint(ATTRIBUTE.type, ATTRIBUTE_TYPE.tensor));
  return concatBytes(parts);
}

/** A tensor ValueInfoProto; without `dims` its shape is left unknown. */
export function valueInfoProto(name: string, type: ElementTypeName, dims?: readonly Dim[]): Uint8Array {
  const tensorType = [varint(TENSOR_TYPE.element, ElementType[type])];
  if (dims) {
    const shape = dims.map((dim) => lengthDelimited(SHAPE_DIM, typeof dim === "number" ? varint(DIM.value, dim) : text(DIM.param, dim)));
    tensorType.push(lengthDelimited(TENSOR_TYPE.shape, concatBytes(shape)));
  }
  return concatBytes([text(VALUE_INFO.name, name), lengthDelimited(VALUE_INFO.type, lengthDelimited(TYPE_TENSOR, concatBytes(tensorType)))]);
}

/** A NodeProto of the standard domain. */
export function nodeProto(opType: string, inputs: readonly string[], outputs: readonly string[], name: string, attributes: Record<string, AttributeValue> = {}): Uint8Array {
  return concatBytes([
    ...inputs.map((input) => text(NODE.input, input)),
    ...outputs.map((output) => text(NODE.output, output)),
    text(NODE.name, name),
    text(NODE.opType, opType),
    ...Object.entries(attributes).map(([attribute, value]) => lengthDelimited(NODE.attribute, attributeProto(attribute, value))),
  ]);
}

/**
 * A graph under construction. `op` adds a node and returns its output names, fresh unless given, so graph
 * code reads as expressions: `const y = g.op("Add", [x, g.op("Mul", [a, b])[0]])[0]`.
 */
export class OnnxGraphBuilder {
  readonly #nodes: Uint8Array[] = [];
  readonly #initializers: Pieces[] = [];
  readonly #inputs: Uint8Array[] = [];
  readonly #outputs: Uint8Array[] = [];
  readonly #constants = new Map<string, string>();
  #counter = 0;

  constructor(readonly name: string) {}

  /** A graph input; without `dims` its shape is left unknown (a Scan body's per-iteration slice). */
  input(name: string, type: ElementTypeName, dims?: readonly Dim[]): string {
    this.#inputs.push(valueInfoProto(name, type, dims));
    return name;
  }

  /** Declares `value` a graph output under `name` (through an Identity when it already has another name). */
  output(value: string, name: string, type: ElementTypeName, dims?: readonly Dim[]): void {
    if (value !== name) this.op("Identity", [value], {}, [name]);
    this.#outputs.push(valueInfoProto(name, type, dims));
  }

  /** A weight or constant tensor; `name` is prefixed to stay clear of node outputs. */
  initializer(name: string, tensor: TensorValue): string {
    const unique = `w/${name}`;
    // Kept as pieces: the tensor's data is copied only when the model is encoded.
    this.#initializers.push(lengthDelimitedPieces(GRAPH.initializer, tensorProtoPieces(unique, tensor)));
    return unique;
  }

  /** A small constant, made once per distinct value and type. */
  constant(type: "float" | "int64", values: readonly number[], dims: readonly number[] = [values.length]): string {
    const key = `${type}:${dims.join("x")}:${values.join(",")}`;
    let name = this.#constants.get(key);
    if (!name) {
      const data = type === "float" ? Float32Array.from(values) : BigInt64Array.from(values, (value) => BigInt(value));
      name = this.initializer(`constant_${this.#constants.size}`, { type, dims, data });
      this.#constants.set(key, name);
    }
    return name;
  }

  /** A scalar constant (dims []). */
  scalar(type: "float" | "int64", value: number): string {
    return this.constant(type, [value], []);
  }

  op(opType: string, inputs: readonly string[], attributes: Record<string, AttributeValue> = {}, outputs?: readonly string[], outputCount = 1): string[] {
    const id = this.#counter++;
    const names = outputs ?? Array.from({ length: outputCount }, (_, index) => `${opType.toLowerCase()}_${id}${outputCount > 1 ? `_${index}` : ""}`);
    this.#nodes.push(lengthDelimited(GRAPH.node, nodeProto(opType, inputs, names, `${opType}_${id}`, attributes)));
    return [...names];
  }

  /** One-output shorthand of `op`. */
  apply(opType: string, inputs: readonly string[], attributes: Record<string, AttributeValue> = {}): string {
    return this.op(opType, inputs, attributes)[0]!;
  }

  #graphPieces(): Pieces {
    return [
      ...this.#nodes,
      text(GRAPH.name, this.name),
      ...this.#initializers.flat(),
      ...this.#inputs.map((input) => lengthDelimited(GRAPH.input, input)),
      ...this.#outputs.map((output) => lengthDelimited(GRAPH.output, output)),
    ];
  }

  /** This graph as a GraphProto (also a subgraph attribute's value: `{ graph: g.toGraph() }`). */
  toGraph(): Uint8Array {
    return concatBytes(this.#graphPieces());
  }

  /** The encoded ModelProto, importing the standard domain at `opset`. */
  toModel(opset: number, producer = "voxedge"): Uint8Array {
    return concatBytes([
      varint(MODEL.irVersion, IR_VERSION),
      text(MODEL.producerName, producer),
      ...lengthDelimitedPieces(MODEL.graph, this.#graphPieces()),
      lengthDelimited(MODEL.opsetImport, concatBytes([text(OPSET.domain, ""), varint(OPSET.version, opset)])),
    ]);
  }
}
