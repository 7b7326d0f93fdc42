import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { runConformance } from "../../../src/conformance/harness.ts";
import type { ConformanceReport } from "../../../src/conformance/report.ts";
import { REPO_ROOT } from "../../support/repo.ts";

const ROOT = REPO_ROOT;
const FIXTURES_DIR = join(ROOT, "../shared/fixtures");

function failures(report: ConformanceReport): string[] {
  return report.cases.filter((entry) => !entry.pass).map((entry) => `${entry.case}: ${entry.detail ?? `maxAbs ${entry.maxAbs}, relRms ${entry.relRms}`}`);
}

const STAGES = ["quantizer", "upsample", "decoder_transformer", ...[0, 2, 3, 5, 6, 8, 9, 11].map((index) => `decoder.model.${index}`)];

describe("conformance with the WGSL Mimi decoder (on the software adapter here)", () => {
  test("pocket-tiny: every case passes, the decoder's stage outputs included", async () => {
    const report = await runConformance(join(FIXTURES_DIR, "pocket-tiny"), "wgsl");
    expect(failures(report)).toEqual([]);
    expect(report).toMatchObject({ fixture: "pocket-tiny", decoder: "wgsl", pass: true });
    const decoderCases = report.cases.filter((entry) => entry.stage === "decoder");
    // Nothing of the decoder is left unobserved: every intermediate has a measured error.
    expect(decoderCases.every((entry) => entry.observable !== false && entry.maxAbs !== null)).toBe(true);
    expect(decoderCases.map((entry) => entry.case)).toEqual(
      expect.arrayContaining(["mimi_decoder.audio_single", "mimi_decoder.audio_chunked", "mimi_decoder.audio_single_vs_onnx", "mimi_decoder_long.audio_tail", ...STAGES.map((stage) => `mimi_decoder.intermediate.${stage}`)]),
    );
  }, 300_000);

  test("mimi-full: the full-size decoder matches one latent per call, in chunks and whole, stage by stage", async () => {
    const report = await runConformance(join(FIXTURES_DIR, "mimi-full"), "wgsl");
    expect(failures(report)).toEqual([]);
    expect(report).toMatchObject({ fixture: "mimi-full", decoder: "wgsl", pass: true });
    expect(report.cases.map((entry) => entry.case)).toEqual([
      "mimi_decoder.audio_single",
      "mimi_decoder.audio_chunked",
      "mimi_decoder.audio_whole",
      "mimi_decoder.audio_single_vs_onnx",
      ...STAGES.map((stage) => `mimi_decoder.intermediate.${stage}`),
    ]);
  }, 600_000);

  test("the CLI takes --decoder wgsl, prints one JSON report and exits 0; other decoders are refused", () => {
    const run = (decoder: string) => spawnSync(process.execPath, ["src/main.ts", "conformance", join(FIXTURES_DIR, "pocket-tiny"), "--decoder", decoder], { cwd: ROOT, maxBuffer: 1 << 24 });
    const result = run("wgsl");
    // On failure, say why: the cases that failed (exit 1) or what the process printed.
    const failedCases = () => {
      try {
        return (JSON.parse(result.stdout.toString()).cases as { case: string; pass: boolean; detail?: string; relRms?: number }[]).filter((entry) => !entry.pass);
      } catch {
        return result.stderr.toString().slice(-2000);
      }
    };
    expect({ status: result.status, why: result.status === 0 ? null : failedCases() }).toEqual({ status: 0, why: null });
    expect(JSON.parse(result.stdout.toString())).toMatchObject({ fixture: "pocket-tiny", decoder: "wgsl", pass: true });
    const refused = run("cuda");
    expect(refused.status).toBe(2);
    expect(refused.stderr.toString()).toMatch(/--decoder/);
    expect(refused.stderr.toString()).toMatch(/wgsl/);
  }, 300_000);
});
