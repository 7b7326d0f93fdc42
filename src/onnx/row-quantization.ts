/**
 * Graph rewrite: dynamic int8 quantization per row instead of per tensor, so rows of a batch stop
 * depending on each other.
 *
 * `quantize_dynamic` (docs/pocket-tts.md §3.6) turns each constant-weight MatMul into
 *
 *   DynamicQuantizeLinear(A) → (A_q, A_scale, A_zp)      one scale and zero point for all of A
 *   MatMulInteger(A_q, W_q, A_zp, W_zp) → Cast → Mul(A_scale · W_scale)
 *
 * so with A = [B, K] every row's result depends on the other rows' range. The rewrite quantizes each row on
 * its own with the same operator, in a Scan over the rows, and applies each row's zero point as an exact
 * int32 correction (MatMulInteger takes a per-tensor zero point here):
 *
 *   Scan(row ↦ DynamicQuantizeLinear(row)) → A_q [B, K], scales [B], zero points [B]
 *   MatMulInteger(A_q, W_q, –, W_zp) − zp[B, 1] · Σ_k (W_q − W_zp)[k, :]  → Cast → Mul(scale[B, 1] · W_scale)
 *
 * At B = 1 the row is the tensor, the same kernel quantizes it and the integer sums are exact in any
 * order, so results equal the published graph's (the caller checks that on its session before using it).
 * Only 2-D activations are rewritten; a graph with any other use of a quantized zero point is left as it is.
 */
import { concatBytes } from "../audio/concat.ts";
import { lengthDelimitedField as lengthDelimited, protobufFields, varintField } from "../formats/protobuf.ts";
import { GRAPH_NODE_FIELD, MODEL_GRAPH_FIELD, parseNode, parseTensor, type OnnxNode } from "./proto.ts";

const GRAPH_INITIALIZER_FIELD = 5;
const GRAPH_NAME_FIELD = 2;
const GRAPH_INPUT_FIELD = 11;
const GRAPH_OUTPUT_FIELD = 12;
const NODE = { input: 1, output: 2, name: 3, opType: 4, attribute: 5 } as const;
const ATTRIBUTE = { name: 1, i: 3, g: 6, type: 20 } as const;
const ATTRIBUTE_INT = 2;
const ATTRIBUTE_GRAPH = 5;
const TENSOR = { dims: 1, dataType: 2, name: 8, rawData: 9 } as const;
const ELEMENT = { float: 1, uint8: 2, int32: 6, int64: 7 } as const;
const VALUE_INFO = { name: 1, type: 2 } as const;
const TYPE_TENSOR = 1;
const TENSOR_TYPE_ELEMENT = 1;

const encoder = new TextEncoder();
const text = (field: number, value: string) => lengthDelimited(field, encoder.encode(value));

function node(opType: string, inputs: readonly string[], outputs: readonly string[], name: string, attributes: Uint8Array[] = []): Uint8Array {
  return lengthDelimited(
    GRAPH_NODE_FIELD,
    concatBytes([...inputs.map((input) => text(NODE.input, input)), ...outputs.map((output) => text(NODE.output, output)), text(NODE.name, name), text(NODE.opType, opType), ...attributes.map((attribute) => lengthDelimited(NODE.attribute, attribute))]),
  );
}

function intAttribute(name: string, value: number): Uint8Array {
  return concatBytes([text(ATTRIBUTE.name, name), varintField(ATTRIBUTE.i, value), varintField(ATTRIBUTE.type, ATTRIBUTE_INT)]);
}

function graphAttribute(name: string, graph: Uint8Array): Uint8Array {
  return concatBytes([text(ATTRIBUTE.name, name), lengthDelimited(ATTRIBUTE.g, graph), varintField(ATTRIBUTE.type, ATTRIBUTE_GRAPH)]);
}

/** A tensor value info of unknown shape. */
function valueInfo(field: number, name: string, elementType: number): Uint8Array {
  return lengthDelimited(field, concatBytes([text(VALUE_INFO.name, name), lengthDelimited(VALUE_INFO.type, lengthDelimited(TYPE_TENSOR, varintField(TENSOR_TYPE_ELEMENT, elementType)))]));
}

function initializer(name: string, elementType: number, dims: readonly number[], data: ArrayBufferView): Uint8Array {
  return lengthDelimited(
    GRAPH_INITIALIZER_FIELD,
    concatBytes([...dims.map((dim) => varintField(TENSOR.dims, dim)), varintField(TENSOR.dataType, elementType), text(TENSOR.name, name), lengthDelimited(TENSOR.rawData, new Uint8Array(data.buffer, data.byteOffset, data.byteLength))]),
  );
}

/** The Scan body: one row [K] → DynamicQuantizeLinear → (q [K], scale [], zero point []). */
function rowQuantizerBody(): Uint8Array {
  return concatBytes([
    node("DynamicQuantizeLinear", ["row"], ["row_q", "row_scale", "row_zero_point"], "row_quantize"),
    text(GRAPH_NAME_FIELD, "row_quantizer"),
    valueInfo(GRAPH_INPUT_FIELD, "row", ELEMENT.float),
    valueInfo(GRAPH_OUTPUT_FIELD, "row_q", ELEMENT.uint8),
    valueInfo(GRAPH_OUTPUT_FIELD, "row_scale", ELEMENT.float),
    valueInfo(GRAPH_OUTPUT_FIELD, "row_zero_point", ELEMENT.uint8),
  ]);
}

export interface RowQuantizedModel {
  model: Uint8Array;
  /** DynamicQuantizeLinear nodes now quantizing per row. */
  rewritten: number;
}

/** The model with every per-tensor activation quantization made per row, or null when there is none to rewrite. */
export function quantizeRowsSeparately(model: Uint8Array): RowQuantizedModel | null {
  let graphField: { start: number; payloadStart: number; next: number } | undefined;
  for (const field of protobufFields(model)) if (field.number === MODEL_GRAPH_FIELD) graphField = field;
  if (!graphField) return null;
  const graph = model.subarray(graphField.payloadStart, graphField.next);

  const nodes: { node: OnnxNode }[] = [];
  const weights = new Map<string, ReturnType<typeof parseTensor>>();
  for (const field of protobufFields(graph)) {
    if (field.number === GRAPH_NODE_FIELD) nodes.push({ node: parseNode(field.payload) });
    if (field.number === GRAPH_INITIALIZER_FIELD) {
      const tensor = parseTensor(field.payload);
      if (tensor.elementType === "int8" || tensor.elementType === "uint8") weights.set(tensor.name, tensor);
    }
  }
  const consumers = new Map<string, OnnxNode[]>();
  for (const { node: each } of nodes) for (const input of each.inputs) consumers.set(input, [...(consumers.get(input) ?? []), each]);

  // Each quantizer whose zero point feeds only MatMulIntegers with a constant 2-D int8 weight.
  const quantizers = new Set<OnnxNode>();
  for (const { node: each } of nodes) {
    if (each.opType !== "DynamicQuantizeLinear" || each.domain !== "") continue;
    const users = consumers.get(each.outputs[2]!) ?? [];
    const rewritable = users.length > 0 && users.every((user) => user.opType === "MatMulInteger" && user.inputs[0] === each.outputs[0] && user.inputs[2] === each.outputs[2] && weights.get(user.inputs[1]!)?.dims.length === 2);
    if (!rewritable) return null;
    quantizers.add(each);
  }
  if (quantizers.size === 0) return null;

  const fields: Uint8Array[] = [];
  const added: Uint8Array[] = [initializer("row_quantization_column", ELEMENT.int64, [2], BigInt64Array.of(-1n, 1n))];
  const sumsMade = new Set<string>();
  let rewritten = 0;
  // The node list in order, each quantizer and each MatMulInteger it feeds replaced.
  let nodeIndex = 0;
  for (const field of protobufFields(graph)) {
    if (field.number !== GRAPH_NODE_FIELD) {
      fields.push(graph.subarray(field.start, field.next));
      continue;
    }
    const each = nodes[nodeIndex++]!.node;
    if (each.opType === "DynamicQuantizeLinear" && quantizers.has(each)) {
      const [input] = each.inputs;
      const [quantized, scale, zeroPoint] = each.outputs as [string, string, string];
      const prefix = `row_quantization_${rewritten++}`;
      fields.push(node("Scan", [input!], [quantized, `${prefix}_scales`, `${prefix}_zero_points`], `${prefix}_scan`, [graphAttribute("body", rowQuantizerBody()), intAttribute("num_scan_inputs", 1)]));
      fields.push(node("Reshape", [`${prefix}_scales`, "row_quantization_column"], [scale], `${prefix}_scale_column`));
      fields.push(node("Cast", [`${prefix}_zero_points`], [`${prefix}_zero_points_i32`], `${prefix}_zero_point_cast`, [intAttribute("to", ELEMENT.int32)]));
      fields.push(node("Reshape", [`${prefix}_zero_points_i32`, "row_quantization_column"], [`${zeroPoint}_rows_i32`], `${prefix}_zero_point_column`));
      continue;
    }
    const feeding = each.opType === "MatMulInteger" ? [...quantizers].find((candidate) => candidate.outputs[2] === each.inputs[2]) : undefined;
    if (feeding) {
      const [quantized, weightName, zeroPoint, weightZeroPoint] = each.inputs as [string, string, string, string | undefined];
      const output = each.outputs[0]!;
      const weight = weights.get(weightName)!;
      const sumName = `${weightName}_column_sums`;
      if (!sumsMade.has(sumName)) {
        sumsMade.add(sumName);
        const weightZero = weightZeroPoint ? Number(weights.get(weightZeroPoint)?.values[0] ?? 0) : 0;
        const [rows, columns] = weight.dims as [number, number];
        const sums = new Int32Array(columns);
        const values = weight.values as Int8Array | Uint8Array;
        for (let row = 0; row < rows; row++) for (let column = 0; column < columns; column++) sums[column]! += values[row * columns + column]! - weightZero;
        added.push(initializer(sumName, ELEMENT.int32, [1, columns], sums));
      }
      fields.push(node("MatMulInteger", [quantized, weightName, "", ...(weightZeroPoint ? [weightZeroPoint] : [])], [`${output}_uncorrected`], `${output}_matmul`));
      fields.push(node("Mul", [`${zeroPoint}_rows_i32`, sumName], [`${output}_zero_point_terms`], `${output}_zero_point_terms`));
      fields.push(node("Sub", [`${output}_uncorrected`, `${output}_zero_point_terms`], [output], `${output}_corrected`));
      continue;
    }
    fields.push(graph.subarray(field.start, field.next));
  }
  const newGraph = concatBytes([...fields, ...added]);
  return { model: concatBytes([model.subarray(0, graphField.start), lengthDelimited(MODEL_GRAPH_FIELD, newGraph), model.subarray(graphField.next)]), rewritten };
}
