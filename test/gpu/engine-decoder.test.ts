/**
 * The server's choice of Mimi decoder (src/models/pocket/decoder-choice.ts) on this machine, whose only
 * WebGPU adapter is a software one: auto keeps the CPU decoder, `--decoder wgsl` (or `--device gpu`) serves
 * with the WGSL kernels, and both give the same speech for a seed.
 */
import { describe, expect, test } from "bun:test";
import type { SynthesisJob } from "../../src/engine/adapter.ts";
import { compareTensors } from "../../src/models/pocket/conformance.ts";
import { PocketEngine } from "../../src/models/pocket/engine.ts";
import { fixtureBundle } from "../models/pocket/bundle-fixture.ts";

const BUNDLE = fixtureBundle();

async function speak(engine: PocketEngine, seed: number): Promise<Float32Array> {
  const job: SynthesisJob = { text: "Hello there, this is a test.", voice: engine.capabilities.defaultVoice, language: "en", seed, extraParams: {}, signal: new AbortController().signal };
  const pieces: number[] = [];
  for await (const chunk of engine.synthesize(job)) pieces.push(...chunk.samples);
  return Float32Array.from(pieces);
}

describe("Mimi decoder choice", () => {
  test("auto keeps the CPU decoder on a software adapter; --device cpu never asks for one", async () => {
    for (const device of ["auto", "cpu"] as const) {
      const engine = await PocketEngine.load(BUNDLE, { provider: "onnxruntime-node" }, { decoder: "auto", device });
      try {
        expect(engine.capabilities.description).not.toContain("WGSL");
      } finally {
        await engine.close();
      }
    }
  });

  test("--decoder wgsl serves with the WGSL kernels, and the speech matches the ONNX decoder's for a seed", async () => {
    const wgsl = await PocketEngine.load(BUNDLE, { provider: "onnxruntime-node" }, { decoder: "wgsl" });
    const onnx = await PocketEngine.load(BUNDLE, { provider: "onnxruntime-node" }, { decoder: "onnx" });
    try {
      expect(wgsl.capabilities.description).toContain("Mimi decoder on WGSL kernels");
      expect(onnx.capabilities.description).toContain("worker thread");
      const [fromGpu, fromCpu] = [await speak(wgsl, 3), await speak(onnx, 3)];
      expect(fromGpu.length).toBe(fromCpu.length);
      expect(fromGpu.length).toBeGreaterThan(0);
      // The same fp32 weights (the fixture has no int8 graphs) through different arithmetic.
      expect(compareTensors(fromGpu, fromCpu).relRms).toBeLessThan(1e-4);
      // A seed reproduces the GPU decoder's audio exactly.
      expect(await speak(wgsl, 3)).toEqual(fromGpu);
    } finally {
      await wgsl.close();
      await onnx.close();
    }
  });

  test("--device gpu takes the software adapter too: language model on the WebGPU EP, WGSL decoder, same speech", async () => {
    const gpu = await PocketEngine.load(BUNDLE, { provider: "onnxruntime-node" }, { decoder: "auto", device: "gpu" });
    const cpu = await PocketEngine.load(BUNDLE, { provider: "onnxruntime-node" }, { decoder: "onnx", device: "cpu" });
    try {
      expect(gpu.capabilities.description).toContain("(WebGPU)");
      expect(gpu.capabilities.description).toContain("Mimi decoder on WGSL kernels");
      expect(cpu.capabilities.description).toContain("(CPU)");
      const [fromGpu, fromCpu] = [await speak(gpu, 5), await speak(cpu, 5)];
      expect(fromGpu.length).toBe(fromCpu.length);
      expect(compareTensors(fromGpu, fromCpu).relRms).toBeLessThan(1e-4);
    } finally {
      await gpu.close();
      await cpu.close();
    }
  });
});
