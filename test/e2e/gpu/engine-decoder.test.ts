/**
 * The server's choice of Mimi decoder (src/models/pocket/decoder/choice.ts): auto takes the WGSL kernels on
 * a real GPU only, `--decoder wgsl` (or `--device gpu`) on any adapter, the software one here included, and
 * both decoders give the same speech for a seed.
 */
import { describe, expect, test } from "bun:test";
import type { SynthesisJob } from "../../../src/models/contract.ts";
import { compareTensors } from "../../../src/conformance/report.ts";
import { PocketModel } from "../../../src/models/pocket/model.ts";
import { silentLogger } from "../../../src/log/logger.ts";
import { fixtureBundle } from "../../models/pocket/bundle-fixture.ts";
import { gpuForTests } from "../../gpu/support.ts";
import { engineFor, speak as speakThrough } from "../../support/engine.ts";

const BUNDLE = fixtureBundle();

async function speak(engine: PocketModel, seed: number): Promise<Float32Array> {
  const job: SynthesisJob = { text: "Hello there, this is a test.", voice: engine.capabilities.defaultVoice, language: "en", seed: BigInt(seed), extraParams: {}, signal: new AbortController().signal };
  const pieces: number[] = [];
  const scheduler = engineFor(engine);
  try {
    for await (const chunk of speakThrough(scheduler, job)) pieces.push(...chunk.samples);
  } finally {
    await scheduler.close();
  }
  return Float32Array.from(pieces);
}

describe("Mimi decoder choice", () => {
  test("auto takes the WGSL decoder only on a real GPU (not the software adapter here); --device cpu never", async () => {
    const { isSoftware } = await gpuForTests();
    for (const device of ["auto", "cpu"] as const) {
      const engine = await PocketModel.load(BUNDLE, { provider: "onnxruntime-node" }, { logger: silentLogger, decoder: "auto", device });
      try {
        expect(engine.capabilities.description.includes("WGSL")).toBe(device === "auto" && !isSoftware);
      } finally {
        await engine.close();
      }
    }
  });

  test("with the WGSL decoder, more concurrent requests than its 16 state slots wait their turn instead of failing", async () => {
    const engine = await PocketModel.load(BUNDLE, { provider: "onnxruntime-node" }, { logger: silentLogger, decoder: "wgsl" });
    // Asked for more streams than the decoder has slots: the engine runs 16 and queues the rest.
    const scheduler = engineFor(engine, { maxStreams: 64 });
    expect(scheduler.limits.maxStreams).toBe(16);
    try {
      const requests = Array.from({ length: 20 }, async (_, index) => {
        const job: SynthesisJob = { text: "Hi.", voice: engine.capabilities.defaultVoice, language: "en", seed: BigInt(index), maxNewTokens: 3, extraParams: {}, signal: new AbortController().signal };
        let samples = 0;
        for await (const chunk of speakThrough(scheduler, job)) samples += chunk.samples.length;
        return samples;
      });
      expect(await Promise.all(requests)).toEqual(Array<number>(20).fill(3 * 1920));
    } finally {
      await scheduler.close();
      await engine.close();
    }
  });

  test("on WGSL the engine decodes streams with the same frame count in one call, and a stream's bytes are those it has alone", async () => {
    const model = await PocketModel.load(BUNDLE, { provider: "onnxruntime-node" }, { logger: silentLogger, decoder: "wgsl" });
    const scheduler = engineFor(model);
    const decodeRows: number[] = [];
    scheduler.observer = { tick: (_, sizes) => decodeRows.push(...(sizes.decode ?? [])), finished: () => {}, rejected: () => {} };
    const job = (seed: number): SynthesisJob => ({ text: "Hello there, this is a test.", voice: model.capabilities.defaultVoice, language: "en", seed: BigInt(seed), extraParams: {}, signal: new AbortController().signal });
    const samplesOf = async (seed: number) => Float32Array.from((await Array.fromAsync(speakThrough(scheduler, job(seed)))).flatMap((chunk) => [...chunk.samples]));
    try {
      const alone = await samplesOf(5);
      const together = await Promise.all([5, 6, 7, 5].map(samplesOf));
      expect(together[0]).toEqual(alone);
      expect(together[3]).toEqual(alone);
      expect(together[1]).not.toEqual(alone);
      expect(Math.max(...decodeRows)).toBeGreaterThan(1);
    } finally {
      await scheduler.close();
      await model.close();
    }
  });

  test("--decoder wgsl serves with the WGSL kernels, and the speech matches the ONNX decoder's for a seed", async () => {
    const wgsl = await PocketModel.load(BUNDLE, { provider: "onnxruntime-node" }, { logger: silentLogger, decoder: "wgsl" });
    const onnx = await PocketModel.load(BUNDLE, { provider: "onnxruntime-node" }, { logger: silentLogger, decoder: "onnx", device: "cpu" });
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
    const gpu = await PocketModel.load(BUNDLE, { provider: "onnxruntime-node" }, { logger: silentLogger, decoder: "auto", device: "gpu" });
    const cpu = await PocketModel.load(BUNDLE, { provider: "onnxruntime-node" }, { logger: silentLogger, decoder: "onnx", device: "cpu" });
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
