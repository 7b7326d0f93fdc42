/**
 * The Mimi decoder in a worker thread (src/models/pocket/decoder/worker-client.ts) against the in-process decoder
 * on the pocket-tiny fixture: the same audio for every split of the latents, states that behave as values,
 * failures that reject instead of hanging, and fallbacks logged through the logger passed in.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadPocketBundle } from "../../../../src/models/pocket/bundle/load.ts";
import type { PocketBundle } from "../../../../src/models/pocket/bundle/pocket-bundle.ts";
import { closePocketSessions, openPocketSessions, type PocketSessions } from "../../../../src/models/pocket/sessions.ts";
import { createPocketStages, type PocketStages } from "../../../../src/models/pocket/pipeline.ts";
import { startDecoderWorker, startDecoderWorkers, WorkerMimiDecoder, WorkerMimiDecoderPool } from "../../../../src/models/pocket/decoder/worker-client.ts";
import type { DecoderWorkerReply } from "../../../../src/models/pocket/decoder/protocol.ts";
import { withInProcessFallback } from "../../../../src/models/pocket/model.ts";
import { requirePocketTinyFixture } from "../bundle-fixture.ts";
import { createLogger, silentLogger, type Logger } from "../../../../src/log/logger.ts";

let bundle: PocketBundle;
let sessions: PocketSessions;
let stages: PocketStages;
let worker: WorkerMimiDecoder;
const latents = Float32Array.from({ length: 32 * 7 }, (_, index) => Math.sin(index * 0.37));

interface LogEntry {
  level: string;
  message: string;
  error?: string;
}

function recordingLogger(): { logger: Logger; entries: LogEntry[] } {
  const entries: LogEntry[] = [];
  return { entries, logger: createLogger("debug", (line) => entries.push(JSON.parse(line) as LogEntry)) };
}

beforeAll(async () => {
  bundle = await loadPocketBundle(requirePocketTinyFixture());
  sessions = await openPocketSessions(bundle, { provider: "onnxruntime-node" });
  stages = await createPocketStages(bundle, sessions);
  const { logger, entries } = recordingLogger();
  const started = await startDecoderWorker(bundle, "onnxruntime-node", logger);
  if (!started) throw new Error(`the decoder worker did not start: ${JSON.stringify(entries)}`);
  worker = started;
});

afterAll(async () => {
  worker?.close();
  await closePocketSessions(sessions);
});

async function decodeInCalls(decoder: { emptyState(): unknown; decode(state: unknown, latents: Float32Array, options?: { reuseState?: boolean }): Promise<{ state: unknown; audio: Float32Array }> }, calls: number[], reuseState: boolean): Promise<Float32Array> {
  let state = decoder.emptyState();
  const pieces: number[] = [];
  let frame = 0;
  for (const count of calls) {
    const result = await decoder.decode(state, latents.subarray(frame * 32, (frame + count) * 32), { reuseState });
    state = result.state;
    pieces.push(...result.audio);
    frame += count;
  }
  return Float32Array.from(pieces);
}

describe("Mimi decoder in a worker thread", () => {
  test("gives the in-process decoder's audio exactly, one latent per call and in batches, reusing states or not", async () => {
    expect(worker.concurrent).toBe(true);
    // Each split is compared with the same split in-process: batching changes float rounding, not the audio.
    for (const calls of [[1, 1, 1, 1, 1, 1, 1], [1, 2, 4], [3, 4]]) {
      const expected = await decodeInCalls(stages.mimiDecoder, calls, false);
      expect(expected.length).toBe(7 * 1920);
      expect(await decodeInCalls(worker, calls, true)).toEqual(expected);
      expect(await decodeInCalls(worker, calls, false)).toEqual(expected);
    }
  });

  test("a state not given up stays valid: decoding from it twice gives the same audio", async () => {
    const first = await worker.decode(worker.emptyState(), latents.subarray(0, 64));
    const again1 = await worker.decode(first.state, latents.subarray(64, 96));
    const again2 = await worker.decode(first.state, latents.subarray(64, 96));
    expect(again1.audio).toEqual(again2.audio);
    expect(again1.state).not.toBe(first.state);
    expect(again1.state.frames).toBe(3);
    worker.release(first.state);
  });

  test("interleaved streams keep their own states", async () => {
    const a = worker.emptyState();
    const b = worker.emptyState();
    const alone = await decodeInCalls(worker, [2, 2], true);
    const [a1, b1] = await Promise.all([worker.decode(a, latents.subarray(0, 64), { reuseState: true }), worker.decode(b, latents.subarray(0, 64), { reuseState: true })]);
    const [a2, b2] = await Promise.all([worker.decode(a1.state, latents.subarray(64, 128), { reuseState: true }), worker.decode(b1.state, latents.subarray(64, 128), { reuseState: true })]);
    expect(Float32Array.from([...a1.audio, ...a2.audio])).toEqual(alone);
    expect(Float32Array.from([...b1.audio, ...b2.audio])).toEqual(alone);
  });

  test("bad input is refused before it reaches the worker", async () => {
    await expect(worker.decode(worker.emptyState(), new Float32Array(33))).rejects.toThrow(/multiple of 32/);
  });

  test("a graph the worker cannot open rejects the start instead of hanging", async () => {
    const options = { path: "/nonexistent/mimi_decoder.onnx", manifest: bundle.mimiStateManifest, config: { latentDim: 32, samplesPerFrame: 1920 }, provider: "onnxruntime-node" as const, logger: silentLogger };
    await expect(WorkerMimiDecoder.start(options)).rejects.toThrow(/could not start/);
  });

  test("a released state is refused, not silently decoded from a fresh one", async () => {
    const first = await worker.decode(worker.emptyState(), latents.subarray(0, 32));
    worker.release(first.state);
    // Awaited by hand: while `expect(…).rejects` waits, Bun 1.4.5 does not deliver worker messages.
    const refused = await worker.decode(first.state, latents.subarray(32, 64)).then(
      () => null,
      (error: Error) => error,
    );
    expect(refused?.message).toMatch(/unknown or was released/);
  });

  test("once the worker stops, the engine's decoder falls back to the in-process one, and says so once through its logger", async () => {
    const { logger, entries } = recordingLogger();
    const started = await startDecoderWorker(bundle, "onnxruntime-node", logger);
    let opened = 0;
    const openInProcess = async () => {
      opened++;
      return stages.mimiDecoder;
    };
    const decoder = withInProcessFallback(new WorkerMimiDecoderPool([started!]), openInProcess, logger);
    expect(decoder.concurrent).toBe(true);
    const before = await decodeInCalls(decoder, [2, 5], true);
    expect(entries).toEqual([]);
    // No main-thread session while the worker decodes: it is opened when the worker stops, once.
    expect(opened).toBe(0);
    started!.close();
    expect(decoder.concurrent).toBe(false);
    const after = await decodeInCalls(decoder, [2, 5], true);
    expect(after).toEqual(before);
    expect(await decodeInCalls(decoder, [2, 5], true)).toEqual(before);
    expect(opened).toBe(1);
    expect(entries.map(({ level, message }) => ({ level, message }))).toEqual([{ level: "warn", message: "the Mimi decoder worker stopped; decoding in the main thread from now on" }]);
  });

  test("a worker that cannot start is a warning through the logger passed in, and decoding stays in the main thread", async () => {
    const { logger, entries } = recordingLogger();
    const unopenable = { ...bundle, graphs: { ...bundle.graphs, mimiDecoder: { ...bundle.graphs.mimiDecoder, path: "/nonexistent/mimi_decoder.onnx" } } };
    expect(await startDecoderWorker(unopenable, "onnxruntime-node", logger)).toBeNull();
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ level: "warn", message: "decoding in the main thread: the Mimi decoder worker could not start" });
    expect(entries[0]!.error).toMatch(/could not start: .*nonexistent/);
  });

  test("what the worker logs reaches the main thread's logger", async () => {
    const { logger, entries } = recordingLogger();
    const started = (await startDecoderWorker(bundle, "onnxruntime-node", logger))!;
    try {
      // The worker thread's side of the channel, as its message loop posts a handler's failure.
      const thread = (started as unknown as { worker: import("node:worker_threads").Worker }).worker;
      thread.emit("message", { kind: "log", level: "error", message: "Mimi decoder worker: a handler failed" } satisfies DecoderWorkerReply);
      expect(entries.map(({ level, message }) => ({ level, message }))).toEqual([{ level: "error", message: "Mimi decoder worker: a handler failed" }]);
      expect((await started.decode(started.emptyState(), latents.subarray(0, 32))).audio).toHaveLength(1920);
    } finally {
      started.close();
    }
  });

  test("closing rejects decodes still waiting", async () => {
    const started = await startDecoderWorker(bundle, "onnxruntime-node", silentLogger);
    const pending = started!.decode(started!.emptyState(), latents);
    started!.close();
    await expect(pending).rejects.toThrow(/closed/);
    await expect(started!.decode(started!.emptyState(), latents)).rejects.toThrow(/closed/);
  });

  test("closing with a decode running lets the worker finish it and exit by itself (code 0), time after time", async () => {
    for (let round = 0; round < 8; round++) {
      const started = (await startDecoderWorker(bundle, "onnxruntime-node", silentLogger))!;
      const thread = (started as unknown as { worker: import("node:worker_threads").Worker }).worker;
      const exited = new Promise<number>((resolve) => thread.once("exit", resolve));
      const pending = started.decode(started.emptyState(), latents).then(
        () => "decoded",
        (error: Error) => error.message,
      );
      // Closing at different points of the decode: before it reaches the session, during the run, after it.
      await Bun.sleep(round);
      started.close();
      expect(await pending).toMatch(/^decoded$|closed/);
      expect(await exited).toBe(0);
    }
  }, 60_000);
});

describe("a pool of decoder workers", () => {
  test("spreads streams over its workers, each stream's audio exactly the in-process decoder's", async () => {
    const pool = (await startDecoderWorkers(bundle, "onnxruntime-node", silentLogger, 2))!;
    try {
      expect(pool.size).toBe(2);
      const streams = Array.from({ length: 4 }, () => pool.emptyState());
      expect(streams.map((state) => state.worker)).toEqual([0, 1, 0, 1]);
      // Interleaved, all in flight at once: each stream's decodes go to the worker holding its state.
      const decoded = await Promise.all(streams.map(async (state, index) => {
        const pieces: number[] = [];
        let current = state;
        for (const [from, to] of [[0, 1], [1, 3], [3, 7]] as const) {
          const result = await pool.decode(current, latents.subarray(from * 32, to * 32).map((value) => value * (1 + index / 10)), { reuseState: true });
          current = result.state;
          pieces.push(...result.audio);
        }
        pool.release(current);
        return Float32Array.from(pieces);
      }));
      for (const [index, audio] of decoded.entries()) {
        // The same calls in-process (a different split changes float rounding).
        const scaled = latents.map((value) => value * (1 + index / 10));
        let state = stages.mimiDecoder.emptyState();
        const expected: number[] = [];
        for (const [from, to] of [[0, 1], [1, 3], [3, 7]] as const) {
          const result = await stages.mimiDecoder.decode(state, scaled.subarray(from * 32, to * 32));
          state = result.state;
          expected.push(...result.audio);
        }
        expect(audio).toEqual(Float32Array.from(expected));
      }
    } finally {
      pool.close();
    }
  });

  test("a stopped worker fails only its own streams; new ones go to the others until every worker has stopped", async () => {
    const pool = (await startDecoderWorkers(bundle, "onnxruntime-node", silentLogger, 2))!;
    try {
      const [first, second] = [pool.emptyState(), pool.emptyState()];
      (pool as unknown as { workers: WorkerMimiDecoder[] }).workers[0]!.close();
      await expect(pool.decode(first, latents.subarray(0, 32))).rejects.toThrow(/closed/);
      expect((await pool.decode(second, latents.subarray(0, 32))).audio).toHaveLength(1920);
      expect(pool.failed).toBe(false);
      expect(pool.emptyState().worker).toBe(1);
      (pool as unknown as { workers: WorkerMimiDecoder[] }).workers[1]!.close();
      expect(pool.failed).toBe(true);
    } finally {
      pool.close();
    }
  });
});

describe("the engine", () => {
  test("decodes in worker threads under onnxruntime-node, and says how many; in-process when told not to", async () => {
    const { PocketModel } = await import("../../../../src/models/pocket/model.ts");
    const withWorker = await PocketModel.load(requirePocketTinyFixture(), { provider: "onnxruntime-node" }, { decoderWorkers: 1, logger: silentLogger });
    const withTwo = await PocketModel.load(requirePocketTinyFixture(), { provider: "onnxruntime-node" }, { decoderWorkers: 2, logger: silentLogger });
    const inProcess = await PocketModel.load(requirePocketTinyFixture(), { provider: "onnxruntime-node" }, { decoderWorker: false, logger: silentLogger });
    try {
      expect(withWorker.capabilities.description).toContain("Mimi decoder in a worker thread");
      expect(withTwo.capabilities.description).toContain("Mimi decoder in 2 worker threads");
      expect(inProcess.capabilities.description).not.toContain("worker");
    } finally {
      await withWorker.close();
      await withTwo.close();
      await inProcess.close();
    }
  });
});
