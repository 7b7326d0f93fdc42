/**
 * The language-model graphs on onnxruntime-web's WebGPU EP, on our shared device (src/onnx/webgpu.ts):
 * every pocket-tiny golden case through the EP, here on the software adapter.
 */
import { describe, expect, test } from "bun:test";
import { runConformance } from "../../src/conformance/harness.ts";
import { loadOnnxRuntime } from "../../src/onnx/runtime.ts";
import { requirePocketTinyFixture } from "../models/pocket/bundle-fixture.ts";
import { gpuForTests } from "../gpu/support.ts";

/** Every golden case on the software adapter: ~20–30 s alone on 2 cores, 2–3× that on a busy machine. */
const GOLDEN_RUN_TIMEOUT_MS = 180_000;

describe("onnxruntime-web WebGPU EP on the shared device", () => {
  test("opens sessions on the WebGPU EP, one at a time even when asked for together", async () => {
    const { device } = await gpuForTests();
    const runtime = await loadOnnxRuntime({ gpuDevice: device });
    expect(runtime.executionProvider).toBe("webgpu");
    const dir = requirePocketTinyFixture();
    const sessions = await Promise.all(["text_conditioner.onnx", "flow_lm_flow.onnx"].map((file) => runtime.createSession(`${dir}/${file}`)));
    for (const session of sessions) expect(session.executionProvider).toBe("webgpu");
    await Promise.all(sessions.map((session) => session.release()));
  });

  test("pocket-tiny: every golden case passes through the EP (tokenizer to end-to-end audio)", async () => {
    const { device } = await gpuForTests();
    const report = await runConformance(requirePocketTinyFixture(), "onnx", { gpuDevice: device });
    const failures = report.cases.filter((entry) => !entry.pass).map((entry) => `${entry.case}: ${entry.detail ?? `relRms ${entry.relRms}`}`);
    expect(failures).toEqual([]);
    expect(report.pass).toBe(true);
    expect(report.cases.length).toBeGreaterThan(50);
  }, GOLDEN_RUN_TIMEOUT_MS);

  test("pocket-tiny inside model calls of 3 streams: FlowLM's batched step runs on the EP and passes", async () => {
    const { device } = await gpuForTests();
    const report = await runConformance(requirePocketTinyFixture(), "onnx", { gpuDevice: device }, 3);
    const failures = report.cases.filter((entry) => !entry.pass).map((entry) => `${entry.case}: ${entry.detail ?? `relRms ${entry.relRms}`}`);
    expect(failures).toEqual([]);
    expect(report).toMatchObject({ executionProvider: "webgpu", batch: 3, pass: true });
    expect(report.cases.filter((entry) => entry.detail === "in calls of 3 streams").length).toBeGreaterThan(0);
  }, GOLDEN_RUN_TIMEOUT_MS);
});
