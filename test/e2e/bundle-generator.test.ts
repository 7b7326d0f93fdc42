/**
 * bench/bundle-generator/generate.py builds benchmark bundles from PyTorch modules written from the spec. Its
 * correctness is shown at the tiny fixture's dimensions: fed the fixture's weights, the five graphs it exports must
 * pass every golden case of `conformance`, and at full size its decoder, fed mimi-full's weights, must match that
 * fixture's golden audio. Needs python3 with torch and onnx (Debian 12: apt-get install python3-torch python3-onnx
 * python3-numpy); without them the tests fail, they are never skipped.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runConformance } from "../../src/conformance/harness.ts";
import type { ConformanceReport } from "../../src/conformance/report.ts";
import { readOnnxGraphInputs } from "../../src/onnx/proto.ts";
import { REPO_ROOT } from "../support/repo.ts";

const ROOT = REPO_ROOT;
const GENERATOR = join(ROOT, "bench", "bundle-generator", "generate.py");
const FIXTURES = join(ROOT, "..", "shared", "fixtures");
const TINY = join(FIXTURES, "pocket-tiny");
const MIMI_FULL = join(FIXTURES, "mimi-full");
const INSTALL_HINT = "apt-get install -y python3-torch python3-onnx python3-numpy";
const GRAPHS = ["text_conditioner.onnx", "mimi_encoder.onnx", "variants/mimi_encoder_no_bos.onnx", "flow_lm_main.onnx", "flow_lm_flow.onnx", "mimi_decoder.onnx"];

const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** The first interpreter that imports torch, onnx and numpy (Debian's live in /usr/bin/python3, not a pyenv shim). */
function python(): string {
  const candidates = [process.env.VOXEDGE_PYTHON, "/usr/bin/python3", "python3"].filter((entry): entry is string => !!entry);
  for (const candidate of candidates) {
    const probe = spawnSync(candidate, ["-c", "import torch, onnx, numpy"], { encoding: "utf8" });
    if (probe.status === 0) return candidate;
  }
  throw new Error(`the bundle generator needs python3 with torch and onnx (tried ${candidates.join(", ")}); install them with: ${INSTALL_HINT} (or set VOXEDGE_PYTHON)`);
}

function generate(args: string[]): string {
  const out = mkdtempSync(join(tmpdir(), "voxedge-generator-"));
  scratch.push(out);
  const run = spawnSync(python(), [GENERATOR, ...args, "--out", out], { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`generate.py ${args.join(" ")} failed (${run.status}):\n${run.stdout}\n${run.stderr}`);
  return out;
}

function failures(report: ConformanceReport): string[] {
  return report.cases.filter((entry) => !entry.pass).map((entry) => `${entry.case}: ${entry.detail ?? `maxAbs ${entry.maxAbs}, relRms ${entry.relRms}`}`);
}

describe("bench/bundle-generator/generate.py", () => {
  test(
    "tiny config with the fixture's weights: same contract as pocket-tiny, and every golden case passes",
    async () => {
      const dir = generate(["--config", "tiny", "--weights", join(TINY, "model.safetensors"), "--name", "pocket-tiny"]);
      // The state manifests and metadata are the fixture's, byte for byte; so is the BOS vector.
      expect(readFileSync(join(dir, "bundle.json"), "utf8")).toBe(readFileSync(join(TINY, "bundle.json"), "utf8"));
      expect(Buffer.compare(readFileSync(join(dir, "bos_before_voice.npy")), readFileSync(join(TINY, "bos_before_voice.npy")))).toBe(0);
      // Every graph declares the fixture's inputs: names, order, dtypes, fixed state shapes.
      for (const graph of GRAPHS) {
        const ours = (await readOnnxGraphInputs(join(dir, graph))).map(({ name, elementType, dims }) => ({ name, elementType, dims: dims.map((dim) => (typeof dim === "number" ? dim : "?")) }));
        const theirs = (await readOnnxGraphInputs(join(TINY, graph))).map(({ name, elementType, dims }) => ({ name, elementType, dims: dims.map((dim) => (typeof dim === "number" ? dim : "?")) }));
        expect({ graph, inputs: ours }).toEqual({ graph, inputs: theirs });
      }
      for (const file of ["golden.json", "golden.safetensors", "voice_state.safetensors"]) copyFileSync(join(TINY, file), join(dir, file));
      const keys = Object.keys(JSON.parse(readFileSync(join(TINY, "golden.json"), "utf8")).cases);
      for (const provider of ["onnxruntime-node", "onnxruntime-web"] as const) {
        const report = await runConformance(dir, "onnx", { provider });
        expect({ provider, failures: failures(report) }).toEqual({ provider, failures: [] });
        expect(report.pass).toBe(true);
        for (const key of keys) expect(report.cases.some((entry) => entry.case.startsWith(key))).toBe(true);
      }
    },
    180_000,
  );

  test(
    "full config: the real-size decoder fed mimi-full's weights matches its golden audio",
    async () => {
      const dir = generate(["--config", "full", "--weights", join(MIMI_FULL, "model.safetensors"), "--partial", "--only", "decoder"]);
      // Full-size manifest = the published 56-entry layout (§3.1) that mimi-full's golden.json records.
      const bundle = JSON.parse(readFileSync(join(dir, "bundle.json"), "utf8"));
      const golden = JSON.parse(readFileSync(join(MIMI_FULL, "golden.json"), "utf8"));
      expect(bundle.mimi_state_manifest).toEqual(golden.mimi_state_manifest);
      expect(bundle.flow_lm_state_manifest.map((entry: { shape: number[] }) => entry.shape)).toEqual(
        Array.from({ length: 6 }, () => [[2, 1, 1000, 16, 64], [0], [1]]).flat(),
      );
      // Without bundle.json, conformance reads the decoder with golden.json's manifest (as for mimi-full).
      rmSync(join(dir, "bundle.json"));
      for (const file of ["golden.json", "golden.safetensors"]) copyFileSync(join(MIMI_FULL, file), join(dir, file));
      const report = await runConformance(dir, "onnx", { provider: "onnxruntime-node" });
      expect(failures(report)).toEqual([]);
      expect(report.cases.filter((entry) => /^mimi_decoder\.audio_/.test(entry.case)).length).toBe(3);
    },
    180_000,
  );
});
