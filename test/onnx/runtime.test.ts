/**
 * Both CPU providers behind one API: each that loads in this runtime passes the pocket-tiny golden checks
 * and generates the same audio for a seed as the other; "auto" falls back when the preferred one fails
 * to load; every tensor a stage makes or gets back belongs to its session's package.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadPocketBundle } from "../../src/models/pocket/bundle/load.ts";
import type { PocketBundle } from "../../src/models/pocket/bundle/pocket-bundle.ts";
import { runConformance } from "../../src/conformance/harness.ts";
import { compareTensors } from "../../src/conformance/report.ts";
import { generate } from "../../src/engine/generate.ts";
import { planTextChunks } from "../../src/models/pocket/text-chunks.ts";
import { generationJob, PocketRunner } from "../../src/models/pocket/runner.ts";
import { AUTO_PROVIDER_ORDER, importOnnxPackage, loadOnnxRuntime, type CpuProvider, type OnnxPackageLoader } from "../../src/onnx/runtime.ts";
import { closePocketSessions, openPocketSessions, type PocketSessions } from "../../src/models/pocket/sessions.ts";
import { createPocketStages, type PocketStages } from "../../src/models/pocket/pipeline.ts";
import { voiceStateFromSafetensors } from "../../src/models/pocket/stages/flow-lm.ts";
import { SentencePieceTokenizer } from "../../src/text/sentencepiece.ts";
import { POCKET_TINY_FIXTURE } from "../models/pocket/bundle-fixture.ts";

const PROVIDERS: readonly CpuProvider[] = ["onnxruntime-node", "onnxruntime-web"];
/** Which providers load here; one that does not (e.g. no prebuilt binary for this platform) is skipped, not failed. */
const loads = Object.fromEntries(await Promise.all(PROVIDERS.map(async (provider) => [provider, await loadOnnxRuntime({ provider }).then(() => true, () => false)] as const))) as Record<CpuProvider, boolean>;
/** Two float32 implementations of the same graphs land near 1e-6 (stages.test.ts); this leaves room for the AR feedback. */
const CROSS_PROVIDER_REL_RMS = 1e-4;

/** Fails the named providers' imports, as a missing native binding would. */
function failingLoader(...failing: CpuProvider[]): OnnxPackageLoader {
  return async (provider) => {
    if (failing.includes(provider)) throw new Error(`simulated: ${provider} has no binding here`);
    return importOnnxPackage(provider);
  };
}

describe.each(PROVIDERS)("%s", (provider) => {
  test.skipIf(!loads[provider])("passes every pocket-tiny golden case", async () => {
    const report = await runConformance(POCKET_TINY_FIXTURE, "onnx", { provider });
    expect(report.cases.filter((entry) => !entry.pass).map((entry) => `${entry.case}: ${entry.detail ?? `relRms ${entry.relRms}`}`)).toEqual([]);
    expect(report).toMatchObject({ fixture: "pocket-tiny", provider, pass: true });
  });

  test.skipIf(!loads[provider])("stages build their tensors with the session's package, and its outputs come back as that package's", async () => {
    const bundle = await loadPocketBundle(POCKET_TINY_FIXTURE);
    const sessions = await openPocketSessions(bundle, { provider });
    try {
      expect(sessions.provider).toBe(provider);
      const stages = await createPocketStages(bundle, sessions);
      const Tensor = sessions.flowLmMain.Tensor;
      const empty = stages.flowLm.emptyState();
      expect(empty.tensors.every((tensor) => tensor instanceof Tensor)).toBe(true);
      const { state } = await stages.flowLm.step(empty, null);
      expect(state.tensors.every((tensor) => tensor instanceof Tensor)).toBe(true);
      const voice = await voiceStateFromSafetensors(readFileSync(join(POCKET_TINY_FIXTURE, "voice_state.safetensors")), stages.flowLm);
      expect(voice.tensors.every((tensor) => tensor instanceof Tensor)).toBe(true);
    } finally {
      await closePocketSessions(sessions);
    }
  });
});

describe.skipIf(!loads["onnxruntime-node"] || !loads["onnxruntime-web"])("both providers", () => {
  let bundle: PocketBundle;
  const opened: PocketSessions[] = [];
  const stagesOf = {} as Record<CpuProvider, PocketStages>;

  beforeAll(async () => {
    bundle = await loadPocketBundle(POCKET_TINY_FIXTURE);
    for (const provider of PROVIDERS) {
      const sessions = await openPocketSessions(bundle, { provider });
      opened.push(sessions);
      stagesOf[provider] = await createPocketStages(bundle, sessions);
    }
  });

  afterAll(async () => {
    await Promise.all(opened.map(closePocketSessions));
  });

  test("generate the same audio for a seed, within float tolerance", async () => {
    const tokenizer = await SentencePieceTokenizer.fromFile(join(POCKET_TINY_FIXTURE, "tokenizer.model"));
    const chunks = planTextChunks("Hello there, tiny model. A second sentence follows.", tokenizer, bundle.flags);
    const voiceBytes = readFileSync(join(POCKET_TINY_FIXTURE, "voice_state.safetensors"));
    const audioOf = async (provider: CpuProvider) => {
      const stages = stagesOf[provider];
      const voice = await voiceStateFromSafetensors(voiceBytes, stages.flowLm);
      const samples: number[] = [];
      // EOS disabled, so both run the same number of frames and any drift in the AR feedback shows.
      const timing = { nativeSampleRateHz: bundle.dims.sampleRateHz, framesPerSecond: bundle.dims.frameRateHz };
      const job = generationJob({ voice, chunks, seed: 7, params: { eosThreshold: Number.POSITIVE_INFINITY } });
      for await (const frame of generate(PocketRunner.forStages(stages, bundle.dims.sampleRateHz), timing, job)) samples.push(...frame.samples);
      return samples;
    };
    const node = await audioOf("onnxruntime-node");
    const web = await audioOf("onnxruntime-web");
    expect(node.length).toBeGreaterThan(50 * 1920);
    expect(web.length).toBe(node.length);
    expect(compareTensors(node, web).relRms).toBeLessThanOrEqual(CROSS_PROVIDER_REL_RMS);
  });
});

describe("provider choice", () => {
  test.skipIf(!loads[AUTO_PROVIDER_ORDER[0]!])("auto takes the measured-faster provider when it loads", async () => {
    expect((await loadOnnxRuntime()).provider).toBe(AUTO_PROVIDER_ORDER[0]!);
  });

  test.skipIf(!loads[AUTO_PROVIDER_ORDER[1]!])("auto falls back to the other provider when the preferred one fails to load", async () => {
    const bundle = await loadPocketBundle(POCKET_TINY_FIXTURE);
    const sessions = await openPocketSessions(bundle, { loader: failingLoader(AUTO_PROVIDER_ORDER[0]!) });
    try {
      expect(sessions.provider).toBe(AUTO_PROVIDER_ORDER[1]!);
      expect(sessions.flowLmMain.provider).toBe(AUTO_PROVIDER_ORDER[1]!);
      const stages = await createPocketStages(bundle, sessions);
      const embeddings = await stages.textConditioner.embed([2994, 310]);
      expect(embeddings.dims).toEqual([1, 2, bundle.dims.conditioningDim]);
    } finally {
      await closePocketSessions(sessions);
    }
  });

  test("an explicitly chosen provider that fails to load is an error, not a fallback", async () => {
    await expect(loadOnnxRuntime({ provider: "onnxruntime-node", loader: failingLoader("onnxruntime-node") })).rejects.toThrow("onnxruntime-node: simulated");
  });

  test("when neither loads, the error names both failures", async () => {
    const failure = loadOnnxRuntime({ loader: failingLoader("onnxruntime-node", "onnxruntime-web") });
    await expect(failure).rejects.toThrow(/onnxruntime-node: simulated.*onnxruntime-web: simulated/);
  });
});

describe("session choices", () => {
  /** onnxruntime-node with InferenceSession.create recording the options each session was made with. */
  function recordingLoader(seen: Array<Record<string, unknown>>): OnnxPackageLoader {
    return async (provider) => {
      const real = await importOnnxPackage(provider);
      const InferenceSession = {
        create: async (source: unknown, options: Record<string, unknown>) => {
          seen.push(options);
          return real.InferenceSession.create(source as string, options);
        },
      } as unknown as typeof real.InferenceSession;
      return { ...real, InferenceSession };
    };
  }

  test("onnxruntime-node's CPU arena is off unless a session asks for it (the decoder workers do)", async () => {
    const seen: Array<Record<string, unknown>> = [];
    const runtime = await loadOnnxRuntime({ provider: "onnxruntime-node", loader: recordingLoader(seen) });
    const path = join(POCKET_TINY_FIXTURE, "mimi_decoder.onnx");
    await (await runtime.createSession(path)).release();
    await (await runtime.createSession(path, undefined, { memoryArena: true })).release();
    expect(seen.map((options) => options.enableCpuMemArena)).toEqual([false, true]);
  });
});
