/**
 * Per-row activation quantization (src/onnx/row-quantization.ts) on the tiny fixture's flow head, quantized
 * as the published int8 bundles are (../shared/tools/quantize_int8.py): at one row it is the published graph
 * bit for bit; in a batch every row is what it is alone, where the published graph couples the rows; and the
 * flow head built on it samples many rows in one call with each row's latent unchanged. Needs python3 with
 * onnx and numpy (Debian: apt-get install python3-onnx python3-numpy); without them the tests fail.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { quantizeRowsSeparately } from "../../src/onnx/row-quantization.ts";
import { loadOnnxRuntime, type OnnxSession } from "../../src/onnx/runtime.ts";
import { FlowHead } from "../../src/models/pocket/stages/flow-head.ts";
import { loadPocketBundle } from "../../src/models/pocket/bundle/load.ts";
import { randomArray, seededRandom } from "../gpu/support.ts";

const FIXTURE = join(import.meta.dir, "..", "..", "..", "shared", "fixtures", "pocket-tiny");
const QUANTIZER = join(import.meta.dir, "..", "..", "..", "shared", "tools", "quantize_int8.py");
const INSTALL_HINT = "apt-get install -y python3-onnx python3-numpy";
const scratch = mkdtempSync(join(tmpdir(), "voxedge-row-quantization-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function python(): string {
  for (const candidate of [process.env.VOXEDGE_PYTHON, "/usr/bin/python3", "python3"].filter((entry): entry is string => !!entry)) {
    if (spawnSync(candidate, ["-c", "import onnx, numpy"], { encoding: "utf8" }).status === 0) return candidate;
  }
  throw new Error(`the int8 quantizer needs python3 with onnx and numpy; install them with: ${INSTALL_HINT} (or set VOXEDGE_PYTHON)`);
}

const FLOW_HEAD = { latentDim: 32 };
let int8Path: string;
/** The fixture's FlowLM width: the flow head's conditioning size. */
let dim: number;
let published: OnnxSession;
let rows: OnnxSession;

/** `count` rows of `width` values in [−scale/2, scale/2), the same for a seed. */
function randomRows(seed: number, count: number, width: number, scale = 1): Float32Array {
  return randomArray(seededRandom(seed), count * width, scale / 2);
}

async function flowDir(session: OnnxSession, c: Float32Array, s: Float32Array, x: Float32Array): Promise<Float32Array> {
  const batch = s.length;
  const outputs = await session.run({
    c: new session.Tensor("float32", c, [batch, c.length / batch]),
    s: new session.Tensor("float32", s, [batch, 1]),
    t: new session.Tensor("float32", s.map((value) => value + 0.25), [batch, 1]),
    x: new session.Tensor("float32", x, [batch, FLOW_HEAD.latentDim]),
  });
  return outputs.flow_dir!.data as Float32Array;
}

beforeAll(async () => {
  int8Path = join(scratch, "flow_lm_flow_int8.onnx");
  const run = spawnSync(python(), [QUANTIZER, join(FIXTURE, "flow_lm_flow.onnx"), int8Path, "--gemm2matmul"], { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`quantize_int8.py failed: ${run.stderr}`);
  const rewritten = quantizeRowsSeparately(new Uint8Array(readFileSync(int8Path)));
  if (!rewritten) throw new Error("the quantized flow head has no quantizer to rewrite");
  const runtime = await loadOnnxRuntime({ provider: "onnxruntime-node" });
  published = await runtime.createSession(int8Path);
  rows = await runtime.createSession(int8Path, rewritten.model);
  dim = (await loadPocketBundle(FIXTURE)).dims.conditioningDim;
});

describe("per-row quantization", () => {
  test("every DynamicQuantizeLinear is rewritten; a graph with none is left alone", () => {
    const rewritten = quantizeRowsSeparately(new Uint8Array(readFileSync(int8Path)))!;
    expect(rewritten.rewritten).toBeGreaterThan(10);
    expect(quantizeRowsSeparately(new Uint8Array(readFileSync(join(FIXTURE, "flow_lm_flow.onnx"))))).toBeNull();
  });

  test("one row: the published int8 graph's result, bit for bit; a batch: each row its result alone, where the published graph mixes rows", async () => {
    const batch = 5;
    // Rows of very different ranges, so a per-tensor scale would be set by one of them.
    const c = randomRows(1, batch, dim);
    for (let index = dim; index < 2 * dim; index++) c[index]! *= 50;
    const s = Float32Array.from({ length: batch }, (_, index) => index / batch);
    const x = randomRows(2, batch, FLOW_HEAD.latentDim, 2);
    const batchedRows = await flowDir(rows, c, s, x);
    const batchedPublished = await flowDir(published, c, s, x);
    let publishedMixes = false;
    for (let row = 0; row < batch; row++) {
      const slice = (data: Float32Array, width: number) => data.slice(row * width, (row + 1) * width);
      const alonePublished = await flowDir(published, slice(c, dim), s.slice(row, row + 1), slice(x, FLOW_HEAD.latentDim));
      const aloneRows = await flowDir(rows, slice(c, dim), s.slice(row, row + 1), slice(x, FLOW_HEAD.latentDim));
      expect(aloneRows).toEqual(alonePublished);
      expect(slice(batchedRows, FLOW_HEAD.latentDim)).toEqual(alonePublished);
      if (!slice(batchedPublished, FLOW_HEAD.latentDim).every((value, index) => value === alonePublished[index])) publishedMixes = true;
    }
    expect(publishedMixes).toBe(true);
  });

  test("the flow head on it samples rows in one call, each row's latent the one it samples alone; on the published graph alone it would not batch", async () => {
    const config = { latentDim: FLOW_HEAD.latentDim, conditioningDim: dim };
    const head = await FlowHead.create(published, config, rows);
    expect(head.batchesRows).toBe(true);
    expect((await FlowHead.create(published, config, published)).batchesRows).toBe(false);
    const inputs = Array.from({ length: 4 }, (_, index) => ({ conditioning: randomRows(10 + index, 1, dim, index + 1), x0: randomRows(20 + index, 1, FLOW_HEAD.latentDim) }));
    for (const lsdSteps of [1, 3]) {
      const together = await head.sampleRows(inputs, lsdSteps);
      for (const [index, input] of inputs.entries()) expect(together[index]).toEqual(await head.sample(input.conditioning, input.x0, lsdSteps));
    }
  });
});
