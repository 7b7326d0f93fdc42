/** The files of a bundle: graphs by role and precision (each layout's names), the tokenizer, the voice folder. */
import { existsSync, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { parseNpyFloat32 } from "../../../formats/npy.ts";
import { BundleError, type GraphFile, type GraphPrecision, type PocketGraphs } from "./pocket-bundle.ts";

const VOICE_FOLDER_NAMES = ["voices", "embeddings"] as const;

export type GraphNaming = "kevinahm" | "sherpa-onnx";
const GRAPH_STEMS: Readonly<Record<GraphNaming, Record<keyof PocketGraphs, string>>> = {
  kevinahm: { textConditioner: "text_conditioner", voiceEncoder: "mimi_encoder", flowLmMain: "flow_lm_main", flowLmFlow: "flow_lm_flow", mimiDecoder: "mimi_decoder" },
  // docs/pocket-tts.md §3.4 renames.
  "sherpa-onnx": { textConditioner: "text_conditioner", voiceEncoder: "encoder", flowLmMain: "lm_main", flowLmFlow: "lm_flow", mimiDecoder: "decoder" },
};

function findGraph(directory: string, stem: string, naming: GraphNaming, precision: GraphPrecision): string | undefined {
  // KevinAHM writes `<stem>_int8.onnx`, sherpa `<stem>.int8.onnx` (§3.2, §3.4).
  const name = precision === "fp32" ? `${stem}.onnx` : naming === "kevinahm" ? `${stem}_int8.onnx` : `${stem}.int8.onnx`;
  const path = join(directory, name);
  return existsSync(path) ? path : undefined;
}

export function pickGraph(directory: string, stem: string, naming: GraphNaming, preferred: GraphPrecision): GraphFile | null {
  const other: GraphPrecision = preferred === "fp32" ? "int8" : "fp32";
  for (const precision of [preferred, other]) {
    const path = findGraph(directory, stem, naming, precision);
    if (path) return { path, precision };
  }
  return null;
}

export function requireGraphs(root: string, directory: string, naming: GraphNaming, precision: GraphPrecision): PocketGraphs {
  const stems = GRAPH_STEMS[naming];
  const required = (role: Exclude<keyof PocketGraphs, "voiceEncoder">): GraphFile => {
    const graph = pickGraph(directory, stems[role], naming, precision);
    if (!graph) throw new BundleError(root, `missing ${stems[role]}.onnx`);
    return graph;
  };
  return {
    textConditioner: required("textConditioner"),
    voiceEncoder: pickGraph(directory, stems.voiceEncoder, naming, precision),
    flowLmMain: required("flowLmMain"),
    flowLmFlow: required("flowLmFlow"),
    mimiDecoder: required("mimiDecoder"),
  };
}

export function requireFile(root: string, path: string): string {
  if (!existsSync(path)) throw new BundleError(root, `missing ${path}`);
  return path;
}

export function findVoicesDirectory(root: string): string | null {
  for (const name of VOICE_FOLDER_NAMES) {
    const path = join(root, name);
    if (existsSync(path) && statSync(path).isDirectory()) return path;
  }
  return null;
}

/** Parameter `flow_lm.bos_before_voice`, stored as float32 [1, 1, d_model] (§3.3). */
export async function readBosBeforeVoice(root: string, path: string, conditioningDim: number): Promise<Float32Array> {
  const npy = parseNpyFloat32(await readFile(requireFile(root, path)), path);
  if (npy.data.length !== conditioningDim) throw new BundleError(root, `${path} has shape [${npy.shape.join(", ")}], expected [1, 1, ${conditioningDim}]`);
  return npy.data;
}
