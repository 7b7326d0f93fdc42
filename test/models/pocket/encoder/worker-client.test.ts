/**
 * The Mimi encoder's worker thread as encodes need it (src/models/pocket/encoder/worker-client.ts), on the
 * pocket-tiny fixture: none until the first encode, closed when idle and started again by the next, the same
 * latents as the in-process session each time, and the in-process session reopened only when a worker
 * cannot start.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadPocketBundle } from "../../../../src/models/pocket/bundle/load.ts";
import type { PocketBundle } from "../../../../src/models/pocket/bundle/pocket-bundle.ts";
import { closePocketSessions, openPocketSessions, type PocketSessions } from "../../../../src/models/pocket/sessions.ts";
import { createPocketStages, type PocketStages } from "../../../../src/models/pocket/pipeline.ts";
import { OnDemandVoiceEncoderWorker, WorkerVoiceEncoderGraph } from "../../../../src/models/pocket/encoder/worker-client.ts";
import { runEncoder, VoiceEncoder } from "../../../../src/models/pocket/stages/voice-encoder.ts";
import { loadOnnxRuntime } from "../../../../src/onnx/runtime.ts";
import { requirePocketTinyFixture } from "../bundle-fixture.ts";
import { eventually } from "../../../support/eventually.ts";

let bundle: PocketBundle;
let sessions: PocketSessions;
let stages: PocketStages;
const clip = Float32Array.from({ length: 1920 * 6 }, (_, index) => 0.3 * Math.sin(index * 0.011) + 0.1 * Math.sin(index * 0.17));

beforeAll(async () => {
  bundle = await loadPocketBundle(requirePocketTinyFixture());
  sessions = await openPocketSessions(bundle, { provider: "onnxruntime-node" });
  stages = await createPocketStages(bundle, sessions);
});

afterAll(async () => {
  await closePocketSessions(sessions);
});


describe("the encoder worker on demand", () => {
  test("starts with the first encode, closes when idle, starts again for the next: the same latents each time", async () => {
    const expected = await runEncoder(sessions.voiceEncoder!, clip.slice(), bundle.dims.conditioningDim);
    const worker = new OnDemandVoiceEncoderWorker({ path: bundle.graphs.voiceEncoder!.path, provider: "onnxruntime-node", idleMs: 50 });
    try {
      expect(worker.running).toBe(false);
      expect(worker.starts).toBe(0);
      const first = await worker.run(clip);
      expect(worker.starts).toBe(1);
      expect(Array.from(first.data)).toEqual(Array.from(expected.data));
      expect(first.dims).toEqual(expected.dims);
      await eventually("the idle worker closed", () => !worker.running);
      const second = await worker.run(clip);
      expect(worker.starts).toBe(2);
      expect(Array.from(second.data)).toEqual(Array.from(expected.data));
      expect(worker.failed).toBe(false);
    } finally {
      await worker.close();
    }
    expect(worker.failed).toBe(true);
    await expect(worker.run(clip)).rejects.toThrow(/closed/);
  });

  test("runs that arrive together share one worker, which stays while any runs", async () => {
    const worker = new OnDemandVoiceEncoderWorker({ path: bundle.graphs.voiceEncoder!.path, provider: "onnxruntime-node", idleMs: 50 });
    try {
      const results = await Promise.all([worker.run(clip), worker.run(clip.subarray(0, 1920 * 3)), worker.run(clip)]);
      expect(worker.starts).toBe(1);
      expect(results.map((result) => result.dims[1])).toEqual([results[0]!.dims[1], results[1]!.dims[1], results[0]!.dims[1]]);
    } finally {
      await worker.close();
    }
  });

  test("a worker that cannot start fails the run and marks the worker failed; the voice encoder then reopens its own session, once", async () => {
    let startCalls = 0;
    const worker = new OnDemandVoiceEncoderWorker({ path: "/nonexistent/mimi_encoder.onnx", provider: "onnxruntime-node" }, (options) => {
      startCalls++;
      return WorkerVoiceEncoderGraph.start(options);
    });
    await expect(worker.run(clip)).rejects.toThrow(/could not start/);
    expect(worker.failed).toBe(true);
    await expect(worker.run(clip)).rejects.toThrow(/could not start/);
    expect(startCalls).toBe(1);

    const openEncoderSession = async () => (await loadOnnxRuntime({ provider: "onnxruntime-node" })).createSession(bundle.graphs.voiceEncoder!.path);
    const encoder = await VoiceEncoder.create(await openEncoderSession(), { samplesPerFrame: bundle.dims.samplesPerFrame, conditioningDim: bundle.dims.conditioningDim, bosBeforeVoice: bundle.bosBeforeVoice });
    const expected = await stages.voiceEncoder!.encode(clip);
    let reopened = 0;
    await encoder.runOffThread({ run: (audio) => worker.run(audio), failed: () => worker.failed }, async () => {
      reopened++;
      return openEncoderSession();
    });
    expect(encoder.inProcessSessionOpen).toBe(false);
    expect(encoder.offThread).toBe(false);
    const [a, b] = await Promise.all([encoder.encode(clip), encoder.encode(clip)]);
    expect(reopened).toBe(1);
    expect(encoder.inProcessSessionOpen).toBe(true);
    expect(Array.from(a.data)).toEqual(Array.from(expected.data));
    expect(Array.from(b.data)).toEqual(Array.from(expected.data));
    await encoder.close();
  });
});
