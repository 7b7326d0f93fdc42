/**
 * The model's runner under the server's engine against the path the golden cases check (engine/generate.ts with
 * a GenerationJob, conformance/harness.ts): for any seed and parameters, a job the engine plans from its text,
 * voice name and extra_params, advanced tick by tick alone or beside others, gives exactly the samples of the
 * same generation made by hand and run alone on sessions of its own; and its state is gone once the request ends.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { SynthesisJob } from "../../../src/models/contract.ts";
import { loadPocketBundle } from "../../../src/models/pocket/bundle/load.ts";
import { type PocketBundle } from "../../../src/models/pocket/bundle/pocket-bundle.ts";
import { generate } from "../../../src/engine/generate.ts";
import { chunkTokenBudget, planTextChunks } from "../../../src/models/pocket/text-chunks.ts";
import { generationJob, PocketRunner } from "../../../src/models/pocket/runner.ts";
import { PocketModel } from "../../../src/models/pocket/model.ts";
import { generationParams } from "../../../src/models/pocket/params.ts";
import { createPocketStages, type PocketStages } from "../../../src/models/pocket/pipeline.ts";
import { closePocketSessions, openPocketSessions, type PocketSessions } from "../../../src/models/pocket/sessions.ts";
import { voiceStateFromSafetensors } from "../../../src/models/pocket/stages/flow-lm.ts";
import { SentencePieceTokenizer } from "../../../src/text/sentencepiece.ts";
import { silentLogger } from "../../../src/log/logger.ts";
import { concatFloat32 } from "../../../src/lib/concat.ts";
import { engineFor, speak } from "../../support/engine.ts";
import { fixtureBundle } from "./bundle-fixture.ts";

const BUNDLE = fixtureBundle();
let model: PocketModel;
let bundle: PocketBundle;
let sessions: PocketSessions;
let stages: PocketStages;
let tokenizer: SentencePieceTokenizer;

beforeAll(async () => {
  // In-process decoding on both sides: the same sessions' kind, so equal means bit-identical.
  model = await PocketModel.load(BUNDLE, {}, { logger: silentLogger, decoderWorker: false, decoder: "onnx", device: "cpu" });
  bundle = await loadPocketBundle(BUNDLE, { precision: "int8" });
  sessions = await openPocketSessions(bundle);
  stages = await createPocketStages(bundle, sessions);
  tokenizer = await SentencePieceTokenizer.fromFile((bundle.tokenizer as { modelPath: string }).modelPath);
});
afterAll(async () => {
  await model.close();
  await closePocketSessions(sessions);
});

function job(text: string, seed: bigint, extraParams: Record<string, unknown> = {}, maxNewTokens?: number): SynthesisJob {
  return { text, voice: "alba", language: "Auto", seed, extraParams, maxNewTokens, signal: new AbortController().signal };
}

async function reference(request: SynthesisJob): Promise<Float32Array> {
  const voice = await voiceStateFromSafetensors(new Uint8Array(await readFile(join(BUNDLE, "voices", "alba.safetensors"))), stages.flowLm);
  const chunks = planTextChunks(request.text, tokenizer, bundle.flags, chunkTokenBudget(bundle.flags.maxTokensPerChunk, stages.flowLm.config.cachePositions, voice.positions));
  const pieces: Float32Array[] = [];
  let frames = 0;
  const timing = { nativeSampleRateHz: bundle.dims.sampleRateHz, framesPerSecond: bundle.dims.frameRateHz };
  for await (const frame of generate(PocketRunner.forStages(stages, bundle.dims.sampleRateHz), timing, generationJob({ voice, chunks, params: generationParams(request.extraParams), seed: request.seed }))) {
    pieces.push(Float32Array.from(frame.samples));
    if (++frames >= (request.maxNewTokens ?? Infinity)) break;
  }
  return concatFloat32(pieces);
}

const CASES: Array<{ name: string; job: SynthesisJob }> = [
  { name: "defaults, several text chunks", job: job("Hello there, how are you? ".repeat(8), 5n) },
  { name: "an EOS that fires at once (eos_threshold −10, frames_after_eos 0)", job: job("Hello there.", 6n, { eos_threshold: -10, frames_after_eos: 0 }) },
  { name: "two LSD steps at a low temperature", job: job("Good morning to you.", 7n, { lsd_steps: 2, temperature: 0.3 }) },
  { name: "max_new_tokens 7", job: job("Good morning to you, and good night.", 8n, {}, 7) },
];

describe("PocketRunner", () => {
  for (const { name, job: request } of CASES) {
    test(`${name}: the engine's samples are those of its generation made by hand, alone and beside other requests`, async () => {
      const expected = await reference(request);
      const engine = engineFor(model);
      try {
        const alone = concatFloat32(await Array.fromAsync(speak(engine, request), (chunk) => chunk.samples));
        expect(alone.length).toBe(expected.length);
        expect(alone).toEqual(expected);
        const flowHeadRows: number[] = [];
        engine.observer = { tick: (_, sizes) => flowHeadRows.push(...(sizes.flow_head ?? [])), finished: () => {}, rejected: () => {} };
        const crowd = await Promise.all([request, job("Another text entirely.", 99n), request, job("And a third one, longer than the others.", 100n, { lsd_steps: 3 })].map((each) => Array.fromAsync(speak(engine, each), (chunk) => chunk.samples)));
        expect(concatFloat32(crowd[0]!)).toEqual(expected);
        expect(concatFloat32(crowd[2]!)).toEqual(expected);
        // The rows sharing their LSD steps went through the flow head in one call.
        expect(Math.max(...flowHeadRows)).toBeGreaterThan(1);
      } finally {
        await engine.close();
      }
      expect(model.runner.stateBytes()).toBe(0);
    });
  }

  test("a runner made without job planning refuses a job, saying why", async () => {
    const generationsOnly = PocketRunner.forStages(stages, bundle.dims.sampleRateHz);
    const output = generationsOnly.execute({ newRequests: [{ requestId: 1, job: job("Hello.", 1n) }], prefills: [1], steps: [], decodes: [], finishedRequestIds: [] });
    await expect(output).rejects.toThrow("not jobs: it was made without job planning");
  });

  test("finish reasons: stop when EOS ends the speech, length when a cap cuts it", async () => {
    const engine = engineFor(model);
    try {
      const stopped = await engine.submit(job("Hello there.", 6n, { eos_threshold: -10, frames_after_eos: 0 }));
      for await (const _ of stopped);
      expect(stopped.finishReason).toBe("stop");
      const capped = await engine.submit(job("Hello there.", 6n, {}, 2));
      for await (const _ of capped);
      expect(capped.finishReason).toBe("length");
    } finally {
      await engine.close();
    }
  });
});
