/** The scheduler's policies as pure plan/apply steps: no model, no timers, the clock passed in. */
import { describe, expect, test } from "bun:test";
import type { AudioChunk, RequestId, RequestWork, StepOutput, SynthesisJob } from "../../src/models/contract.ts";
import { EngineRequest, isFinished, RequestStatus } from "../../src/engine/request.ts";
import { Scheduler, type SchedulerLimits } from "../../src/engine/scheduler.ts";

const RATE = 24_000;
const FRAME = 1920;
const LIMITS: SchedulerLimits = { maxRunning: 4, maxWaiting: 2, prefillPositionsPerTick: 128, stepsPerTick: Infinity, pauseAboveSeconds: 2 };

function job(overrides: Partial<SynthesisJob> = {}): SynthesisJob {
  return { text: "hello", voice: "low", language: "Auto", extraParams: {}, signal: new AbortController().signal, ...overrides };
}

function frames(count: number): AudioChunk[] {
  return Array.from({ length: count }, () => ({ samples: new Float32Array(FRAME), sampleRateHz: RATE, frameCount: 1 }));
}

/** A model's answers to nextWork, set by hand. */
class FakeWork {
  readonly work = new Map<RequestId, RequestWork>();
  readonly workOf = (id: RequestId) => this.work.get(id);
  set(id: RequestId, work: Partial<RequestWork>): void {
    this.work.set(id, { prefillPositions: 0, canStep: false, decodeFrames: 0, ...work });
  }
}

function output(results: StepOutput["results"]): StepOutput {
  return { results, stageSeconds: {}, batchSizes: {} };
}

function add(scheduler: Scheduler, id: number, arrivedAtMs = id, overrides: Partial<SynthesisJob> = {}): EngineRequest {
  const request = new EngineRequest(id, job(overrides), arrivedAtMs);
  scheduler.add(request);
  return request;
}

describe("plan, execute, apply", () => {
  test("a new request is planned as new and prefilled first; then it steps; its decodes are planned after the steps; its end is freed in the next plan", () => {
    const scheduler = new Scheduler(LIMITS, FRAME);
    const fake = new FakeWork();
    const request = add(scheduler, 1);

    const first = scheduler.schedule(0, fake.workOf);
    expect(first.newRequests.map((entry) => entry.requestId)).toEqual([1]);
    expect(first.prefills).toEqual([1]);
    expect(first.steps).toEqual([]);
    expect(request.status).toBe(RequestStatus.PREFILLING);
    scheduler.apply(output([{ requestId: 1, audio: [] }]), first, 1);

    fake.set(1, { canStep: true });
    const second = scheduler.schedule(2, fake.workOf);
    expect(second.newRequests).toEqual([]);
    expect(second.prefills).toEqual([]);
    expect(second.steps).toEqual([1]);
    expect(request.status).toBe(RequestStatus.RUNNING);

    fake.set(1, { canStep: true, decodeFrames: 1 });
    const decodes = scheduler.scheduleDecodes(fake.workOf, 0);
    expect(decodes.decodes).toEqual([{ requestId: 1, frames: 1 }]);
    // Decoding until that plan is applied: not planned twice.
    expect(scheduler.scheduleDecodes(fake.workOf, 0).decodes).toEqual([]);
    scheduler.apply(output([{ requestId: 1, audio: frames(1), finishReason: "stop" }]), decodes, 3);
    expect(request.status).toBe(RequestStatus.FINISHED_STOPPED);
    expect(request.finishReason).toBe("stop");
    expect(request.queue.length).toBe(1);

    const after = scheduler.schedule(4, fake.workOf);
    expect(after.finishedRequestIds).toEqual([1]);
    expect(scheduler.schedule(5, fake.workOf).finishedRequestIds).toEqual([]);
    expect(scheduler.idle).toBe(true);
  });

  test("statuses are ordered: every final one is past every live one, and each maps to one finish reason", () => {
    const live = [RequestStatus.WAITING, RequestStatus.PREFILLING, RequestStatus.RUNNING, RequestStatus.PAUSED];
    const final = [RequestStatus.FINISHED_STOPPED, RequestStatus.FINISHED_LENGTH_CAPPED, RequestStatus.FINISHED_ABORTED, RequestStatus.FINISHED_ERROR];
    for (const status of live) expect(isFinished(status)).toBe(false);
    for (const status of final) expect(isFinished(status)).toBe(true);
    const request = new EngineRequest(1, job(), 0);
    expect(final.map((status) => ((request.status = status), request.finishReason))).toEqual(["stop", "length", "abort", "error"]);
  });

  test("the job's frame cap cuts the chunk that crosses it and ends the request with length", () => {
    const scheduler = new Scheduler(LIMITS, FRAME);
    const fake = new FakeWork();
    const request = add(scheduler, 1, 0, { maxNewTokens: 3 });
    const plan = scheduler.schedule(0, fake.workOf);
    const twoFrames = { samples: new Float32Array(2 * FRAME), sampleRateHz: RATE, frameCount: 2 };
    scheduler.apply(output([{ requestId: 1, audio: [twoFrames, twoFrames] }]), plan, 1);
    expect(request.status).toBe(RequestStatus.FINISHED_LENGTH_CAPPED);
    expect(request.framesMade).toBe(3);
    expect(request.queue.map((chunk) => chunk.samples.length)).toEqual([2 * FRAME, FRAME]);
    expect(scheduler.schedule(2, fake.workOf).finishedRequestIds).toEqual([1]);
  });

  test("a failed request ends with error and is freed like any other", () => {
    const scheduler = new Scheduler(LIMITS, FRAME);
    const request = add(scheduler, 1);
    const plan = scheduler.schedule(0, new FakeWork().workOf);
    scheduler.apply(output([{ requestId: 1, audio: [], error: new Error("broke") }]), plan, 1);
    expect(request.finishReason).toBe("error");
    expect(request.error?.message).toBe("broke");
    expect(scheduler.schedule(2, new FakeWork().workOf).finishedRequestIds).toEqual([1]);
  });
});

describe("policy", () => {
  test("steps go to the stream closest to running dry first; one with no audio yet goes before all", () => {
    const scheduler = new Scheduler(LIMITS, FRAME);
    const fake = new FakeWork();
    const [ahead, behind, fresh] = [add(scheduler, 1), add(scheduler, 2), add(scheduler, 3)];
    for (const request of [ahead, behind, fresh]) request.known = true;
    for (const id of [1, 2, 3]) fake.set(id, { canStep: true });
    // At t = 10 s: `ahead` has had 9 s taken since t = 0 (slack −1 s), `behind` 2 s since t = 1 s (slack −7 s).
    ahead.firstTakenAtMs = 0;
    ahead.takenSeconds = 9;
    behind.firstTakenAtMs = 1000;
    behind.takenSeconds = 2;
    expect(scheduler.schedule(10_000, fake.workOf).steps).toEqual([3, 2, 1]);
  });

  test("decodes go out most urgent first too: the stream closest to running dry, one with no audio yet before all", () => {
    const scheduler = new Scheduler(LIMITS, FRAME);
    const fake = new FakeWork();
    const [ahead, behind, fresh] = [add(scheduler, 1), add(scheduler, 2), add(scheduler, 3)];
    for (const request of [ahead, behind, fresh]) request.known = true;
    for (const id of [1, 2, 3]) fake.set(id, { decodeFrames: 2 });
    ahead.firstTakenAtMs = 0;
    ahead.takenSeconds = 9;
    behind.firstTakenAtMs = 1000;
    behind.takenSeconds = 2;
    // Admitted to running places by a tick's plan, then their latents are due.
    scheduler.schedule(10_000, fake.workOf);
    expect(scheduler.scheduleDecodes(fake.workOf, 10_000).decodes).toEqual([
      { requestId: 3, frames: 2 },
      { requestId: 2, frames: 2 },
      { requestId: 1, frames: 2 },
    ]);
  });

  test("steps per tick: only the most urgent run when the runner's budget is smaller than the running set", () => {
    const scheduler = new Scheduler({ ...LIMITS, stepsPerTick: 2 }, FRAME);
    const fake = new FakeWork();
    const requests = [1, 2, 3].map((id) => add(scheduler, id));
    requests.forEach((request, index) => {
      request.known = true;
      request.firstTakenAtMs = 0;
      request.takenSeconds = [5, 1, 3][index]!;
      fake.set(request.id, { canStep: true });
    });
    expect(scheduler.schedule(1000, fake.workOf).steps).toEqual([2, 3]);
  });

  test("prefill has a per-tick budget: oldest first, at least one unit, never more than the budget beside the steps", () => {
    const scheduler = new Scheduler({ ...LIMITS, prefillPositionsPerTick: 100 }, FRAME);
    const fake = new FakeWork();
    const running = add(scheduler, 1);
    running.known = true;
    fake.set(1, { canStep: true });
    for (const id of [2, 3, 4]) add(scheduler, id);
    // New requests cost 64 positions each: one fits in 100, the next waits for the next tick.
    const first = scheduler.schedule(0, fake.workOf);
    expect(first.prefills).toEqual([2]);
    expect(first.steps).toEqual([1]);
    fake.set(2, { canStep: true });
    const second = scheduler.schedule(1, fake.workOf);
    expect(second.prefills).toEqual([3]);
    // A single unit over the whole budget still runs, alone.
    fake.set(2, { prefillPositions: 500 });
    fake.set(3, { prefillPositions: 10 });
    const third = scheduler.schedule(2, fake.workOf);
    expect(third.prefills).toEqual([2]);
  });

  test("admission: running places, then waiting places, then no room; a waiting request runs when a place frees", () => {
    const scheduler = new Scheduler({ ...LIMITS, maxRunning: 2, maxWaiting: 1 }, FRAME);
    const fake = new FakeWork();
    for (const id of [1, 2, 3]) add(scheduler, id);
    expect(scheduler.hasRoom).toBe(false);
    const plan = scheduler.schedule(0, fake.workOf);
    expect(plan.newRequests.map((entry) => entry.requestId)).toEqual([1, 2]);
    expect(scheduler.counts).toEqual({ waiting: 1, running: 2, paused: 0 });
    scheduler.finish(1, "abort");
    expect(scheduler.hasRoom).toBe(true);
    expect(scheduler.schedule(1, fake.workOf).newRequests.map((entry) => entry.requestId)).toEqual([3]);
  });

  test("a waiting request whose client left never reaches the runner", () => {
    const scheduler = new Scheduler({ ...LIMITS, maxRunning: 1 }, FRAME);
    const fake = new FakeWork();
    add(scheduler, 1);
    add(scheduler, 2);
    scheduler.schedule(0, fake.workOf);
    scheduler.finish(2, "abort");
    scheduler.finish(1, "stop");
    const plan = scheduler.schedule(1, fake.workOf);
    expect(plan.newRequests).toEqual([]);
    expect(plan.finishedRequestIds).toEqual([1]);
    expect(scheduler.idle).toBe(true);
  });

  test("a stream whose consumer falls behind pauses (no steps, no decodes) and resumes once it has drained to half", () => {
    const scheduler = new Scheduler(LIMITS, FRAME);
    const fake = new FakeWork();
    const request = add(scheduler, 1);
    const plan = scheduler.schedule(0, fake.workOf);
    fake.set(1, { canStep: true, decodeFrames: 1 });
    // 30 frames = 2.4 s not taken: past the 2 s mark.
    scheduler.apply(output([{ requestId: 1, audio: frames(30) }]), plan, 1);
    expect(request.status).toBe(RequestStatus.PAUSED);
    expect(scheduler.counts).toEqual({ waiting: 0, running: 0, paused: 1 });
    expect(scheduler.schedule(2, fake.workOf).steps).toEqual([]);
    expect(scheduler.scheduleDecodes(fake.workOf, 0).decodes).toEqual([]);
    // Taking to 1.04 s is not yet half; 0.96 s is.
    for (let taken = 0; taken < 17; taken++) scheduler.take(request, 3);
    expect(request.status).toBe(RequestStatus.PAUSED);
    scheduler.take(request, 3);
    expect(request.status).not.toBe(RequestStatus.PAUSED);
    expect(scheduler.schedule(4, fake.workOf).steps).toEqual([1]);
  });
});

describe("admission by real-time capacity", () => {
  test("admits only as many as `admits` allows; the rest wait, and count as room only up to maxWaiting", () => {
    let capacity = 2;
    const scheduler = new Scheduler({ ...LIMITS, maxRunning: 8, maxWaiting: 1, admits: (streams) => streams <= capacity }, FRAME);
    const work = new FakeWork();
    for (const id of [1, 2, 3]) add(scheduler, id);
    const plan = scheduler.schedule(0, work.workOf);
    expect(plan.newRequests.map(({ requestId }) => requestId)).toEqual([1, 2]);
    expect(scheduler.counts).toEqual({ waiting: 1, running: 2, paused: 0 });
    // One waits already, and maxWaiting is 1: full, though maxRunning is far.
    expect(scheduler.hasRoom).toBe(false);
    capacity = 3;
    expect(scheduler.hasRoom).toBe(true);
    scheduler.schedule(1, work.workOf);
    expect(scheduler.counts.waiting).toBe(0);
  });

  test("one request always runs, whatever the estimate", () => {
    const scheduler = new Scheduler({ ...LIMITS, admits: () => false }, FRAME);
    add(scheduler, 1);
    expect(scheduler.schedule(0, new FakeWork().workOf).newRequests).toHaveLength(1);
  });

  test("a held request's first audio is taken only once the hold is queued, or it has ended", () => {
    const scheduler = new Scheduler({ ...LIMITS, firstAudioHoldSeconds: () => (2 * FRAME) / RATE }, FRAME);
    const work = new FakeWork();
    const request = add(scheduler, 1);
    const plan = scheduler.schedule(0, work.workOf);
    scheduler.apply(output([{ requestId: 1, audio: frames(1) }]), plan, 1);
    expect(scheduler.take(request, 1)).toBeUndefined();
    scheduler.apply(output([{ requestId: 1, audio: frames(1) }]), plan, 2);
    expect(scheduler.take(request, 2)).toBeDefined();
    // Once audio has gone out, no more holding.
    expect(scheduler.take(request, 2)).toBeDefined();
    expect(scheduler.take(request, 2)).toBeUndefined();

    const short = add(scheduler, 2);
    const next = scheduler.schedule(3, work.workOf);
    scheduler.apply(output([{ requestId: 2, audio: frames(1), finishReason: "stop" }]), next, 4);
    expect(scheduler.take(short, 4)).toBeDefined();
  });
});
