/**
 * The language-model graphs on onnxruntime-web's WebGPU EP, on our shared device (src/onnx/webgpu.ts):
 * every pocket-tiny golden case through the EP, here on the software adapter.
 */
import { describe, expect, test } from "bun:test";
import { runConformance } from "../../src/conformance/harness.ts";
import { loadOnnxRuntime } from "../../src/onnx/runtime.ts";
import { requirePocketTinyFixture } from "../models/pocket/bundle-fixture.ts";
import { gpuForTests } from "../gpu/support.ts";

/** Every golden case on the software adapter, in calls of 3 streams: ~40 s alone on 2 cores, 2–3× that on a busy machine. */
const GOLDEN_RUN_TIMEOUT_MS = 360_000;

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

  // One run, in calls of 3 streams, as the server runs the EP: once loaded, every request steps through the
  // batched step, and the load has checked that step against the published graph's (within 1e-5) on the EP.
  test("pocket-tiny: every golden case passes through the EP (tokenizer to end-to-end audio), FlowLM's batched step inside model calls of 3 streams", async () => {
    const { device } = await gpuForTests();
    const report = await runConformance(requirePocketTinyFixture(), "onnx", { gpuDevice: device }, 3);
    const failures = report.cases.filter((entry) => !entry.pass).map((entry) => `${entry.case}: ${entry.detail ?? `relRms ${entry.relRms}`}`);
    expect(failures).toEqual([]);
    expect(report).toMatchObject({ executionProvider: "webgpu", batch: 3, pass: true });
    expect(report.cases.length).toBeGreaterThan(50);
    expect(report.cases.filter((entry) => entry.detail === "in calls of 3 streams").length).toBeGreaterThan(0);
  }, GOLDEN_RUN_TIMEOUT_MS);
});
