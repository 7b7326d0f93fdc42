/**
 * Decides, tick by tick, who advances and with what work; applies what the runner did. Pure: no model, no
 * timers, no promises (the clock comes in as an argument), so every policy below is tested without a model.
 *
 * There are no phases: each tick spends a prefill budget on the requests that need prefill work (oldest
 * first, at least one unit, so a voice or a long chunk is never starved and never stalls the running
 * streams for more than one unit a tick), and gives every running stream one AR step, the one closest to
 * running dry first (`slackSeconds`), up to the runner's steps-per-tick. A stream whose consumer is behind
 * is PAUSED: it keeps its state, gives up its turns, and resumes once its consumer has drained its audio.
 * Decodes are planned separately, after the tick's steps, so that the frames a step made decode at once.
 */
import { NO_WORK, type AudioChunk, type RequestId, type RequestWork, type StepOutput, type StepPlan } from "../models/contract.ts";
import { EngineRequest, FINISHED_STATUS_OF, isFinished, NEW_REQUEST_WORK, RequestStatus } from "./request.ts";

/** The runner's answer to "what can this request do next" (ModelRunner.nextWork). */
export type WorkOf = (requestId: RequestId) => RequestWork | undefined;

export interface SchedulerLimits {
  /** Requests running at once (prefilling, running or paused). */
  maxRunning: number;
  /** Requests waiting for a running place; beyond it submissions are refused. */
  maxWaiting: number;
  /** Positions of prefill work one tick may hold (at least one unit always runs). */
  prefillPositionsPerTick: number;
  /** AR steps one tick may hold. */
  stepsPerTick: number;
  /** Audio made but not taken, in seconds, above which a request pauses; it resumes at half of it. */
  pauseAboveSeconds: number;
  /**
   * Whether `streams` requests running at once stay real time (the engine's measured capacity); absent:
   * `maxRunning` alone bounds them. One request may always run.
   */
  admits?: (streams: number) => boolean;
  /** Seconds of audio a request admitted beside `streams` others holds back before its first is taken. */
  firstAudioHoldSeconds?: (streams: number) => number;
}

export interface SchedulerCounts {
  waiting: number;
  running: number;
  paused: number;
}

export class Scheduler {
  readonly #requests = new Map<RequestId, EngineRequest>();
  /** Waiting requests in arrival order. */
  readonly #waiting: EngineRequest[] = [];
  /** Running requests (prefilling, running, paused) in admission order. */
  readonly #running: EngineRequest[] = [];
  /** Ended since the last plan: the runner frees them in the next one. */
  #finishedSinceLastPlan: RequestId[] = [];

  constructor(
    readonly limits: SchedulerLimits,
    /** Samples per frame of the model's audio, so a frame cap can cut a chunk of several frames. */
    private readonly samplesPerFrame: number,
  ) {}

  get counts(): SchedulerCounts {
    const paused = this.#running.filter((request) => request.status === RequestStatus.PAUSED).length;
    return { waiting: this.#waiting.length, running: this.#running.length - paused, paused };
  }

  /** Whether a new request would find a running place or a waiting one. */
  get hasRoom(): boolean {
    return this.#waiting.length < this.limits.maxWaiting + this.admittable;
  }

  /** Running places a request would be admitted to now: free under `maxRunning`, and within real time. */
  get admittable(): number {
    let places = 0;
    while (this.#canRun(this.#running.length + places + 1)) places++;
    return places;
  }

  #canRun(streams: number): boolean {
    if (streams > this.limits.maxRunning) return false;
    return streams <= 1 || (this.limits.admits?.(streams) ?? true);
  }

  /** Running requests whose consumer has taken no audio yet: the ones starting. */
  get startingCount(): number {
    let starting = 0;
    for (const request of this.#running) if (request.firstTakenAtMs === undefined) starting++;
    return starting;
  }

  get(id: RequestId): EngineRequest | undefined {
    return this.#requests.get(id);
  }

  /** Nothing is waiting, running, or owed to the runner. */
  get idle(): boolean {
    return this.#waiting.length === 0 && this.#running.length === 0 && this.#finishedSinceLastPlan.length === 0;
  }

  add(request: EngineRequest): void {
    if (!this.hasRoom) throw new Error("the scheduler is full; check hasRoom before add");
    this.#requests.set(request.id, request);
    this.#waiting.push(request);
  }

  /** Ends a request now (abort, failure, or its cap); a running one is freed by the runner in the next plan. */
  finish(id: RequestId, reason: "stop" | "length" | "abort" | "error", error?: Error): void {
    const request = this.#requests.get(id);
    if (!request || isFinished(request.status)) return;
    request.status = FINISHED_STATUS_OF[reason];
    request.error = error;
    this.#requests.delete(id);
    const waitingIndex = this.#waiting.indexOf(request);
    if (waitingIndex >= 0) {
      // Never ran: the runner never saw it, so there is nothing to free.
      this.#waiting.splice(waitingIndex, 1);
      return;
    }
    this.#running.splice(this.#running.indexOf(request), 1);
    if (request.known) this.#finishedSinceLastPlan.push(id);
  }

  /** Prefill and step work for this tick (no decodes: see `scheduleDecodes`). */
  schedule(nowMs: number, workOf: WorkOf): StepPlan {
    this.#admit(nowMs);
    // A known request the runner has no answer for gets nothing (the engine ends it as stuck), not a second first prefill.
    const work = new Map(this.#running.map((request) => [request.id, request.known ? (workOf(request.id) ?? NO_WORK) : NEW_REQUEST_WORK]));
    for (const request of this.#running) {
      if (request.status !== RequestStatus.PAUSED) request.status = work.get(request.id)!.prefillPositions > 0 ? RequestStatus.PREFILLING : RequestStatus.RUNNING;
      this.#updatePause(request);
    }
    const active = this.#running.filter((request) => request.status !== RequestStatus.PAUSED);

    const newRequests: StepPlan["newRequests"][number][] = [];
    const prefills: RequestId[] = [];
    let budget = this.limits.prefillPositionsPerTick;
    for (const request of active) {
      const { prefillPositions } = work.get(request.id)!;
      if (prefillPositions <= 0) continue;
      if (prefills.length > 0 && prefillPositions > budget) break;
      budget -= prefillPositions;
      prefills.push(request.id);
      if (!request.known) {
        request.known = true;
        newRequests.push({ requestId: request.id, job: request.job });
      }
    }

    const steps = active
      .filter((request) => work.get(request.id)!.canStep && !prefills.includes(request.id))
      .sort((a, b) => a.slackSeconds(nowMs) - b.slackSeconds(nowMs) || a.arrivedAtMs - b.arrivedAtMs)
      .slice(0, this.limits.stepsPerTick)
      .map((request) => request.id);

    return { newRequests, prefills, steps, decodes: [], finishedRequestIds: this.#takeFinished() };
  }

  /**
   * The decodes due now, for requests whose last decode has settled; they are marked decoding until applied.
   * Most urgent first, as steps are: the stream closest to running dry (`slackSeconds`), then the oldest; a
   * decoder that takes them in turn (a worker's queue) then serves the listener who needs audio soonest.
   */
  scheduleDecodes(workOf: WorkOf, nowMs: number): StepPlan {
    const due: Array<{ request: EngineRequest; frames: number }> = [];
    for (const request of this.#running) {
      if (request.status === RequestStatus.PAUSED || request.decoding || !request.known) continue;
      const frames = workOf(request.id)?.decodeFrames ?? 0;
      if (frames <= 0) continue;
      request.decoding = true;
      due.push({ request, frames });
    }
    due.sort((a, b) => a.request.slackSeconds(nowMs) - b.request.slackSeconds(nowMs) || a.request.arrivedAtMs - b.request.arrivedAtMs);
    const decodes = due.map(({ request, frames }) => ({ requestId: request.id, frames }));
    return { newRequests: [], prefills: [], steps: [], decodes, finishedRequestIds: this.#takeFinished() };
  }

  /** Applies what the runner did: audio to the consumers' queues, next work, ends. */
  apply(output: StepOutput, plan: StepPlan, nowMs: number): void {
    for (const { requestId } of plan.decodes) {
      const request = this.#requests.get(requestId);
      if (request) request.decoding = false;
    }
    for (const result of output.results) {
      const request = this.#requests.get(result.requestId);
      // Ended meanwhile (an abort applied while this plan ran): its audio has no one to go to.
      if (!request) continue;
      if (result.error) {
        this.finish(request.id, "error", result.error);
        continue;
      }
      for (const chunk of result.audio) {
        if (this.#deliver(request, chunk, nowMs)) break;
      }
      if (isFinished(request.status)) continue;
      if (result.finishReason) {
        this.finish(request.id, result.finishReason);
        continue;
      }
      this.#updatePause(request);
    }
  }

  /** Every request not yet finished, waiting ones first. */
  liveRequests(): EngineRequest[] {
    return [...this.#waiting, ...this.#running];
  }

  /**
   * The consumer takes one chunk of a request's audio (from a finished request too, until its queue is
   * empty); a paused request whose consumer has drained resumes here.
   */
  take(request: EngineRequest, nowMs: number): AudioChunk | undefined {
    // Held: the first audio waits until the request is far enough ahead to keep its lead (or has ended).
    if (request.firstTakenAtMs === undefined && !isFinished(request.status) && request.queuedSeconds < this.#holdOf(request)) return undefined;
    const chunk = request.queue.shift();
    if (!chunk) return undefined;
    const seconds = chunk.samples.length / chunk.sampleRateHz;
    request.queuedSeconds = Math.max(0, request.queuedSeconds - seconds);
    request.firstTakenAtMs ??= nowMs;
    request.takenSeconds += seconds;
    if (!isFinished(request.status)) this.#updatePause(request);
    return chunk;
  }

  /** Queues a chunk for the consumer, cut at the job's frame cap; true when the cap ended the request. */
  #deliver(request: EngineRequest, chunk: AudioChunk, nowMs: number): boolean {
    const cap = request.job.maxNewTokens ?? Infinity;
    let delivered = chunk;
    if (request.framesMade + chunk.frameCount > cap) {
      const frames = Math.max(0, cap - request.framesMade);
      delivered = { ...chunk, samples: chunk.samples.subarray(0, Math.min(chunk.samples.length, frames * this.samplesPerFrame)), frameCount: frames };
    }
    if (delivered.samples.length > 0 || delivered.frameCount > 0) {
      request.framesMade += delivered.frameCount;
      request.queue.push(delivered);
      request.queuedSeconds += delivered.samples.length / delivered.sampleRateHz;
      if (delivered.samples.length > 0) request.firstAudioAtMs ??= nowMs;
    }
    if (request.framesMade >= cap) {
      this.finish(request.id, "length");
      return true;
    }
    return false;
  }

  #admit(nowMs: number): void {
    while (this.#waiting.length > 0 && this.#canRun(this.#running.length + 1)) {
      const request = this.#waiting.shift()!;
      request.status = RequestStatus.PREFILLING;
      request.admittedAtMs = nowMs;
      this.#running.push(request);
      request.firstAudioHoldSeconds = this.limits.firstAudioHoldSeconds?.(this.#running.length) ?? 0;
      request.startersAtAdmission = this.startingCount;
    }
  }

  /**
   * A request's first-audio hold: as set when it was admitted, or as the load is now if that asks more. The
   * first of a burst is admitted alone, and the others' prefills, admitted a moment later, stall it just after
   * its first frame: measured with five arriving together, it was the one that ran dry (after 80 ms of audio).
   */
  #holdOf(request: EngineRequest): number {
    const now = this.limits.firstAudioHoldSeconds?.(this.#running.length + this.#waiting.length) ?? 0;
    if (now > request.firstAudioHoldSeconds) request.firstAudioHoldSeconds = now;
    return request.firstAudioHoldSeconds;
  }

  #updatePause(request: EngineRequest): void {
    const { pauseAboveSeconds } = this.limits;
    if (request.status === RequestStatus.PAUSED) {
      // Prefilling or running: the next plan tells which.
      if (request.queuedSeconds <= pauseAboveSeconds / 2) request.status = RequestStatus.RUNNING;
    } else if (request.queuedSeconds > pauseAboveSeconds) {
      request.status = RequestStatus.PAUSED;
    }
  }

  #takeFinished(): RequestId[] {
    const finished = this.#finishedSinceLastPlan;
    this.#finishedSinceLastPlan = [];
    return finished;
  }
}
