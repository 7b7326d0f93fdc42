/**
 * The engine's loop with a fake runner: plan → execute → apply, fairness, aborts that free state at once,
 * admission and 429s, decodes left in flight beside the next tick's sampling, failures, finish reasons.
 */
import { describe, expect, test } from "bun:test";
import { Engine, EngineFullError, type EngineOptions } from "../../src/engine/core.ts";
import { eventually } from "../support/eventually.ts";
import type { AudioChunk, ModelRunner, RequestId, RequestResult, RequestWork, StepOutput, StepPlan, SynthesisJob } from "../../src/models/contract.ts";

const RATE = 24_000;
const FRAME = 1920;
const MODEL = { nativeSampleRateHz: RATE, framesPerSecond: 12.5 };
const STATE_BYTES_PER_REQUEST = 1000;

interface FakeRequest {
  framesLeft: number;
  /** Sampled, not yet decoded. */
  pending: number;
  decoding: boolean;
  prefilled: boolean;
}

/**
 * Each request's text is the number of frames it makes: a prefill, then one step per frame, each frame
 * decoded by a decode plan (`decodeDelayMs` long, in flight when `decodesOverlap`).
 */
class FakeRunner implements ModelRunner {
  readonly requests = new Map<RequestId, FakeRequest>();
  readonly seen: RequestId[] = [];
  readonly freed: RequestId[] = [];
  /** Every plan's kinds of work, in the order they started. */
  readonly log: string[] = [];
  stepsDuringDecodes = 0;
  /** As the WGSL decoder: a tick's decodes in one plan. */
  decodesShareCalls = false;
  #decodesRunning = 0;
  failStepOf: RequestId | undefined;

  constructor(
    readonly decodesOverlap = false,
    private readonly decodeDelayMs = 0,
    readonly stepsPerTick?: number,
  ) {}

  nextWork(id: RequestId): RequestWork | undefined {
    const request = this.requests.get(id);
    if (!request) return undefined;
    return { prefillPositions: request.prefilled ? 0 : 8, canStep: request.prefilled && request.framesLeft > 0, decodeFrames: request.decoding ? 0 : request.pending };
  }

  stateBytes(): number {
    return this.requests.size * STATE_BYTES_PER_REQUEST;
  }

  async execute(plan: StepPlan): Promise<StepOutput> {
    for (const id of plan.finishedRequestIds) {
      this.freed.push(id);
      this.requests.delete(id);
    }
    for (const { requestId, job } of plan.newRequests) {
      this.seen.push(requestId);
      this.requests.set(requestId, { framesLeft: Number(job.text), pending: 0, decoding: false, prefilled: false });
    }
    const results: RequestResult[] = [];
    if (plan.prefills.length + plan.steps.length > 0) this.log.push(`sample:${plan.steps.join(",")}`);
    for (const id of plan.prefills) {
      this.requests.get(id)!.prefilled = true;
      results.push({ requestId: id, audio: [] });
    }
    for (const id of plan.steps) {
      if (this.#decodesRunning > 0) this.stepsDuringDecodes++;
      if (id === this.failStepOf) {
        results.push({ requestId: id, audio: [], error: new Error(`step of ${id} broke`) });
        continue;
      }
      const request = this.requests.get(id)!;
      request.framesLeft--;
      request.pending++;
      results.push({ requestId: id, audio: [] });
    }
    if (plan.decodes.length > 0) {
      this.log.push(`decode:${plan.decodes.map((decode) => decode.requestId).join(",")}`);
      const taken = plan.decodes.map(({ requestId, frames }) => {
        const request = this.requests.get(requestId)!;
        request.pending -= frames;
        request.decoding = true;
        return { requestId, frames, request };
      });
      this.#decodesRunning++;
      await new Promise((resolve) => setTimeout(resolve, this.decodeDelayMs));
      this.#decodesRunning--;
      for (const { requestId, frames, request } of taken) {
        request.decoding = false;
        const audio: AudioChunk[] = Array.from({ length: frames }, () => ({ samples: new Float32Array(FRAME).fill(requestId), sampleRateHz: RATE, frameCount: 1 }));
        const done = request.framesLeft === 0 && request.pending === 0;
        results.push({ requestId, audio, ...(done ? { finishReason: "stop" as const } : {}) });
      }
    }
    return { results, stageSeconds: {}, batchSizes: {} };
  }
}

function job(frames: number, signal = new AbortController().signal, overrides: Partial<SynthesisJob> = {}): SynthesisJob {
  return { text: String(frames), voice: "v", language: "Auto", extraParams: {}, signal, ...overrides };
}

function engineWith(runner: FakeRunner, options: Partial<EngineOptions> = {}): Engine {
  return new Engine(runner, MODEL, { maxStreams: 8, maxQueue: 8, ...options });
}

async function collect(stream: AsyncIterable<AudioChunk>): Promise<number> {
  let frames = 0;
  for await (const chunk of stream) frames += chunk.frameCount;
  return frames;
}

/** Waits until the engine holds no request and no state (the bound only keeps a broken engine from hanging). */
async function settle(engine: Engine): Promise<void> {
  await eventually("the engine empty", () => engine.stateBytes === 0 && engine.counts.running + engine.counts.waiting + engine.counts.paused === 0, 2000).catch(() => {});
}

describe("the loop", () => {
  test("every frame of every request arrives, in order, and each request ends with stop", async () => {
    const runner = new FakeRunner();
    const engine = engineWith(runner);
    const streams = await Promise.all([3, 5, 1].map((frames) => engine.submit(job(frames))));
    expect(await Promise.all(streams.map(collect))).toEqual([3, 5, 1]);
    expect(streams.map((stream) => stream.finishReason)).toEqual(["stop", "stop", "stop"]);
    await settle(engine);
    expect(runner.freed.sort()).toEqual(streams.map((stream) => stream.requestId).sort());
    expect(engine.stateBytes).toBe(0);
    expect(engine.counts).toEqual({ waiting: 0, running: 0, paused: 0 });
  });

  test("onIdle is called once the engine runs out of work, not while any request runs", async () => {
    const runner = new FakeRunner();
    let idleCalls = 0;
    let runningAtIdle: number[] = [];
    const engine = engineWith(runner, {
      onIdle: () => {
        idleCalls++;
        runningAtIdle.push(engine.counts.running + engine.counts.waiting);
      },
    });
    const streams = await Promise.all([4, 9].map((frames) => engine.submit(job(frames))));
    await Promise.all(streams.map(collect));
    await settle(engine);
    expect(idleCalls).toBeGreaterThanOrEqual(1);
    expect(runningAtIdle.every((count) => count === 0)).toBe(true);
    const before = idleCalls;
    runningAtIdle = [];
    await collect(await engine.submit(job(3)));
    await settle(engine);
    expect(idleCalls).toBeGreaterThan(before);
    expect(runningAtIdle.every((count) => count === 0)).toBe(true);
  });

  test("fairness: a short request arriving after a long one finishes first", async () => {
    const engine = engineWith(new FakeRunner());
    const ends: string[] = [];
    const longStream = await engine.submit(job(200));
    const longChunks = longStream[Symbol.asyncIterator]();
    // The short one arrives once the long one is audibly under way: its first chunk is out.
    expect((await longChunks.next()).done).toBe(false);
    const long = (async () => {
      while (!(await longChunks.next()).done);
      ends.push("long");
    })();
    const short = engine.submit(job(5)).then(async (stream) => (await collect(stream), ends.push("short")));
    await Promise.all([long, short]);
    expect(ends).toEqual(["short", "long"]);
  });

  test("max_new_tokens ends a request with length, its audio cut at the cap", async () => {
    const engine = engineWith(new FakeRunner());
    const stream = await engine.submit(job(50, undefined, { maxNewTokens: 7 }));
    expect(await collect(stream)).toBe(7);
    expect(stream.finishReason).toBe("length");
    await settle(engine);
    expect(engine.stateBytes).toBe(0);
  });

  test("decodes off the JS thread stay in flight while the next tick samples; in-process ones are awaited", async () => {
    for (const overlap of [true, false]) {
      const runner = new FakeRunner(overlap, 20);
      const engine = engineWith(runner);
      const streams = await Promise.all([6, 6].map((frames) => engine.submit(job(frames))));
      expect(await Promise.all(streams.map(collect))).toEqual([6, 6]);
      if (overlap) expect(runner.stepsDuringDecodes).toBeGreaterThan(0);
      else expect(runner.stepsDuringDecodes).toBe(0);
    }
  });

  test("overlapping decodes go out one request a plan, each delivered when it settles, unless the runner shares decode calls", async () => {
    for (const share of [false, true]) {
      const runner = new FakeRunner(true, 5);
      runner.decodesShareCalls = share;
      const engine = engineWith(runner);
      const streams = await Promise.all([4, 4, 4].map((frames) => engine.submit(job(frames))));
      expect(await Promise.all(streams.map(collect))).toEqual([4, 4, 4]);
      const decodePlans = runner.log.filter((entry) => entry.startsWith("decode:"));
      expect(decodePlans.length).toBeGreaterThan(0);
      if (share) expect(decodePlans.some((entry) => entry.includes(","))).toBe(true);
      else expect(decodePlans.filter((entry) => entry.includes(","))).toEqual([]);
    }
  });

  test("a runner's steps-per-tick bounds the steps of one tick", async () => {
    const runner = new FakeRunner(false, 0, 1);
    const engine = engineWith(runner);
    await Promise.all((await Promise.all([3, 3, 3].map((frames) => engine.submit(job(frames))))).map(collect));
    const steps = runner.log.filter((entry) => entry.startsWith("sample:")).map((entry) => entry.slice("sample:".length));
    expect(steps.every((ids) => ids.split(",").filter(Boolean).length <= 1)).toBe(true);
  });
});

describe("aborts", () => {
  test("an abort is applied at the next tick: the stream ends with abort and the runner frees the state at once", async () => {
    const runner = new FakeRunner(false, 2);
    const engine = engineWith(runner);
    const controller = new AbortController();
    const stream = await engine.submit(job(100_000, controller.signal));
    let frames = 0;
    for await (const chunk of stream) {
      frames += chunk.frameCount;
      if (frames === 5) controller.abort();
    }
    expect(stream.finishReason).toBe("abort");
    expect(frames).toBeLessThan(50);
    await settle(engine);
    expect(runner.freed).toEqual([stream.requestId]);
    expect(engine.stateBytes).toBe(0);
  });

  test("a consumer that stops iterating aborts its request", async () => {
    const runner = new FakeRunner();
    const engine = engineWith(runner);
    const stream = await engine.submit(job(100_000));
    for await (const _ of stream) break;
    await settle(engine);
    expect(stream.finishReason).toBe("abort");
    expect(runner.freed).toEqual([stream.requestId]);
  });

  test("a queued request whose client left never runs", async () => {
    const runner = new FakeRunner(false, 5);
    const engine = engineWith(runner, { maxStreams: 1 });
    const running = await engine.submit(job(20));
    const controller = new AbortController();
    const queued = engine.submit(job(20, controller.signal));
    expect(engine.counts.waiting).toBe(1);
    controller.abort(new Error("left"));
    let refused: unknown;
    await queued.catch((error) => (refused = error));
    expect((refused as Error).message).toBe("left");
    expect(await collect(running)).toBe(20);
    expect(runner.seen).toEqual([running.requestId]);
  });

  test("an already aborted signal is refused before admission", async () => {
    const engine = engineWith(new FakeRunner());
    const controller = new AbortController();
    controller.abort(new Error("gone"));
    let refused: unknown;
    await engine.submit(job(3, controller.signal)).catch((error) => (refused = error));
    expect((refused as Error).message).toBe("gone");
    expect(engine.counts).toEqual({ waiting: 0, running: 0, paused: 0 });
  });
});

describe("admission", () => {
  test("past --max-streams running and --max-queue waiting a submission is a 429 with Retry-After; with whenFull wait it waits", async () => {
    const runner = new FakeRunner(false, 2);
    const engine = engineWith(runner, { maxStreams: 1, maxQueue: 1 });
    const first = await engine.submit(job(30));
    // Queued: the place is expected within --max-queue-wait, and its submission settles once it has it.
    const second = engine.submit(job(3));
    let refused: unknown;
    await engine.submit(job(3)).catch((error) => (refused = error));
    expect(refused).toBeInstanceOf(EngineFullError);
    const full = refused as EngineFullError;
    expect(full.retryAfterSeconds).toBeGreaterThanOrEqual(1);

    const waiting = engine.submit(job(2), { whenFull: "wait" });
    expect(await Promise.all([collect(first), second.then(collect), waiting.then(collect)])).toEqual([30, 3, 2]);
  });

  test("a submission settles only once its request has a running place", async () => {
    const engine = engineWith(new FakeRunner(false, 2), { maxStreams: 1 });
    const first = await engine.submit(job(10));
    let placed = false;
    const second = engine.submit(job(2)).then((stream) => {
      placed = true;
      return stream;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(placed).toBe(false);
    expect(engine.counts.waiting).toBe(1);
    expect(await collect(first)).toBe(10);
    expect(await collect(await second)).toBe(2);
  });

  test("with no place expected within --max-queue-wait a submission is refused at once, Retry-After the expected wait", async () => {
    const runner = new FakeRunner(false, 2);
    const engine = engineWith(runner, { maxStreams: 1, maxQueueWaitSeconds: 2 });
    // A long text is a long request: about 12.5 frames a second of speech at 15 characters a second.
    const long = "x".repeat(15 * 10);
    const running = await engine.submit(job(5, undefined, { text: long }));
    expect(engine.expectedWaitSeconds()).toBeGreaterThan(2);
    const startedMs = performance.now();
    let refused: unknown;
    await engine.submit(job(2)).catch((error) => (refused = error));
    expect(performance.now() - startedMs).toBeLessThan(1000);
    expect(refused).toBeInstanceOf(EngineFullError);
    expect((refused as EngineFullError).message).toContain("--max-queue-wait 2 s");
    // About 10.5 s of speech at one frame a frame period (nothing has ended to say the pace is faster).
    expect((refused as EngineFullError).retryAfterSeconds).toBeGreaterThanOrEqual(10);
    expect((refused as EngineFullError).retryAfterSeconds).toBeLessThanOrEqual(12);
    expect(engine.counts.waiting).toBe(0);
    running.cancel();
  });

  test("--max-queue-wait 0 never queues: a submission runs now or is refused", async () => {
    const engine = engineWith(new FakeRunner(false, 2), { maxStreams: 1, maxQueueWaitSeconds: 0 });
    const running = await engine.submit(job(3));
    await expect(engine.submit(job(1))).rejects.toBeInstanceOf(EngineFullError);
    expect(await collect(running)).toBe(3);
  });

  test("a queued request still without a place after --max-queue-wait is refused then and never runs", async () => {
    const runner = new FakeRunner(false, 2);
    const engine = engineWith(runner, { maxStreams: 1, maxQueueWaitSeconds: 0.2 });
    // Its text says 8 frames; it makes 40 (the estimate is wrong), and is not read, so it never ends.
    const running = await engine.submit(job(40));
    await eventually("its first frames made", () => running.request.framesMade >= 8);
    expect(engine.expectedWaitSeconds()).toBeLessThan(0.2);
    const startedMs = performance.now();
    let refused: unknown;
    await engine.submit(job(1)).catch((error) => (refused = error));
    expect(performance.now() - startedMs).toBeGreaterThanOrEqual(190);
    expect(refused).toBeInstanceOf(EngineFullError);
    expect(engine.counts.waiting).toBe(0);
    expect(runner.seen).toEqual([running.requestId]);
    running.cancel();
  });

  test("the expected wait learns what requests that ended made against what their text said, and the pace they ran at", async () => {
    const engine = engineWith(new FakeRunner(false, 1), { maxStreams: 1 });
    // Text "30" predicts 8 frames; each such request makes 30 (as a model that speaks slowly would).
    const before = await engine.submit(job(30));
    const waitBefore = engine.expectedWaitSeconds();
    expect(await collect(before)).toBe(30);
    for (let index = 0; index < 6; index++) expect(await collect(await engine.submit(job(30)))).toBe(30);
    const probe = await engine.submit(job(30));
    // Now a running one is expected to make about 30 frames, at the pace the others ran (far faster than real time).
    const waitAfter = engine.expectedWaitSeconds();
    expect(waitAfter).toBeGreaterThan(0);
    expect(waitAfter).toBeLessThan(waitBefore);
    probe.cancel();
  });
  test("a place reserved while a request is read counts as taken; the submission that brings the reservation is not checked again", async () => {
    const engine = engineWith(new FakeRunner(false, 2), { maxStreams: 1, maxQueueWaitSeconds: 0 });
    const reservation = engine.reservePlace();
    // The one place is promised: a second request is refused before it is read.
    expect(() => engine.reservePlace()).toThrow(EngineFullError);
    await expect(engine.submit(job(1))).rejects.toBeInstanceOf(EngineFullError);
    const stream = await engine.submit(job(3), { reservation });
    expect(await collect(stream)).toBe(3);
    // Given back (a request that failed its checks): the place is free again.
    engine.reservePlace().release();
    expect(await collect(await engine.submit(job(2)))).toBe(2);
  });

  test("places promised to requests being read count against --max-queue too: a burst of them never overfills the queue", async () => {
    const engine = engineWith(new FakeRunner(false, 2), { maxStreams: 1, maxQueue: 2 });
    const running = await engine.submit(job(3));
    // One running; two may wait: two promises, then a refusal before anything is read.
    const promised = [engine.reservePlace(), engine.reservePlace()];
    expect(() => engine.reservePlace()).toThrow(EngineFullError);
    const queued = promised.map((reservation) => engine.submit(job(2), { reservation }));
    expect(engine.counts.waiting).toBe(2);
    expect(await collect(running)).toBe(3);
    expect(await Promise.all(queued.map(async (stream) => collect(await stream)))).toEqual([2, 2]);
  });

  test("with real-time admission, a stream that would start beside too many others is refused by --first-audio-budget", async () => {
    const runner = Object.assign(new FakeRunner(false, 2), { framesPerStep: 1 });
    const engine = engineWith(runner, { maxStreams: 8, maxQueueWaitSeconds: 2, firstAudioBudgetSeconds: 0.6 });
    // Starts measured at 0.2 s a starter: two at once are 0.4 s, three 0.6 s, past the share of the budget a
    // prediction may take (80 %: 0.48 s).
    for (let index = 0; index < 200; index++) engine.startLatency!.observe(1 + (index % 4), 0.2 * (1 + (index % 4)));
    const reservations = [engine.reservePlace(), engine.reservePlace()];
    let refused: unknown;
    try {
      engine.reservePlace();
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(EngineFullError);
    expect((refused as EngineFullError).message).toContain("--first-audio-budget 0.6 s");
    // Retry once the others have started: about 0.4 s, told as whole seconds.
    expect((refused as EngineFullError).retryAfterSeconds).toBe(1);
    for (const reservation of reservations) reservation.release();
    // A cold engine, which has measured no starts beside others, refuses none by its prior.
    const cold = engineWith(Object.assign(new FakeRunner(false, 2), { framesPerStep: 1 }), { maxStreams: 8, firstAudioBudgetSeconds: 0.001 });
    const crowd = [cold.reservePlace(), cold.reservePlace(), cold.reservePlace()];
    for (const reservation of crowd) reservation.release();
    // Alone, a request always starts, whatever the budget.
    const tight = engineWith(Object.assign(new FakeRunner(false, 2), { framesPerStep: 1 }), { firstAudioBudgetSeconds: 0.001 });
    expect(await collect(await tight.submit(job(2)))).toBe(2);
  });

  test("a waiting submission whose signal aborts gives up its turn", async () => {
    const engine = engineWith(new FakeRunner(false, 2), { maxStreams: 1, maxQueue: 0 });
    const first = await engine.submit(job(20));
    const controller = new AbortController();
    const waiting = engine.submit(job(2, controller.signal), { whenFull: "wait" });
    controller.abort(new Error("left"));
    let refused: unknown;
    await waiting.catch((error) => (refused = error));
    expect((refused as Error).message).toBe("left");
    expect(await collect(first)).toBe(20);
  });

  test("a runner's own limit (decoder slots) caps --max-streams", () => {
    const runner = Object.assign(new FakeRunner(), { maxRequests: 3 });
    expect(engineWith(runner, { maxStreams: 16 }).limits.maxStreams).toBe(3);
  });
});

describe("failures", () => {
  test("a request that fails ends with error and throws to its consumer; the others go on", async () => {
    const runner = new FakeRunner();
    const engine = engineWith(runner);
    const [broken, fine] = await Promise.all([engine.submit(job(10)), engine.submit(job(10))]);
    runner.failStepOf = broken.requestId;
    let failure: unknown;
    await collect(broken).catch((error) => (failure = error));
    expect((failure as Error).message).toBe(`step of ${broken.requestId} broke`);
    expect(broken.finishReason).toBe("error");
    expect(await collect(fine)).toBe(10);
    await settle(engine);
    expect(engine.stateBytes).toBe(0);
  });

  test("a runner that throws for a whole plan fails the requests it named, not the engine", async () => {
    const runner = new FakeRunner();
    const engine = engineWith(runner);
    const original = runner.execute.bind(runner);
    let throwOnce = true;
    runner.execute = async (plan) => {
      if (throwOnce && plan.steps.length > 0) {
        throwOnce = false;
        throw new Error("device lost");
      }
      return original(plan);
    };
    const failed = await engine.submit(job(5));
    let failure: unknown;
    await collect(failed).catch((error) => (failure = error));
    expect((failure as Error).message).toBe("device lost");
    const later = await engine.submit(job(4));
    expect(await collect(later)).toBe(4);
  });

  test("close ends every request and frees their state", async () => {
    const runner = new FakeRunner(false, 2);
    const engine = engineWith(runner);
    const streams = await Promise.all([1000, 1000].map((frames) => engine.submit(job(frames))));
    const reading = streams.map((stream) => collect(stream));
    await Bun.sleep(20);
    await engine.close();
    await Promise.all(reading);
    expect(streams.map((stream) => stream.finishReason)).toEqual(["abort", "abort"]);
    expect(engine.stateBytes).toBe(0);
  });
});

describe("a stream admitted and never read", () => {
  test("cancel() frees its place and state; fullForMs counts only while the engine is full with nothing turning over", async () => {
    const runner = new FakeRunner();
    const engine = engineWith(runner, { maxStreams: 1, maxQueue: 0 });
    expect(engine.fullForMs()).toBe(0);
    const held = await engine.submit(job(100_000));
    expect(() => engine.refuseIfFull()).toThrow(EngineFullError);
    await Bun.sleep(30);
    // Nobody reads it: the place is held, and the time since anything was admitted or ended grows.
    expect(engine.fullForMs()).toBeGreaterThanOrEqual(25);
    held.cancel();
    await settle(engine);
    expect(held.finishReason).toBe("abort");
    expect(runner.freed).toEqual([held.requestId]);
    expect(engine.fullForMs()).toBe(0);
    const next = await engine.submit(job(3));
    expect(await collect(next)).toBe(3);
  });
});

describe("a memory budget", () => {
  test("admits while resident memory plus what each waiting request and the new one are planned to cost fits, else a 429 naming the budget", async () => {
    let resident = 500;
    const runner = new FakeRunner();
    const engine = engineWith(runner, { maxStreams: 8, maxQueue: 8, memory: { budgetBytes: 600, plannedBytesPerRequest: 40, residentBytes: () => resident } });
    const first = await engine.submit(job(100_000));
    // 500 + 40 ≤ 600, then 500 + 2 × 40 ≤ 600 while the second waits to start, then a third would pass it.
    const second = await engine.submit(job(100_000));
    resident = 580;
    const refused = await engine.submit(job(3)).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(EngineFullError);
    expect((refused as Error).message).toContain("memory budget");
    // A batch item waits instead, and runs once a request has ended and memory is back.
    const waiting = engine.submit(job(3), { whenFull: "wait" });
    first.cancel();
    resident = 500;
    second.cancel();
    expect(await collect(await waiting)).toBe(3);
  });

  test("with nothing running, one request is admitted whatever the budget", async () => {
    const engine = engineWith(new FakeRunner(), { memory: { budgetBytes: 1, plannedBytesPerRequest: 40, residentBytes: () => 10_000 } });
    expect(await collect(await engine.submit(job(2)))).toBe(2);
  });
});
