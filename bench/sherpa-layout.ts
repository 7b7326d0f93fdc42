/**
 * A KevinAHM-layout Pocket TTS bundle (bundle.json or the January folder: five graphs + tokenizer.model)
 * rewritten in sherpa-onnx's layout (docs/pocket-tts.md §3.4), for bench/sherpa-compare.ts:
 * - graphs renamed: flow_lm_main → lm_main, flow_lm_flow → lm_flow, mimi_encoder → encoder,
 *   mimi_decoder → decoder, text_conditioner unchanged; `_int8.onnx` → `.int8.onnx`. Graphs are symlinked,
 *   not copied (the real lm_main is 300 MB), unless one has to be patched (below);
 * - vocab.json ({piece: id}) and token_scores.json ({piece: score}) for all pieces, byte pieces included,
 *   written from tokenizer.model's protobuf as sherpa's convert_tokenizer.py does;
 * - a reference voice WAV (24 kHz mono 16-bit PCM; sherpa takes the voice as audio, not as a voice state).
 *
 * sherpa-onnx's C++ loop hard-codes FlowLM's d_model: every AR step feeds `text_embeddings` as an empty
 * [1, 0, 1024] tensor (offline-tts-pocket-impl.h). A graph whose text_embeddings input is declared
 * [1, n, D] with D ≠ 1024 (the tiny fixture: D = 64) is rejected by onnxruntime on the first AR step. With
 * `relaxTextEmbeddingDim`, the copy of lm_main.onnx in the sherpa folder declares that axis symbolic instead
 * (only the declared input shape changes, no node or weight), so sherpa's empty tensor passes the input check.
 * Real 1024-wide bundles never need this.
 *
 *   bun bench/sherpa-layout.ts [--model <bundle-dir>] [--out <dir>] [--precision fp32|int8] [--voice-seconds 5.04]
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { loadPocketBundle } from "../src/models/pocket/bundle/load.ts";
import type { GraphFile, GraphPrecision, PocketBundle } from "../src/models/pocket/bundle/pocket-bundle.ts";
import { syntheticVoice } from "./pocket-timing.ts";
import { concatBytes } from "../src/lib/concat.ts";
import { lengthDelimitedField, protobufFields, WIRE_FIXED32, WIRE_LENGTH_DELIMITED } from "../src/formats/protobuf.ts";

/** The width sherpa-onnx 1.13.x assumes for FlowLM conditioning rows (its empty AR text tensor). */
export const SHERPA_HARD_CODED_CONDITIONING_DIM = 1024;

export interface SherpaLayout {
  directory: string;
  /** Paths as sherpa-onnx-node's `OfflineTtsPocketModelConfig` names them. */
  pocket: { lmMain: string; lmFlow: string; encoder: string; decoder: string; textConditioner: string; vocabJson: string; tokenScoresJson: string };
  voiceWav: string;
  /** The reference voice exactly as written to the WAV (16-bit quantised), for the other runtime to use too. */
  voiceSamples: Float32Array;
  sampleRateHz: number;
  precision: { lmMain: GraphPrecision; lmFlow: GraphPrecision; decoder: GraphPrecision };
  /** Whether lm_main.onnx was copied with a symbolic text_embeddings width (see the file comment). */
  relaxedTextEmbeddingDim: boolean;
  pieces: number;
  bundle: PocketBundle;
}

export interface SherpaLayoutOptions {
  /** Target folder (created; existing files with the same names are replaced). Default: a fresh temp dir. */
  outDir?: string;
  precision?: GraphPrecision;
  /** Length of the synthetic reference voice; default 5.04 s (63 frames, as in docs/anchors.md). */
  voiceSeconds?: number;
  /** Use this audio (at the bundle's rate) instead of the synthetic voice. */
  voiceSamples?: Float32Array;
  /** "auto" (default): only when the bundle's conditioning width is not 1024. */
  relaxTextEmbeddingDim?: boolean | "auto";
}

export async function writeSherpaLayout(bundleDir: string, options: SherpaLayoutOptions = {}): Promise<SherpaLayout> {
  const bundle = await loadPocketBundle(bundleDir, { precision: options.precision ?? "fp32" });
  if (bundle.layout === "sherpa-onnx") throw new Error(`${bundle.directory} is already in sherpa-onnx's layout`);
  if (bundle.tokenizer.format !== "sentencepiece") throw new Error("the bundle has no tokenizer.model");
  const voiceEncoder = bundle.graphs.voiceEncoder;
  if (!voiceEncoder) throw new Error("sherpa-onnx needs mimi_encoder.onnx (it clones the voice from audio)");
  const directory = options.outDir ? resolve(options.outDir) : mkdtempSync(join(tmpdir(), "voxedge-sherpa-layout-"));
  mkdirSync(directory, { recursive: true });

  const relax = options.relaxTextEmbeddingDim ?? "auto";
  const relaxedTextEmbeddingDim = relax === "auto" ? bundle.dims.conditioningDim !== SHERPA_HARD_CODED_CONDITIONING_DIM : relax;
  const place = (graph: GraphFile, stem: string, patch?: (bytes: Uint8Array) => Uint8Array): string => {
    const target = join(directory, `${stem}${graph.precision === "int8" ? ".int8" : ""}.onnx`);
    rmSync(target, { force: true });
    if (patch) writeFileSync(target, patch(new Uint8Array(readFileSync(graph.path))));
    else symlinkSync(resolve(graph.path), target);
    return target;
  };
  const { graphs } = bundle;
  const pocket = {
    lmMain: place(graphs.flowLmMain, "lm_main", relaxedTextEmbeddingDim ? (bytes) => relaxOnnxInputDim(bytes, "text_embeddings", 2, "text_embedding_dim") : undefined),
    lmFlow: place(graphs.flowLmFlow, "lm_flow"),
    encoder: place(voiceEncoder, "encoder"),
    decoder: place(graphs.mimiDecoder, "decoder"),
    textConditioner: place(graphs.textConditioner, "text_conditioner"),
    vocabJson: join(directory, "vocab.json"),
    tokenScoresJson: join(directory, "token_scores.json"),
  };
  const { vocab, scores } = sherpaTokenizerJson(new Uint8Array(readFileSync(bundle.tokenizer.modelPath)));
  writeFileSync(pocket.vocabJson, JSON.stringify(vocab));
  writeFileSync(pocket.tokenScoresJson, JSON.stringify(scores));

  const sampleRateHz = bundle.dims.sampleRateHz;
  const voice = options.voiceSamples ?? syntheticVoice(options.voiceSeconds ?? 5.04, sampleRateHz);
  const voiceWav = join(directory, "reference_voice.wav");
  writeFileSync(voiceWav, encodeWav16(voice, sampleRateHz));
  return {
    directory,
    pocket,
    voiceWav,
    voiceSamples: decodeWav16(readFileSync(voiceWav)).samples,
    sampleRateHz,
    precision: { lmMain: graphs.flowLmMain.precision, lmFlow: graphs.flowLmFlow.precision, decoder: graphs.mimiDecoder.precision },
    relaxedTextEmbeddingDim,
    pieces: Object.keys(vocab).length,
    bundle,
  };
}


// ---------------------------------------------------------------------------------------------------
// WAV, 16-bit PCM mono

export function encodeWav16(samples: Float32Array, sampleRateHz: number): Uint8Array {
  const bytes = new Uint8Array(44 + samples.length * 2);
  const view = new DataView(bytes.buffer);
  const ascii = (offset: number, text: string) => [...text].forEach((char, i) => view.setUint8(offset + i, char.charCodeAt(0)));
  ascii(0, "RIFF");
  view.setUint32(4, 36 + samples.length * 2, true);
  ascii(8, "WAVE");
  ascii(12, "fmt ");
  view.setUint32(16, 16, true);
  view.setUint16(20, 1, true); // PCM
  view.setUint16(22, 1, true); // mono
  view.setUint32(24, sampleRateHz, true);
  view.setUint32(28, sampleRateHz * 2, true);
  view.setUint16(32, 2, true);
  view.setUint16(34, 16, true);
  ascii(36, "data");
  view.setUint32(40, samples.length * 2, true);
  samples.forEach((sample, i) => view.setInt16(44 + i * 2, Math.round(Math.max(-1, Math.min(1, sample)) * 32767), true));
  return bytes;
}

/** Reads a mono 16-bit PCM WAV as sherpa-onnx's `ReadWave` does: int16 / 32768. */
export function decodeWav16(data: Uint8Array): { samples: Float32Array; sampleRateHz: number } {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const tag = (offset: number) => String.fromCharCode(...data.subarray(offset, offset + 4));
  if (tag(0) !== "RIFF" || tag(8) !== "WAVE") throw new Error("not a RIFF/WAVE file");
  let sampleRateHz = 0;
  for (let offset = 12; offset + 8 <= data.length; ) {
    const size = view.getUint32(offset + 4, true);
    if (tag(offset) === "fmt ") {
      if (view.getUint16(offset + 8, true) !== 1 || view.getUint16(offset + 10, true) !== 1 || view.getUint16(offset + 22, true) !== 16) throw new Error("expected mono 16-bit PCM");
      sampleRateHz = view.getUint32(offset + 12, true);
    } else if (tag(offset) === "data") {
      if (!sampleRateHz) throw new Error("WAV data before fmt");
      const samples = new Float32Array(size / 2);
      for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(offset + 8 + i * 2, true) / 32768;
      return { samples, sampleRateHz };
    }
    offset += 8 + size + (size % 2);
  }
  throw new Error("WAV has no data chunk");
}

// ---------------------------------------------------------------------------------------------------
// Protobuf rewrites (wire format from src/formats/protobuf.ts)

/** Re-encodes `message` with each length-delimited field `field` replaced by `rewrite(payload)`. */
function rewriteSubmessages(message: Uint8Array, field: number, rewrite: (payload: Uint8Array) => Uint8Array): Uint8Array {
  return concatBytes([...protobufFields(message)].map((entry) => (entry.number === field && entry.wireType === WIRE_LENGTH_DELIMITED ? lengthDelimitedField(field, rewrite(entry.payload)) : entry.raw)));
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * sherpa's convert_tokenizer.py: `vocab.json` = {piece: id}, `token_scores.json` = {piece: score} over every
 * piece of `ModelProto.pieces` (field 1; SentencePiece.piece = 1, score = 2, a float32). Scores are written as
 * the float32 values (JSON doubles), as Python's json.dumps writes the floats sentencepiece returns.
 */
export function sherpaTokenizerJson(modelProto: Uint8Array): { vocab: Record<string, number>; scores: Record<string, number> } {
  const vocab: Record<string, number> = {};
  const scores: Record<string, number> = {};
  let id = 0;
  for (const entry of protobufFields(modelProto)) {
    if (entry.number !== 1 || entry.wireType !== WIRE_LENGTH_DELIMITED) continue;
    let piece: string | undefined;
    let score = 0;
    for (const pieceField of protobufFields(entry.payload)) {
      if (pieceField.number === 1 && pieceField.wireType === WIRE_LENGTH_DELIMITED) piece = utf8.decode(pieceField.payload);
      else if (pieceField.number === 2 && pieceField.wireType === WIRE_FIXED32) score = new DataView(pieceField.payload.buffer, pieceField.payload.byteOffset, 4).getFloat32(0, true);
    }
    if (piece === undefined) throw new Error(`tokenizer.model piece ${id} has no text`);
    if (piece in vocab) throw new Error(`tokenizer.model piece '${piece}' appears twice`);
    vocab[piece] = id++;
    scores[piece] = score;
  }
  if (id === 0) throw new Error("tokenizer.model has no pieces");
  return { vocab, scores };
}

/**
 * Declares axis `axis` of graph input `inputName` symbolic (`dimParam`) in an ONNX ModelProto. Paths:
 * ModelProto.graph = 7 → GraphProto.input = 11 → ValueInfoProto{name = 1, type = 2} → TypeProto.tensor_type
 * = 1 → Tensor.shape = 2 → TensorShapeProto.dim = 1 → Dimension{dim_value = 1 | dim_param = 2}.
 */
export function relaxOnnxInputDim(model: Uint8Array, inputName: string, axis: number, dimParam: string): Uint8Array {
  let found = false;
  const dimension = lengthDelimitedField(2, new TextEncoder().encode(dimParam));
  const relaxShape = (shape: Uint8Array): Uint8Array => {
    let index = 0;
    return concatBytes([...protobufFields(shape)].map((entry) => (entry.number === 1 && entry.wireType === WIRE_LENGTH_DELIMITED && index++ === axis ? lengthDelimitedField(1, dimension) : entry.raw)));
  };
  const relaxValueInfo = (valueInfo: Uint8Array): Uint8Array => {
    const name = [...protobufFields(valueInfo)].find((entry) => entry.number === 1 && entry.wireType === WIRE_LENGTH_DELIMITED);
    if (!name || utf8.decode(name.payload) !== inputName) return valueInfo;
    found = true;
    return rewriteSubmessages(valueInfo, 2, (type) => rewriteSubmessages(type, 1, (tensor) => rewriteSubmessages(tensor, 2, relaxShape)));
  };
  const out = rewriteSubmessages(model, 7, (graph) => rewriteSubmessages(graph, 11, relaxValueInfo));
  if (!found) throw new Error(`the graph has no input '${inputName}'`);
  return out;
}

// ---------------------------------------------------------------------------------------------------

if (import.meta.main) {
  const { parseArgs } = await import("node:util");
  const { fixtureBundle } = await import("../test/models/pocket/bundle-fixture.ts");
  const { values } = parseArgs({ options: { model: { type: "string" }, out: { type: "string" }, precision: { type: "string", default: "fp32" }, "voice-seconds": { type: "string", default: "5.04" } } });
  const precision = values.precision as GraphPrecision;
  if (precision !== "fp32" && precision !== "int8") throw new Error("--precision is fp32 or int8");
  const layout = await writeSherpaLayout(values.model ?? fixtureBundle(), { outDir: values.out, precision, voiceSeconds: Number(values["voice-seconds"]) });
  console.log(JSON.stringify({ directory: layout.directory, pocket: layout.pocket, voiceWav: layout.voiceWav, precision: layout.precision, relaxedTextEmbeddingDim: layout.relaxedTextEmbeddingDim, pieces: layout.pieces }, null, 2));
}
