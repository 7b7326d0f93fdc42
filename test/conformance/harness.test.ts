import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runConformance } from "../../src/conformance/harness.ts";
import type { ConformanceReport } from "../../src/conformance/report.ts";

const FIXTURES_DIR = join(import.meta.dir, "../../../shared/fixtures");

const scratchDirs: string[] = [];
afterEach(() => {
  for (const dir of scratchDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function failures(report: ConformanceReport): string[] {
  return report.cases.filter((entry) => !entry.pass).map((entry) => `${entry.case}: ${entry.detail ?? `maxAbs ${entry.maxAbs}, relRms ${entry.relRms}`}`);
}

/** Golden case names, e.g. `flow_lm`, that a report's case names start with. */
function caseKeys(fixture: string): string[] {
  return Object.keys(JSON.parse(readFileSync(join(FIXTURES_DIR, fixture, "golden.json"), "utf8")).cases);
}

// Both CPU providers, pinned: "auto" would test only the one preferred on this runtime.
describe.each(["onnxruntime-web", "onnxruntime-node"] as const)("conformance with the ONNX decoder on %s", (provider) => {
  test("pocket-tiny: every golden case runs and passes", async () => {
    const report = await runConformance(join(FIXTURES_DIR, "pocket-tiny"), "onnx", { provider });
    expect(failures(report)).toEqual([]);
    expect(report).toMatchObject({ fixture: "pocket-tiny", decoder: "onnx", provider, pass: true });
    for (const key of caseKeys("pocket-tiny")) expect(report.cases.some((entry) => entry.case.startsWith(key))).toBe(true);
    const stages = new Set(report.cases.filter((entry) => entry.observable !== false).map((entry) => entry.stage));
    expect([...stages].sort()).toEqual(["decoder", "encoder", "end_to_end", "flow_head", "flow_lm", "text_conditioner", "tokenizer"]);
    // Only graph-internal values may go uncompared.
    const unobserved = report.cases.filter((entry) => entry.maxAbs === null);
    expect(unobserved.every((entry) => entry.observable === false && /intermediate|mimi_latents/.test(entry.case))).toBe(true);
  });

  test("mimi-full: the full-size decoder matches in single, chunked and whole-sequence calls", async () => {
    const report = await runConformance(join(FIXTURES_DIR, "mimi-full"), "onnx", { provider });
    expect(failures(report)).toEqual([]);
    expect(report).toMatchObject({ provider, pass: true });
    const audio = report.cases.filter((entry) => /^mimi_decoder\.audio_/.test(entry.case));
    expect(audio.map((entry) => entry.case)).toEqual(["mimi_decoder.audio_single", "mimi_decoder.audio_chunked", "mimi_decoder.audio_whole"]);
    for (const entry of audio) expect(entry.maxAbs!).toBeLessThan(2e-5);
  });
});

describe("conformance --batch", () => {
  test("pocket-tiny: every golden case passes with each end-to-end request beside 7 others in one runner's calls", async () => {
    const report = await runConformance(join(FIXTURES_DIR, "pocket-tiny"), "onnx", {}, 8);
    expect(failures(report)).toEqual([]);
    expect(report).toMatchObject({ fixture: "pocket-tiny", batch: 8, pass: true });
    const endToEnd = report.cases.filter((entry) => /^end_to_end\[\d+\]\.audio$/.test(entry.case));
    expect(endToEnd.length).toBeGreaterThan(0);
    for (const entry of endToEnd) expect(entry.detail).toStartWith("beside 7 other requests in the same runner: FlowLM calls of up to 8 streams");
    // The golden requests stepped in calls of all eight (a case of its own, so a smaller batch fails the report).
    expect(report.cases.filter((entry) => entry.case.endsWith(".widest_flow_lm_call")).map((entry) => entry.pass)).toEqual(endToEnd.map(() => true));
  });
});

describe("conformance reports", () => {
  test("a golden case without a runner fails the report instead of being skipped", async () => {
    const dir = mkdtempSync(join(tmpdir(), "voxedge-conformance-"));
    scratchDirs.push(dir);
    for (const name of ["golden.json", "golden.safetensors"]) cpSync(join(FIXTURES_DIR, "mimi-full", name), join(dir, name));
    chmodSync(join(dir, "golden.json"), 0o644);
    const golden = JSON.parse(readFileSync(join(dir, "golden.json"), "utf8"));
    // Keep the run cheap: no decoder case, one unknown case.
    golden.cases = { speaker_embedding: { description: "a case from the future" } };
    writeFileSync(join(dir, "golden.json"), JSON.stringify(golden));
    const report = await runConformance(dir, "onnx");
    expect(report.pass).toBe(false);
    expect(report.cases).toEqual([{ case: "speaker_embedding", stage: "end_to_end", maxAbs: null, relRms: null, pass: false, detail: "golden case has no conformance runner" }]);
  });

  test("a case whose inputs are missing is reported as not run", async () => {
    const dir = mkdtempSync(join(tmpdir(), "voxedge-conformance-"));
    scratchDirs.push(dir);
    for (const name of ["golden.json", "golden.safetensors"]) cpSync(join(FIXTURES_DIR, "mimi-full", name), join(dir, name));
    // No mimi_decoder.onnx in this copy.
    const report = await runConformance(dir, "onnx");
    expect(report.pass).toBe(false);
    expect(report.cases).toHaveLength(1);
    expect(report.cases[0]).toMatchObject({ case: "mimi_decoder", stage: "decoder", pass: false });
    expect(report.cases[0]!.detail).toStartWith("not run:");
  });
});
