/**
 * KV caches rebuilt from the graph's ScatterND writes (src/onnx/cache-writes.ts) against the same
 * graphs fetching their caches whole: the states, the conditioning and the audio must be bit-identical, on
 * both CPU providers.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadPocketBundle } from "../../src/models/pocket/bundle/load.ts";
import { applyScatterND, rewriteCacheWrites } from "../../src/onnx/cache-writes.ts";
import { createCacheWritingSession } from "../../src/models/pocket/sessions.ts";
import { loadOnnxRuntime, type CpuProvider } from "../../src/onnx/runtime.ts";
import { FLOW_LM_POSITIONS_AXIS } from "../../src/models/pocket/stages/state.ts";
import { FlowLm, voiceStateFromSafetensors } from "../../src/models/pocket/stages/flow-lm.ts";
import { MimiDecoder } from "../../src/models/pocket/stages/mimi-decoder.ts";
import { type FlowLmState } from "../../src/models/pocket/stages/state.ts";
import { requirePocketTinyFixture } from "../models/pocket/bundle-fixture.ts";
import { seededRandom } from "../../src/lib/seeded-random.ts";

describe("applyScatterND", () => {
  test("replaces the slices its index tuples select, negative indices counting from the end", () => {
    const dims = [2, 3, 4];
    const data = Float32Array.from({ length: 24 }, (_, index) => index);
    // Two tuples of length 2 select rows [1, 2] and [0, −3 → 0]; each update is a slice of 4.
    applyScatterND(data, dims, BigInt64Array.from([1n, 2n, 0n, -3n]), [2, 2], Float32Array.from([100, 101, 102, 103, 200, 201, 202, 203]));
    const expected = Float32Array.from({ length: 24 }, (_, index) => index);
    expected.set([100, 101, 102, 103], 20);
    expected.set([200, 201, 202, 203], 0);
    expect(data).toEqual(expected);
  });

  test("full-length tuples write single elements; out-of-range indices are refused", () => {
    const data = new Float32Array(6);
    applyScatterND(data, [2, 3], BigInt64Array.from([1n, 1n]), [1, 2], Float32Array.of(7));
    expect([...data]).toEqual([0, 0, 0, 0, 7, 0]);
    expect(() => applyScatterND(data, [2, 3], BigInt64Array.from([2n, 0n]), [1, 2], Float32Array.of(1))).toThrow(/outside axis 0/);
    expect(() => applyScatterND(data, [2, 3], BigInt64Array.from([1n]), [1, 1], Float32Array.of(1))).toThrow(/update values/);
  });
});

describe("graph rewrite", () => {
  test("finds the k and v writes of every cache in the fixture's flow_lm_main and mimi_decoder", async () => {
    const bundle = await loadPocketBundle(requirePocketTinyFixture());
    for (const [path, manifest] of [
      [bundle.graphs.flowLmMain.path, bundle.flowLmStateManifest],
      [bundle.graphs.mimiDecoder.path, bundle.mimiStateManifest],
    ] as const) {
      const caches = manifest.filter((entry) => entry.key === "cache");
      // The decoder graph passes the (unused) encoder transformer's caches through with Identity.
      const written = caches.filter((entry) => !entry.module.startsWith("encoder_transformer."));
      expect(written.length).toBeGreaterThan(0);
      const rewritten = rewriteCacheWrites(readFileSync(path), caches);
      expect(rewritten?.plans.map((plan) => plan.outputName)).toEqual(written.map((entry) => entry.outputName));
      for (const plan of rewritten!.plans) expect(plan.writes).toHaveLength(2);
    }
  });

  test("a graph whose state outputs are not ScatterND chains is left alone", async () => {
    const bundle = await loadPocketBundle(requirePocketTinyFixture());
    // The `previous` conv states are Slice/Concat outputs, not scatters.
    const previous = bundle.mimiStateManifest.filter((entry) => entry.key === "previous");
    expect(rewriteCacheWrites(readFileSync(bundle.graphs.mimiDecoder.path), previous)).toBeNull();
  });

  for (const provider of ["onnxruntime-node", "onnxruntime-web"] as const satisfies readonly CpuProvider[]) {
    test(`${provider}: rebuilt caches equal fetched caches exactly, with and without reuseState`, async () => {
      const bundle = await loadPocketBundle(requirePocketTinyFixture());
      const runtime = await loadOnnxRuntime({ provider });
      const { latentDim, conditioningDim, samplesPerFrame, flowLmCachePositions } = bundle.dims;
      const flowConfig = { latentDim, conditioningDim, cachePositions: flowLmCachePositions };
      const plainFlow = new FlowLm(await runtime.createSession(bundle.graphs.flowLmMain.path), bundle.flowLmStateManifest, flowConfig);
      const writing = await createCacheWritingSession(runtime, bundle.graphs.flowLmMain.path, bundle.flowLmStateManifest);
      expect(writing.cacheWrites.length).toBeGreaterThan(0);
      const rebuiltFlow = new FlowLm(writing.session, bundle.flowLmStateManifest, flowConfig, writing.cacheWrites);

      const random = seededRandom(7);
      const conditioning = { data: Float32Array.from({ length: 5 * conditioningDim }, () => random() - 0.5), dims: [1, 5, conditioningDim] };
      const latents = Array.from({ length: 4 }, () => Float32Array.from({ length: latentDim }, () => random() - 0.5));

      let plain = await plainFlow.prefill(plainFlow.emptyState(), conditioning);
      const voice = await rebuiltFlow.prefill(rebuiltFlow.emptyState(), conditioning);
      const voiceBefore = snapshot(voice);
      let rebuilt = await rebuiltFlow.prefill(voice, conditioning);
      plain = await plainFlow.prefill(plain, conditioning);
      // Without reuseState the shared input state is left as it was.
      expect(snapshot(voice)).toEqual(voiceBefore);
      for (const [index, latent] of [null, ...latents].entries()) {
        const expected = await plainFlow.step(plain, latent);
        const actual = await rebuiltFlow.step(rebuilt, latent, { reuseState: index % 2 === 1 });
        expect(actual.conditioning).toEqual(expected.conditioning);
        expect(actual.eosLogit).toBe(expected.eosLogit);
        expect(snapshot(actual.state)).toEqual(snapshot(expected.state));
        plain = expected.state;
        rebuilt = actual.state;
      }

      const decoderConfig = { latentDim, samplesPerFrame };
      const plainDecoder = new MimiDecoder(await runtime.createSession(bundle.graphs.mimiDecoder.path), bundle.mimiStateManifest, decoderConfig);
      const decoderWriting = await createCacheWritingSession(runtime, bundle.graphs.mimiDecoder.path, bundle.mimiStateManifest);
      const rebuiltDecoder = new MimiDecoder(decoderWriting.session, bundle.mimiStateManifest, decoderConfig, decoderWriting.cacheWrites);
      let plainState = plainDecoder.emptyState();
      let rebuiltState = rebuiltDecoder.emptyState();
      for (const [index, latent] of latents.entries()) {
        const expected = await plainDecoder.decode(plainState, latent);
        const actual = await rebuiltDecoder.decode(rebuiltState, latent, { reuseState: index > 0 });
        expect(actual.audio).toEqual(expected.audio);
        expect(snapshot(actual.state)).toEqual(snapshot(expected.state));
        plainState = expected.state;
        rebuiltState = actual.state;
      }
    });
  }
});

function snapshot(state: Pick<FlowLmState, "tensors">): unknown[] {
  return state.tensors.map((tensor) => Array.from(tensor.data as ArrayLike<number | bigint>, (value) => (typeof value === "bigint" ? Number(value) : value)));
}


describe("windowed FlowLM caches", () => {
  for (const provider of ["onnxruntime-node", "onnxruntime-web"] as const satisfies readonly CpuProvider[]) {
    test(`${provider}: caches hold only the rows in use, grow by blocks, and give the full cache's results exactly`, async () => {
      const bundle = await loadPocketBundle(requirePocketTinyFixture());
      const runtime = await loadOnnxRuntime({ provider });
      const { latentDim, conditioningDim, flowLmCachePositions } = bundle.dims;
      const config = { latentDim, conditioningDim, cachePositions: flowLmCachePositions };
      const writing = await createCacheWritingSession(runtime, bundle.graphs.flowLmMain.path, bundle.flowLmStateManifest, { positionsAxis: FLOW_LM_POSITIONS_AXIS });
      expect(writing.windowed.length).toBeGreaterThan(0);
      const windowedFlow = await FlowLm.create(writing.session, bundle.flowLmStateManifest, config, writing.cacheWrites, writing.windowed);
      // The same rewritten session with no windowed inputs named keeps all 1000 rows.
      const fullFlow = await FlowLm.create(writing.session, bundle.flowLmStateManifest, config, writing.cacheWrites);
      expect(windowedFlow.windowedCaches).toBe(true);
      expect(fullFlow.windowedCaches).toBe(false);
      const cacheIndex = bundle.flowLmStateManifest.findIndex((entry) => entry.key === "cache");
      const rows = (state: FlowLmState) => state.tensors[cacheIndex]!.dims[FLOW_LM_POSITIONS_AXIS];
      expect(rows(windowedFlow.emptyState())).toBe(64);
      expect(rows(fullFlow.emptyState())).toBe(1000);

      const random = seededRandom(11);
      const conditioning = { data: Float32Array.from({ length: 60 * conditioningDim }, () => random() - 0.5), dims: [1, 60, conditioningDim] };
      let windowed = await windowedFlow.prefill(windowedFlow.emptyState(), conditioning);
      let full = await fullFlow.prefill(fullFlow.emptyState(), conditioning);
      expect(rows(windowed)).toBe(64);
      // 10 steps take the cache from 60 to 70 positions: past the first block.
      for (let step = 0; step < 10; step++) {
        const latent = step === 0 ? null : Float32Array.from({ length: latentDim }, () => random() - 0.5);
        const a = await windowedFlow.step(windowed, latent, { reuseState: true });
        const b = await fullFlow.step(full, latent, { reuseState: true });
        expect(a.conditioning).toEqual(b.conditioning);
        expect(a.eosLogit).toBe(b.eosLogit);
        windowed = a.state;
        full = b.state;
      }
      expect(windowed.positions).toBe(70);
      expect(rows(windowed)).toBe(128);

      // A predefined voice read from its 1000-row file keeps only the blocks its step needs.
      const voice = await voiceStateFromSafetensors(readFileSync(join(requirePocketTinyFixture(), "voice_state.safetensors")), windowedFlow);
      expect(rows(voice)).toBe(windowedFlow.capacityFor(voice.positions));
      expect(rows(voice)).toBeLessThan(1000);
    });
  }
});
