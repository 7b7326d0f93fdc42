import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadPocketBundle } from "../../../src/models/pocket/bundle/load.ts";
import { BundleError, bundleLanguageTag } from "../../../src/models/pocket/bundle/pocket-bundle.ts";
import { parseStateManifest } from "../../../src/models/pocket/bundle/state-manifest.ts";
import { decodeSafetensorsWithInt64 } from "../../../src/formats/safetensors.ts";
import { parseNpyFloat32 } from "../../../src/formats/npy.ts";
import { readOnnxGraphInputs } from "../../../src/onnx/proto.ts";
import { encodeSafetensors } from "../../../src/formats/safetensors.ts";

const FIXTURES_DIR = join(import.meta.dir, "../../../../shared/fixtures");
const TINY_DIR = join(FIXTURES_DIR, "pocket-tiny");
const TINY_BUNDLE_JSON = JSON.parse(readFileSync(join(TINY_DIR, "bundle.json"), "utf8"));

const scratchDirs: string[] = [];
afterEach(() => {
  for (const dir of scratchDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A writable copy of pocket-tiny, changed by `edit`. */
function tinyCopy(edit: (dir: string) => void = () => {}): string {
  const dir = mkdtempSync(join(tmpdir(), "voxedge-bundle-"));
  scratchDirs.push(dir);
  cpSync(TINY_DIR, dir, { recursive: true });
  // The shared fixtures are read-only; the copies must be editable.
  for (const entry of readdirSync(dir, { recursive: true, encoding: "utf8" })) chmodSync(join(dir, entry), 0o755);
  edit(dir);
  return dir;
}

describe("KevinAHM v2 bundle (bundle.json)", () => {
  test("loads pocket-tiny with its graphs, dims, flags and manifests", async () => {
    const bundle = await loadPocketBundle(TINY_DIR);
    expect(bundle.layout).toBe("kevinahm-v2");
    expect(bundle.name).toBe("pocket-tiny");
    expect(bundle.graphs.flowLmMain).toEqual({ path: join(TINY_DIR, "flow_lm_main.onnx"), precision: "fp32" });
    expect(bundle.graphs.voiceEncoder?.path).toBe(join(TINY_DIR, "mimi_encoder.onnx"));
    expect(bundle.tokenizer).toEqual({ format: "sentencepiece", modelPath: join(TINY_DIR, "tokenizer.model") });
    expect(bundle.dims).toEqual({ sampleRateHz: 24000, frameRateHz: 12.5, samplesPerFrame: 1920, latentDim: 32, conditioningDim: 64, flowLmCachePositions: 1000, flowLmLayers: 2 });
    expect(bundle.flags).toEqual({ padWithSpacesForShortInputs: false, removeSemicolons: false, recommendedFramesAfterEos: null, maxTokensPerChunk: 50, insertBosBeforeVoice: true });
    expect(bundle.flowLmStateManifest.map((entry) => `${entry.inputName} ${entry.module}/${entry.key} ${entry.fill}`)).toEqual([
      "state_0 transformer.layers.0.self_attn/cache nan",
      "state_1 transformer.layers.0.self_attn/current_end empty",
      "state_2 transformer.layers.0.self_attn/step zeros",
      "state_3 transformer.layers.1.self_attn/cache nan",
      "state_4 transformer.layers.1.self_attn/current_end empty",
      "state_5 transformer.layers.1.self_attn/step zeros",
    ]);
    expect(bundle.mimiStateManifest).toHaveLength(56);
    expect(bundle.mimiStateManifest[1]).toEqual({ index: 1, inputName: "state_1", outputName: "out_state_1", module: "decoder.model.0", key: "previous", dtype: "float32", shape: [1, 32, 6], fill: "zeros" });
    expect(bundle.predefinedVoices).toEqual([]);
    expect(bundle.voicesDirectory).toBeNull();
  });

  test("bos_before_voice.npy is the BOS row the v2 encoder bakes in", async () => {
    const bundle = await loadPocketBundle(TINY_DIR);
    const golden = decodeSafetensorsWithInt64(readFileSync(join(TINY_DIR, "golden.safetensors")));
    const withBos = golden["voice.conditioning_with_bos"]!.data as Float32Array;
    expect(bundle.bosBeforeVoice).toEqual(withBos.slice(0, 64));
  });

  test("reads model flags and voices from bundle.json and finds a voices folder", async () => {
    const dir = tinyCopy((copy) => {
      const json = { ...TINY_BUNDLE_JSON, remove_semicolons: true, model_recommended_frames_after_eos: 8, max_token_per_chunk: 40, predefined_voices: ["alba"] };
      writeFileSync(join(copy, "bundle.json"), JSON.stringify(json));
      mkdirSync(join(copy, "voices"));
    });
    const bundle = await loadPocketBundle(dir);
    expect(bundle.flags).toMatchObject({ removeSemicolons: true, recommendedFramesAfterEos: 8, maxTokensPerChunk: 40 });
    expect(bundle.predefinedVoices).toEqual(["alba"]);
    expect(bundle.voicesDirectory).toBe(join(dir, "voices"));
  });

  test("takes the state order from the manifest, whatever the index arithmetic would say", async () => {
    // 24-layer manifests are sorted lexicographically (§3.1); a reordered module list must be taken as written.
    const dir = tinyCopy((copy) => {
      const manifest = TINY_BUNDLE_JSON.flow_lm_state_manifest.map((entry: { module: string }) => ({
        ...entry,
        module: entry.module.replace(/layers\.(\d)/, (_match: string, layer: string) => `layers.${layer === "0" ? "10" : "2"}`),
      }));
      writeFileSync(join(copy, "bundle.json"), JSON.stringify({ ...TINY_BUNDLE_JSON, flow_lm_state_manifest: manifest }));
    });
    const bundle = await loadPocketBundle(dir);
    expect(bundle.flowLmStateManifest.map((entry) => entry.module)).toEqual([...Array(3).fill("transformer.layers.10.self_attn"), ...Array(3).fill("transformer.layers.2.self_attn")]);
  });

  test("prefers the requested precision per graph and falls back to the other", async () => {
    const dir = tinyCopy((copy) => {
      renameSync(join(copy, "flow_lm_main.onnx"), join(copy, "flow_lm_main_int8.onnx"));
      cpSync(join(copy, "mimi_decoder.onnx"), join(copy, "mimi_decoder_int8.onnx"));
    });
    const fp32 = await loadPocketBundle(dir);
    expect(fp32.graphs.flowLmMain).toEqual({ path: join(dir, "flow_lm_main_int8.onnx"), precision: "int8" });
    expect(fp32.graphs.mimiDecoder.precision).toBe("fp32");
    const int8 = await loadPocketBundle(dir, { precision: "int8" });
    expect(int8.graphs.mimiDecoder).toEqual({ path: join(dir, "mimi_decoder_int8.onnx"), precision: "int8" });
    expect(int8.graphs.textConditioner.precision).toBe("fp32");
  });

  test("a bundle without an encoder loads, without cloning", async () => {
    const dir = tinyCopy((copy) => rmSync(join(copy, "mimi_encoder.onnx")));
    expect((await loadPocketBundle(dir)).graphs.voiceEncoder).toBeNull();
  });

  test("names what is wrong", async () => {
    await expect(loadPocketBundle(join(TINY_DIR, "nope"))).rejects.toThrow(BundleError);
    const missingGraph = tinyCopy((copy) => rmSync(join(copy, "flow_lm_flow.onnx")));
    await expect(loadPocketBundle(missingGraph)).rejects.toThrow("missing flow_lm_flow.onnx");
    const futureSchema = tinyCopy((copy) => writeFileSync(join(copy, "bundle.json"), JSON.stringify({ ...TINY_BUNDLE_JSON, schema_version: 3 })));
    await expect(loadPocketBundle(futureSchema)).rejects.toThrow("schema_version");
    const noManifest = tinyCopy((copy) => writeFileSync(join(copy, "bundle.json"), JSON.stringify({ ...TINY_BUNDLE_JSON, mimi_state_manifest: undefined })));
    await expect(loadPocketBundle(noManifest)).rejects.toThrow("mimi_state_manifest");
    const gap = tinyCopy((copy) => writeFileSync(join(copy, "bundle.json"), JSON.stringify({ ...TINY_BUNDLE_JSON, flow_lm_state_manifest: TINY_BUNDLE_JSON.flow_lm_state_manifest.slice(1) })));
    await expect(loadPocketBundle(gap)).rejects.toThrow("entry 0 has index 1");
    const wrongBos = tinyCopy((copy) => writeFileSync(join(copy, "bundle.json"), JSON.stringify({ ...TINY_BUNDLE_JSON, conditioning_dim: 128 })));
    await expect(loadPocketBundle(wrongBos)).rejects.toThrow("expected [1, 1, 128]");
  });
});

describe("January layout (no bundle.json)", () => {
  test("rebuilds the manifests from the graph inputs: same states as bundle.json, caches start at zeros", async () => {
    const dir = tinyCopy((copy) => rmSync(join(copy, "bundle.json")));
    const bundle = await loadPocketBundle(dir);
    const v2 = await loadPocketBundle(TINY_DIR);
    expect(bundle.layout).toBe("kevinahm-january");
    expect(bundle.mimiStateManifest).toEqual(v2.mimiStateManifest);
    expect(bundle.flowLmStateManifest).toEqual(v2.flowLmStateManifest.map((entry) => (entry.fill === "nan" ? { ...entry, fill: "zeros" } : entry)));
    expect(bundle.dims).toEqual(v2.dims);
    // A v2 folder stripped of its bundle.json keeps its BOS through bos_before_voice.npy.
    expect(bundle.flags.insertBosBeforeVoice).toBe(true);
    expect(bundle.bosBeforeVoice).toEqual(v2.bosBeforeVoice);
  });

  test("the HF layout: graphs in onnx/, tokenizer at the root, v1 flags", async () => {
    const dir = tinyCopy((copy) => {
      mkdirSync(join(copy, "onnx"));
      for (const graph of ["text_conditioner", "mimi_encoder", "flow_lm_main", "flow_lm_flow", "mimi_decoder"]) renameSync(join(copy, `${graph}.onnx`), join(copy, "onnx", `${graph}.onnx`));
      rmSync(join(copy, "bundle.json"));
      rmSync(join(copy, "bos_before_voice.npy"));
    });
    const bundle = await loadPocketBundle(dir);
    expect(bundle.graphs.flowLmMain.path).toBe(join(dir, "onnx", "flow_lm_main.onnx"));
    expect(bundle.tokenizer).toEqual({ format: "sentencepiece", modelPath: join(dir, "tokenizer.model") });
    expect(bundle.flags).toEqual({ padWithSpacesForShortInputs: true, removeSemicolons: false, recommendedFramesAfterEos: null, maxTokensPerChunk: 50, insertBosBeforeVoice: false });
    expect(bundle.bosBeforeVoice).toBeNull();
  });

  test("24 layers: the module of each state follows Python's lexicographic sort (0, 1, 10, …, 19, 2, 20, …)", async () => {
    const dir = tinyCopy((copy) => {
      rmSync(join(copy, "bundle.json"));
      rmSync(join(copy, "bos_before_voice.npy"));
      writeFileSync(join(copy, "flow_lm_main.onnx"), fakeFlowLmMain(24));
    });
    const bundle = await loadPocketBundle(dir);
    const modules = bundle.flowLmStateManifest.filter((entry) => entry.key === "cache").map((entry) => Number(/layers\.(\d+)\./.exec(entry.module)![1]));
    expect(modules).toEqual([0, 1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 2, 20, 21, 22, 23, 3, 4, 5, 6, 7, 8, 9]);
    expect(bundle.flowLmStateManifest[4]).toEqual({ index: 4, inputName: "state_4", outputName: "out_state_4", module: "transformer.layers.1.self_attn", key: "current_end", dtype: "float32", shape: [0], fill: "empty" });
    expect(bundle.dims).toMatchObject({ conditioningDim: 1024, flowLmLayers: 24, flowLmCachePositions: 1000 });
  });
});

describe("sherpa-onnx layout", () => {
  test("renamed graphs and the JSON tokenizer", async () => {
    const dir = tinyCopy((copy) => {
      for (const [from, to] of [["flow_lm_main", "lm_main"], ["flow_lm_flow", "lm_flow"], ["mimi_encoder", "encoder"], ["mimi_decoder", "decoder"]]) {
        renameSync(join(copy, `${from}.onnx`), join(copy, `${to}.onnx`));
      }
      renameSync(join(copy, "decoder.onnx"), join(copy, "decoder.int8.onnx"));
      for (const name of ["bundle.json", "tokenizer.model", "bos_before_voice.npy"]) rmSync(join(copy, name));
      writeFileSync(join(copy, "vocab.json"), "{}");
      writeFileSync(join(copy, "token_scores.json"), "{}");
    });
    const bundle = await loadPocketBundle(dir);
    expect(bundle.layout).toBe("sherpa-onnx");
    expect(bundle.graphs.flowLmMain.path).toBe(join(dir, "lm_main.onnx"));
    expect(bundle.graphs.voiceEncoder?.path).toBe(join(dir, "encoder.onnx"));
    expect(bundle.graphs.mimiDecoder).toEqual({ path: join(dir, "decoder.int8.onnx"), precision: "int8" });
    expect(bundle.tokenizer).toEqual({ format: "sherpa-json", vocabPath: join(dir, "vocab.json"), scoresPath: join(dir, "token_scores.json") });
    expect(bundle.mimiStateManifest).toHaveLength(56);
    expect(bundle.flags.insertBosBeforeVoice).toBe(false);
  });
});

describe("file formats", () => {
  test("readOnnxGraphInputs reads names, element types and symbolic dims", async () => {
    const inputs = await readOnnxGraphInputs(join(TINY_DIR, "flow_lm_main.onnx"));
    expect(inputs.slice(0, 5)).toEqual([
      { name: "sequence", elementType: "float", elementTypeCode: 1, dims: [1, "seq_len", 32] },
      { name: "text_embeddings", elementType: "float", elementTypeCode: 1, dims: [1, "text_len", 64] },
      { name: "state_0", elementType: "float", elementTypeCode: 1, dims: [2, 1, 1000, 4, 16] },
      { name: "state_1", elementType: "float", elementTypeCode: 1, dims: [0] },
      { name: "state_2", elementType: "int64", elementTypeCode: 7, dims: [1] },
    ]);
    const decoder = await readOnnxGraphInputs(join(FIXTURES_DIR, "mimi-full", "mimi_decoder.onnx"));
    expect(decoder).toHaveLength(57);
    expect(decoder[1]).toEqual({ name: "state_0", elementType: "bool", elementTypeCode: 9, dims: [1] });
  });

  test("readOnnxGraphInputs rejects a file that is not ONNX", async () => {
    await expect(readOnnxGraphInputs(join(TINY_DIR, "bundle.json"))).rejects.toThrow("is not a readable ONNX model");
  });

  test("parseNpyFloat32 reads the fixture and rejects other dtypes", () => {
    const npy = parseNpyFloat32(readFileSync(join(TINY_DIR, "bos_before_voice.npy")), "bos");
    expect(npy.shape).toEqual([1, 1, 64]);
    expect(npy.data).toHaveLength(64);
    const float64 = readFileSync(join(TINY_DIR, "bos_before_voice.npy"));
    float64.set(new TextEncoder().encode("<f8"), float64.indexOf("<f4"));
    expect(() => parseNpyFloat32(float64, "bos")).toThrow("little-endian float32");
  });

  test("decodeSafetensorsWithInt64 reads int64 and float tensors", () => {
    const golden = decodeSafetensorsWithInt64(readFileSync(join(TINY_DIR, "golden.safetensors")));
    expect(golden["tokenizer.0.ids"]).toEqual({ dtype: "I64", shape: [2], data: BigInt64Array.of(1876n, 393n) });
    const file = encodeSafetensors({ x: { dtype: "F32", shape: [2], data: Float32Array.of(1.5, -2) } }, {});
    expect(decodeSafetensorsWithInt64(file).x).toEqual({ dtype: "F32", shape: [2], data: Float32Array.of(1.5, -2) });
  });

  test("parseStateManifest reads a golden.json manifest", () => {
    const golden = JSON.parse(readFileSync(join(FIXTURES_DIR, "mimi-full", "golden.json"), "utf8"));
    const manifest = parseStateManifest(golden.mimi_state_manifest, "mimi-full");
    expect(manifest).toHaveLength(56);
    expect(manifest[19]).toMatchObject({ module: "decoder_transformer.transformer.layers.0.self_attn", key: "cache", shape: [2, 1, 8, 1000, 64] });
    expect(() => parseStateManifest([{ index: 0 }], "broken")).toThrow("broken: not a state manifest");
  });
});

// ---------------------------------------------------------------------------------------------------
// A protobuf ModelProto holding only graph inputs (and one large initializer to skip), the shape of a
// KX flow_lm_main.onnx with `layers` layers of 16 heads × 64 (§3.1).

function varint(value: number): number[] {
  const bytes: number[] = [];
  while (value >= 0x80) {
    bytes.push((value % 0x80) | 0x80);
    value = Math.floor(value / 0x80);
  }
  bytes.push(value);
  return bytes;
}

function lengthField(number: number, payload: number[] | string): number[] {
  const bytes = typeof payload === "string" ? [...new TextEncoder().encode(payload)] : payload;
  return [...varint(number * 8 + 2), ...varint(bytes.length), ...bytes];
}

function varintField(number: number, value: number): number[] {
  return [...varint(number * 8), ...varint(value)];
}

function valueInfo(name: string, elementType: number, dims: (number | string)[]): number[] {
  const shape = dims.flatMap((dim) => lengthField(1, typeof dim === "number" ? varintField(1, dim) : lengthField(2, dim)));
  return lengthField(11, [...lengthField(1, name), ...lengthField(2, lengthField(1, [...varintField(1, elementType), ...lengthField(2, shape)]))]);
}

function fakeFlowLmMain(layers: number): Uint8Array {
  const FLOAT = 1;
  const INT64 = 7;
  const inputs = [valueInfo("sequence", FLOAT, [1, "seq_len", 32]), valueInfo("text_embeddings", FLOAT, [1, "text_len", 1024])];
  for (let layer = 0; layer < layers; layer++) {
    inputs.push(valueInfo(`state_${3 * layer}`, FLOAT, [2, 1, 1000, 16, 64]), valueInfo(`state_${3 * layer + 1}`, FLOAT, [0]), valueInfo(`state_${3 * layer + 2}`, INT64, [1]));
  }
  // An initializer larger than the reader's 64 KiB window, before the inputs as exporters write it.
  const initializer = lengthField(5, new Array<number>(200_000).fill(7));
  const graph = [...lengthField(2, "main_graph"), ...initializer, ...inputs.flat()];
  return Uint8Array.from([...varintField(1, 8), ...lengthField(7, graph), ...lengthField(8, [...lengthField(1, ""), ...varintField(2, 14)])]);
}

describe("bundleLanguageTag", () => {
  test("catalog language names, with or without a size suffix, and tags already given", () => {
    const names = ["english", "french_24l", "german", "German_24l", "italian", "portuguese", "spanish_24l", "en", "pt-br"];
    expect(names.map(bundleLanguageTag)).toEqual(["en", "fr", "de", "de", "it", "pt", "es", "en", "pt-br"]);
  });

  test("a name it does not know is unknown, not a guess", () => {
    expect(bundleLanguageTag("klingon")).toBeUndefined();
    expect(bundleLanguageTag("")).toBeUndefined();
  });
});
