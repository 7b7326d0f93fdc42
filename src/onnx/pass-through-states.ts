/**
 * Graph rewrite: state inputs that a graph only hands back unchanged (`out_state = Identity(state)`, and
 * nothing else reads `state`) are removed, input, output and Identity together.
 *
 * The exported Mimi decoder carries the whole MimiModel's streaming state, including the encoder's, which
 * decoding never touches (docs/pocket-tts.md §3.1): 8.4 of its 16.5 MB per stream at full size (the
 * encoder transformer's two KV caches, [2, 1, 8, 1000, 64] each), fed on every call and copied into a
 * fresh output on every call. Without them a stream's decoder state is half the size and a decode makes
 * half the garbage. The graph's arithmetic is untouched.
 */
import { concatBytes } from "../lib/concat.ts";
import { lengthDelimitedField as lengthDelimited, protobufFields } from "../formats/protobuf.ts";
import { GRAPH_INPUT_FIELD, GRAPH_NODE_FIELD, GRAPH_OUTPUT_FIELD, MODEL_GRAPH_FIELD, parseNode, parseValueInfo, type OnnxNode } from "./proto.ts";

export interface StatePair {
  inputName: string;
  outputName: string;
}

export interface PassThroughFreeModel {
  model: Uint8Array;
  /** The input names of the states removed. */
  removed: Set<string>;
}

/** The model without its pass-through states, or null when it has none. */
export function dropPassThroughStates(model: Uint8Array, states: readonly StatePair[]): PassThroughFreeModel | null {
  let graphField: { start: number; payloadStart: number; next: number } | undefined;
  for (const field of protobufFields(model)) if (field.number === MODEL_GRAPH_FIELD) graphField = field;
  if (!graphField) return null;
  const graph = model.subarray(graphField.payloadStart, graphField.next);

  const producers = new Map<string, OnnxNode>();
  const readers = new Map<string, number>();
  for (const field of protobufFields(graph)) {
    if (field.number !== GRAPH_NODE_FIELD) continue;
    const node = parseNode(field.payload);
    for (const output of node.outputs) producers.set(output, node);
    for (const input of node.inputs) readers.set(input, (readers.get(input) ?? 0) + 1);
  }
  const removedNodes = new Set<OnnxNode>();
  const removedInputs = new Set<string>();
  const removedOutputs = new Set<string>();
  for (const { inputName, outputName } of states) {
    const producer = producers.get(outputName);
    if (!producer || producer.opType !== "Identity" || (producer.domain !== "" && producer.domain !== "ai.onnx") || producer.inputs[0] !== inputName || readers.get(inputName) !== 1) continue;
    removedNodes.add(producer);
    removedInputs.add(inputName);
    removedOutputs.add(outputName);
  }
  if (removedInputs.size === 0) return null;

  const kept: Uint8Array[] = [];
  for (const field of protobufFields(graph)) {
    if (field.number === GRAPH_NODE_FIELD && removedNodes.has(producers.get(parseNode(field.payload).outputs[0]!)!)) continue;
    if (field.number === GRAPH_INPUT_FIELD && removedInputs.has(parseValueInfo(field.payload).name)) continue;
    if (field.number === GRAPH_OUTPUT_FIELD && removedOutputs.has(parseValueInfo(field.payload).name)) continue;
    kept.push(graph.subarray(field.start, field.next));
  }
  return { model: concatBytes([model.subarray(0, graphField.start), lengthDelimited(MODEL_GRAPH_FIELD, concatBytes(kept)), model.subarray(graphField.next)]), removed: removedInputs };
}
