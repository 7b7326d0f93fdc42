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
import { concatBytes } from "../lib/concat.ts";
import { lengthDelimitedField as lengthDelimited, protobufFields } from "../formats/protobuf.ts";
import { ElementType, nodeProto, OnnxGraphBuilder, tensorProto, type AttributeValue, type TensorValue } from "./graph-builder.ts";
import { GRAPH_NODE_FIELD, MODEL_GRAPH_FIELD, parseNode, parseTensor, type OnnxNode } from "./proto.ts";

const GRAPH_INITIALIZER_FIELD = 5;

function node(opType: string, inputs: readonly string[], outputs: readonly string[], name: string, attributes: Record<string, AttributeValue> = {}): Uint8Array {
  return lengthDelimited(GRAPH_NODE_FIELD, nodeProto(opType, inputs, outputs, name, attributes));
}

function initializer(name: string, tensor: TensorValue): Uint8Array {
  return lengthDelimited(GRAPH_INITIALIZER_FIELD, tensorProto(name, tensor));
}

/** The Scan body: one row [K] → DynamicQuantizeLinear → (q [K], scale [], zero point []). */
function rowQuantizerBody(): Uint8Array {
  const body = new OnnxGraphBuilder("row_quantizer");
  body.input("row", "float");
  body.op("DynamicQuantizeLinear", ["row"], {}, ["row_q", "row_scale", "row_zero_point"]);
  body.output("row_q", "row_q", "uint8");
  body.output("row_scale", "row_scale", "float");
  body.output("row_zero_point", "row_zero_point", "uint8");
  return body.toGraph();
}

/**
 * Σ_k (W − W_zp)[k, :] of a [rows, columns] int8 or uint8 weight: a row quantized with zero point zp
 * contributes −zp times this to its int32 MatMulInteger result.
 */
export function zeroPointColumnSums(weight: Int8Array | Uint8Array, rows: number, columns: number, weightZeroPoint: number): Int32Array {
  const sums = new Int32Array(columns);
  for (let row = 0; row < rows; row++) for (let column = 0; column < columns; column++) sums[column]! += weight[row * columns + column]! - weightZeroPoint;
  return sums;
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
  const added: Uint8Array[] = [initializer("row_quantization_column", { type: "int64", dims: [2], data: BigInt64Array.of(-1n, 1n) })];
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
      fields.push(node("Scan", [input!], [quantized, `${prefix}_scales`, `${prefix}_zero_points`], `${prefix}_scan`, { body: { graph: rowQuantizerBody() }, num_scan_inputs: 1 }));
      fields.push(node("Reshape", [`${prefix}_scales`, "row_quantization_column"], [scale], `${prefix}_scale_column`));
      fields.push(node("Cast", [`${prefix}_zero_points`], [`${prefix}_zero_points_i32`], `${prefix}_zero_point_cast`, { to: ElementType.int32 }));
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
        added.push(initializer(sumName, { type: "int32", dims: [1, columns], data: zeroPointColumnSums(weight.values as Int8Array | Uint8Array, rows, columns, weightZero) }));
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
