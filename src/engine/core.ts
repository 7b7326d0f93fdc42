/**
 * The engine: one loop owns all model execution. Each tick is plan → runner.execute(plan) → apply, twice:
 * first the prefill and step work (awaited: the next tick plans from its results), then the decodes that
 * work made due, which are left in flight so that a decode running off the JS thread (a worker, a GPU)
 * overlaps the next tick's sampling; at most `maxInFlightDecodes` decode plans are outstanding.
 *
 * Aborts are queued when a request's signal fires (or its consumer stops reading) and applied at the start
 * of the next tick, so they never race a plan: the runner frees the request's state in the plan after.
 * Admission: at most `maxStreams` run at once (fewer where the measured capacity says so, capacity.ts) and
 * `maxQueue` wait. A submission that finds no running place waits for one only when one is expected within
 * `maxQueueWaitSeconds` (queue-wait.ts) and is refused if none came by then; otherwise, or past `maxQueue`,
 * it is refused at once (EngineFullError, which a front end answers as its "retry later": a 429, with the
 * expected time to a free place). Callers that asked to wait (batch items) wait for room however long.
 */
import { EngineFullError, EngineUnavailableError } from "./errors.ts";

export { EngineFullError, EngineUnavailableError } from "./errors.ts";
import type { AudioChunk, FinishReason, ModelRunner, RequestId, StepOutput, StepPlan, SynthesisJob } from "../models/contract.ts";
import { EngineRequest, isFinished, RequestStatus } from "./request.ts";
import { Scheduler, type SchedulerCounts } from "./scheduler.ts";
import { RealTimeCapacity } from "./capacity.ts";
import { expectedWaitOf, RequestLengths, START_BUDGET_SHARE, StartLatency } from "./queue-wait.ts";

export type { FinishReason } from "../models/contract.ts";

export interface EngineOptions {
  /** Requests running at once. */
  maxStreams: number;
  /** Requests waiting for a running place; past it submissions are refused (EngineFullError). */
  maxQueue: number;
  /**
   * Seconds a submission that asked to be refused when full may wait for a running place: refused at once
   * when none is expected sooner, and when none came by then. Default: no bound (only `maxQueue`).
   */
  maxQueueWaitSeconds?: number;
  /**
   * With real-time admission: seconds a request starting beside others may take to its first audio, by the
   * engine's measured starts (queue-wait.ts StartLatency), its wait for a place included; one that would take
   * longer is refused like one that would wait too long. A request with no other starting always may start.
   * Default: no budget.
   */
  firstAudioBudgetSeconds?: number;
  /** Positions of prefill work one tick may hold. */
  prefillPositionsPerTick?: number;
  /** Seconds of audio made and not taken above which a request pauses. */
  pauseAboveSeconds?: number;
  /** Decode plans left in flight at once. */
  maxInFlightDecodes?: number;
  /**
   * Memory admission plans within: a request is admitted only while the resident memory now, plus what
   * every waiting request and this one are planned to cost, stays within `budgetBytes`.
   */
  memory?: { budgetBytes: number; plannedBytesPerRequest: number; residentBytes: () => number };
  /** Called each time the engine runs out of work: nothing running, waiting or decoding. */
  onIdle?: () => void;
  /**
   * Admission by measured real-time capacity (capacity.ts), for runners whose steps make a frame each
   * (`ModelRunner.framesPerStep`): on by default; false admits up to `maxStreams` whatever the load.
   */
  realTimeAdmission?: boolean;
}

/**
 * Two text chunks a tick beside the running streams' steps. 8 streams arriving at once (bench/load.ts, real
 * size, 2 cores), p50 / p95 first audio: 128 → 184–187 / 281–298 ms, none starving; 256 → 190–206 / 238–256
 * ms, once 3 of 8 starving (bigger prefill ticks hold the running streams back); 512 → 251–257 / 251–257 ms
 * (every first audio waits for all eight prefills).
 */
export const DEFAULT_PREFILL_POSITIONS_PER_TICK = 128;
/** A slow consumer may fall this far behind before its stream pauses (the client-side buffer it may fill). */
export const DEFAULT_PAUSE_ABOVE_SECONDS = 2;
/**
 * Decode plans in flight at once. A plan settles as a whole and a request has one decode in flight at a
 * time, so with too few the sampler stops for the decoder: 8 streams on the real-size bundle, 2 cores
 * (bench/load.ts) made 10.5 audio s per wall s with 2, 13.1–13.4 with 4, 13.3–13.7 with 16.
 */
const DEFAULT_MAX_IN_FLIGHT_DECODES = 16;

/** What the engine tells metrics; the composition root wires it to Prometheus. */
export interface EngineObserver {
  /** One tick's stage times and model-call batch sizes (as the runner reported them). */
  tick(stageSeconds: Record<string, number>, batchSizes: Record<string, number[]>): void;
  finished(reason: FinishReason): void;
  rejected(): void;
}

/** A place promised by `reservePlace` to a request still being read; `submit` takes it, `release` gives it back. */
export interface PlaceReservation {
  release(): void;
}

export interface SubmitOptions {
  /** The place `reservePlace` promised this request: it is not checked again. */
  reservation?: PlaceReservation;
  /**
   * "reject" (default): refused (EngineFullError) when no running place is free and none is expected within
   * `maxQueueWaitSeconds`; otherwise the submission settles once the request has its place. "wait": waits for
   * room (until the job's signal aborts) and settles once the request is queued.
   */
  whenFull?: "reject" | "wait";
}

/** One request's audio as the engine makes it; iterate it once. */
export class EngineStream implements AsyncIterable<AudioChunk> {
  constructor(
    private readonly engine: Engine,
    readonly request: EngineRequest,
  ) {}

  get requestId(): RequestId {
    return this.request.id;
  }

  /** How the request ended; undefined while it runs. */
  get finishReason(): FinishReason | undefined {
    return this.request.finishReason;
  }

  [Symbol.asyncIterator](): AsyncIterator<AudioChunk> {
    return this.engine.chunksOf(this.request);
  }

  /**
   * Gives up the request, read or not: its running place and model state are freed at the next tick. For a
   * caller that admitted a stream and then failed before handing it to a consumer.
   */
  cancel(): void {
    this.engine.cancel(this.request);
  }
}

/** The places that run at once: `maxStreams`, or the real-time estimate where it is lower (0: none made yet). */
export function runningPlaces(maxStreams: number, realTimeStreams: number | undefined): number {
  return Math.min(maxStreams, realTimeStreams || Infinity);
}

export class Engine {
  readonly #runner: ModelRunner;
  readonly #scheduler: Scheduler;
  readonly #limits: { maxStreams: number; maxQueue: number };
  readonly #maxQueueWaitSeconds: number;
  readonly #firstAudioBudgetSeconds: number;
  /** How long starts have taken against how many started together (real-time admission only). */
  readonly #starts: StartLatency | undefined;
  /** What the requests that ended say of how long the next ones run, for the expected wait. */
  readonly #lengths: RequestLengths;
  /** Places promised to requests still being read (reservePlace), not yet submitted. */
  #reserved = 0;
  /** Submissions waiting for their request's running place: each checks whether it has one, or has ended. */
  readonly #placeWaiters = new Set<() => void>();
  readonly #maxInFlightDecodes: number;
  readonly #memory: EngineOptions["memory"];
  readonly #onIdle: (() => void) | undefined;
  /** What the engine has measured of its real-time capacity; undefined where admission ignores it. */
  readonly capacity: RealTimeCapacity | undefined;
  /** The last tick that stepped streams and prefilled none, while the loop has not waited since: its period is measured at the next. */
  #lastStepTick: { startMs: number; streams: number } | undefined;
  #nextId = 1;
  /** The running loop, until it runs out of work. */
  #loopDone: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  readonly #abortQueue: RequestId[] = [];
  readonly #inFlight = new Set<Promise<void>>();
  /** Consumers waiting for their request's next chunk or its end. */
  readonly #consumers = new Map<RequestId, () => void>();
  /** Submissions waiting for room (whenFull "wait"), oldest first. */
  readonly #roomWaiters: Array<() => void> = [];
  /** Auxiliary model work (voice encodes) run one per tick, between plans. */
  readonly #tasks: Array<() => Promise<void>> = [];
  /** When a request was last admitted or ended: while the engine is full, nothing has turned over since. */
  #lastTurnoverMs = performance.now();
  #closed = false;
  /** Why the engine can run nothing more: its own loop broke, or its runner reported a failure. */
  #failure: Error | undefined;
  readonly #workOf = (id: RequestId) => this.#runner.nextWork(id);
  observer: EngineObserver | undefined;
  /** Hears the engine's failure once, when it is first seen (the composition root logs it). */
  onFailure: ((error: Error) => void) | undefined;

  constructor(runner: ModelRunner, model: { nativeSampleRateHz: number; framesPerSecond: number }, options: EngineOptions) {
    this.#runner = runner;
    const maxStreams = Math.min(options.maxStreams, runner.maxRequests ?? Infinity);
    this.#limits = { maxStreams, maxQueue: options.maxQueue };
    this.#maxQueueWaitSeconds = options.maxQueueWaitSeconds ?? Infinity;
    this.#firstAudioBudgetSeconds = options.firstAudioBudgetSeconds ?? Infinity;
    this.#lengths = new RequestLengths(model.framesPerSecond);
    this.#maxInFlightDecodes = options.maxInFlightDecodes ?? DEFAULT_MAX_IN_FLIGHT_DECODES;
    this.#memory = options.memory;
    this.#onIdle = options.onIdle;
    if ((options.realTimeAdmission ?? true) && runner.framesPerStep === 1) this.capacity = new RealTimeCapacity({ framePeriodSeconds: 1 / model.framesPerSecond });
    const capacity = this.capacity;
    if (capacity) this.#starts = new StartLatency();
    this.#scheduler = new Scheduler(
      {
        maxRunning: maxStreams,
        maxWaiting: options.maxQueue,
        prefillPositionsPerTick: options.prefillPositionsPerTick ?? DEFAULT_PREFILL_POSITIONS_PER_TICK,
        stepsPerTick: runner.stepsPerTick ?? Infinity,
        pauseAboveSeconds: options.pauseAboveSeconds ?? DEFAULT_PAUSE_ABOVE_SECONDS,
        ...(capacity ? { admits: (streams: number) => capacity.admits(streams), firstAudioHoldSeconds: (streams: number) => capacity.firstAudioHoldSeconds(streams) } : {}),
      },
      Math.round(model.nativeSampleRateHz / model.framesPerSecond),
    );
  }

  get limits(): { maxStreams: number; maxQueue: number } {
    return this.#limits;
  }

  /** How many requests run at once now: `maxStreams`, or fewer where the capacity estimate says fewer stay real time. */
  get places(): number {
    return runningPlaces(this.#limits.maxStreams, this.capacity?.streams);
  }

  /** Requests waiting, running and paused now. */
  get counts(): SchedulerCounts {
    return this.#scheduler.counts;
  }

  /** Set once the engine can run nothing more; new submissions are then refused (EngineUnavailableError). */
  get failure(): Error | undefined {
    if (!this.#failure && this.#runner.failure) this.#fail(this.#runner.failure);
    return this.#failure;
  }

  #fail(error: Error): void {
    if (this.#failure) return;
    this.#failure = error;
    this.onFailure?.(error);
  }

  /**
   * How long the engine has been unable to admit anything: 0 while it has room, else the time since a request
   * was last admitted or ended. Work that turns over keeps this short however busy the engine is; a long one
   * means the places are held by requests that make no progress.
   */
  fullForMs(nowMs = performance.now()): number {
    return this.#scheduler.hasRoom ? 0 : nowMs - this.#lastTurnoverMs;
  }

  /** Bytes of per-request model state the runner holds now. */
  get stateBytes(): number {
    return this.#runner.stateBytes();
  }

  /**
   * Admits a job: its audio, as made, through the returned stream. Unless `whenFull` is "wait", refused at
   * once (EngineFullError) when every waiting place is taken or no running place is expected within
   * `maxQueueWaitSeconds`, and settles once the request has its running place (so a front end answers a
   * refusal before anything of the response); a request that waited that long without one is refused then.
   */
  async submit(job: SynthesisJob, options: SubmitOptions = {}): Promise<EngineStream> {
    if (this.#closed) throw new EngineUnavailableError("closed");
    const failure = this.failure;
    if (failure) throw new EngineUnavailableError("failed", failure);
    job.signal.throwIfAborted();
    const waits = options.whenFull === "wait";
    if (options.reservation) {
      options.reservation.release();
      // Promised while there was room; the capacity estimate may have fallen since.
      if (!this.#scheduler.hasRoom) throw this.fullError();
    } else if (waits) while (!this.#hasRoom) await this.#roomFor(job.signal);
    else this.refuseUnlessPlaceSoon();
    const request = this.#add(job);
    if (!waits) await this.#placeFor(request);
    return new EngineStream(this, request);
  }

  #add(job: SynthesisJob): EngineRequest {
    const request = new EngineRequest(this.#nextId++, job, performance.now());
    this.#scheduler.add(request);
    this.#lastTurnoverMs = performance.now();
    // A WebSocket session's signal outlives its sentences: each request's listener goes when it is read out.
    const onAbort = () => this.#queueAbort(request.id);
    job.signal.addEventListener("abort", onAbort, { once: true });
    request.detach = () => job.signal.removeEventListener("abort", onAbort);
    this.#kick();
    return request;
  }

  /** A running place would be free for one more request now: fewer are running and waiting than may run. */
  get #placeFreeNow(): boolean {
    return this.#scheduler.counts.waiting + this.#reserved < this.#scheduler.admittable;
  }

  /**
   * Seconds until a running place is free for one more request (0 when one is now): the running requests'
   * expected remaining frames and the waiting ones' expected lengths, at the pace requests run here now.
   */
  expectedWaitSeconds(): number {
    if (this.#placeFreeNow) return 0;
    const secondsPerFrame = Math.max(this.#lengths.secondsPerFrame, this.capacity?.predictTickSeconds(this.places) ?? 0);
    const requests = this.#scheduler.liveRequests().map((request) => ({ request, waiting: request.status === RequestStatus.WAITING }));
    return expectedWaitOf(this.places, requests, this.#reserved, this.#lengths, secondsPerFrame, performance.now());
  }

  /**
   * Settles once `request` has a running place; rejects with its signal's reason if it was aborted first, and
   * with EngineFullError (its place in the queue given up) if it has none after `maxQueueWaitSeconds`.
   */
  #placeFor(request: EngineRequest): Promise<void> {
    if (request.status !== RequestStatus.WAITING) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const settle = (error?: unknown) => {
        clearTimeout(timer);
        this.#placeWaiters.delete(check);
        if (error === undefined) resolve();
        else reject(error);
      };
      const check = () => {
        if (request.status === RequestStatus.WAITING) return;
        if (!isFinished(request.status)) return settle();
        settle(request.job.signal.aborted ? request.job.signal.reason : this.#closed ? new EngineUnavailableError("closed") : (request.error ?? new EngineUnavailableError("closed")));
      };
      const giveUp = () => {
        if (request.status !== RequestStatus.WAITING) return check();
        request.detach();
        this.#scheduler.finish(request.id, "abort");
        // Its waiting place is free: a batch item waiting for room may take it.
        this.#roomWaiters.shift()?.();
        settle(this.fullError());
      };
      const timer = Number.isFinite(this.#maxQueueWaitSeconds) ? setTimeout(giveUp, this.#maxQueueWaitSeconds * 1000) : undefined;
      this.#placeWaiters.add(check);
    });
  }

  /** Tells the submissions waiting for a place whether theirs came (or their request ended). */
  #checkPlaceWaiters(): void {
    for (const check of [...this.#placeWaiters]) check();
  }

  /** Refused (EngineFullError) now, counted as a refusal, when no running or waiting place is free. */
  refuseIfFull(): void {
    if (!this.#hasRoom) throw this.fullError();
  }

  /**
   * Refused (EngineFullError) now, counted as a refusal, unless a running place is free or expected within
   * `maxQueueWaitSeconds` (and a waiting place is free): what `submit` checks first, and what a front end
   * may check before it reads a request, so that a full server answers at once, having done nothing.
   */
  refuseUnlessPlaceSoon(): void {
    if (!this.#hasRoom) throw this.fullError();
    const waitSeconds = this.expectedWaitSeconds();
    if (waitSeconds > this.#maxQueueWaitSeconds) throw this.fullError(waitSeconds);
    const starts = this.#starts;
    if (!starts?.measured) return;
    // Starting with others: the ones starting now, and the waiting ones, which start before it.
    const starters = this.#scheduler.startingCount + this.#scheduler.counts.waiting + this.#reserved;
    if (starters === 0) return;
    const firstAudioSeconds = waitSeconds + starts.predict(starters + 1);
    if (firstAudioSeconds <= START_BUDGET_SHARE * this.#firstAudioBudgetSeconds) return;
    // Its place frees as the others' starts end: about when the last of them is expected to have its first audio.
    throw this.fullError(undefined, { firstAudioSeconds, retryAfterSeconds: starts.predict(starters) });
  }

  /**
   * `refuseUnlessPlaceSoon`, and the place it found promised until `submit` takes it (or `release`): a front
   * end checks before it reads a request, so a full server refuses at once, and the requests being read
   * meanwhile count as taking their places.
   */
  reservePlace(): PlaceReservation {
    this.refuseUnlessPlaceSoon();
    this.#reserved++;
    let held = true;
    return {
      release: () => {
        if (held) this.#reserved--;
        held = false;
      },
    };
  }

  /** The start-latency fit admission predicts first audio by (real-time admission only). */
  get startLatency(): StartLatency | undefined {
    return this.#starts;
  }

  /**
   * The refusal a full engine answers with, counted as one; `waitSeconds`: the expected wait for a place,
   * where that (beyond `maxQueueWaitSeconds`) is the reason.
   */
  fullError(waitSeconds?: number, start?: { firstAudioSeconds: number; retryAfterSeconds: number }): EngineFullError {
    this.observer?.rejected();
    const wait = start?.retryAfterSeconds ?? waitSeconds ?? this.expectedWaitSeconds();
    const retryAfterSeconds = Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(1, Math.ceil(wait)));
    const reason = start
      ? { firstAudioSeconds: start.firstAudioSeconds, firstAudioLimitSeconds: START_BUDGET_SHARE * this.#firstAudioBudgetSeconds, firstAudioBudgetSeconds: this.#firstAudioBudgetSeconds }
      : waitSeconds !== undefined
        ? { expectedWaitSeconds: waitSeconds, maxQueueWaitSeconds: this.#maxQueueWaitSeconds }
        : undefined;
    return new EngineFullError(retryAfterSeconds, this.#limits, this.#scheduler.hasRoom ? this.#memory?.budgetBytes : undefined, reason);
  }

  /** A place is free, and (with a memory budget) one more request is planned to fit in it. */
  get #hasRoom(): boolean {
    // The places promised to requests still being read are taken as if they waited.
    const { running, waiting, paused } = this.#scheduler.counts;
    const queued = waiting + this.#reserved;
    if (queued >= this.#limits.maxQueue + this.#scheduler.admittable) return false;
    const memory = this.#memory;
    if (!memory) return true;
    // With nothing admitted, one request always may run: a budget below the idle server must not refuse everything.
    if (running + queued + paused === 0) return true;
    return memory.residentBytes() + memory.plannedBytesPerRequest * (queued + 1) <= memory.budgetBytes;
  }

  /**
   * Runs model work that belongs to no request (a voice encode) between two plans, so it delays the
   * running streams by one unit of work at most, never by a queue of them. Never starts once `signal` aborted.
   */
  runTask<T>(task: () => Promise<T>, signal: AbortSignal): Promise<T> {
    signal.throwIfAborted();
    return new Promise<T>((resolve, reject) => {
      this.#tasks.push(async () => {
        if (signal.aborted) return reject(signal.reason);
        try {
          resolve(await task());
        } catch (error) {
          reject(error);
        }
      });
      this.#kick();
    });
  }

  /** @internal The consumer side of EngineStream. */
  async *chunksOf(request: EngineRequest): AsyncGenerator<AudioChunk, void, undefined> {
    try {
      for (;;) {
        const wasPaused = request.status === RequestStatus.PAUSED;
        const firstTake = request.firstTakenAtMs === undefined;
        const chunk = this.#scheduler.take(request, performance.now());
        if (chunk) {
          if (firstTake && request.admittedAtMs !== undefined) this.#starts?.observe(request.startersAtAdmission, (request.firstTakenAtMs! - request.admittedAtMs) / 1000);
          if (wasPaused && request.status !== RequestStatus.PAUSED) this.#kick();
          yield chunk;
          continue;
        }
        if (isFinished(request.status)) {
          if (request.status === RequestStatus.FINISHED_ERROR) throw request.error ?? new Error("speech generation failed");
          return;
        }
        await new Promise<void>((resolve) => this.#consumers.set(request.id, resolve));
      }
    } finally {
      request.detach();
      this.#consumers.delete(request.id);
      // The consumer stopped reading before the end: nobody wants the rest.
      if (!isFinished(request.status)) this.#queueAbort(request.id);
    }
  }

  /** @internal EngineStream.cancel. */
  cancel(request: EngineRequest): void {
    request.detach();
    if (!isFinished(request.status)) this.#queueAbort(request.id);
  }

  /** Ends every request and stops the loop; the runner frees their state in a last plan. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const waiter of this.#roomWaiters.splice(0)) waiter();
    // Aborting every request ends the loop once the runner has freed them.
    for (const request of this.#scheduler.liveRequests()) this.#queueAbort(request.id);
    this.#kick();
    await this.#loopDone;
  }

  #queueAbort(id: RequestId): void {
    if (!this.#scheduler.get(id)) return;
    this.#abortQueue.push(id);
    this.#kick();
  }

  #applyAborts(): void {
    for (const id of this.#abortQueue.splice(0)) this.#finish(id, "abort");
  }

  /** Starts the loop if it is not running, or wakes it if it is waiting for something to do. */
  #kick(): void {
    if (!this.#loopDone) {
      // Started a microtask later, so the loop's own end (which clears this) always comes after it is set.
      this.#loopDone = Promise.resolve().then(() => this.#loop());
      return;
    }
    this.#wake?.();
  }

  async #loop(): Promise<void> {
    try {
      for (;;) {
        this.#applyAborts();
        if (this.#scheduler.idle && this.#tasks.length === 0 && this.#inFlight.size === 0) {
          this.#onIdle?.();
          return;
        }
        let worked = false;
        const task = this.#tasks.shift();
        if (task) {
          // Model work of no stream's: the tick it delays is not the streams' cost.
          this.#lastStepTick = undefined;
          await task();
          worked = true;
          this.#applyAborts();
        }
        const tickStartMs = performance.now();
        const plan = this.#scheduler.schedule(tickStartMs, this.#workOf);
        if (plan.newRequests.length > 0) this.#checkPlaceWaiters();
        this.#measureTick(plan, tickStartMs);
        if (hasWork(plan)) {
          worked = true;
          await this.#executeNow(plan);
          this.#applyAborts();
        }
        const decodes = this.#scheduler.scheduleDecodes(this.#workOf, performance.now());
        if (hasWork(decodes)) {
          worked = true;
          if (this.#runner.decodesOverlap) this.#launchDecodes(decodes);
          else await this.#executeNow(decodes);
        }
        // Bound the decodes in flight; with nothing else to do, wait for one to settle or for news.
        if (this.#inFlight.size >= this.#maxInFlightDecodes || (!worked && this.#inFlight.size > 0)) {
          this.#lastStepTick = undefined;
          await Promise.race([...this.#inFlight, this.#nextWake()]);
          continue;
        }
        if (worked || this.#tasks.length > 0 || this.#abortQueue.length > 0) continue;
        this.#failStuck();
        this.#lastStepTick = undefined;
        if (!this.#scheduler.idle) await this.#nextWake();
      }
    } catch (error) {
      // A fault of the engine itself: every request ends with it rather than hanging.
      const failure = error instanceof Error ? error : new Error(String(error));
      this.#fail(failure);
      for (const request of this.#scheduler.liveRequests()) this.#finish(request.id, "error", failure);
    } finally {
      this.#loopDone = undefined;
      this.#wake = undefined;
    }
  }

  /**
   * The period of the last step tick, start to this start, for the capacity estimate: only when the loop
   * went straight on (no wait, no task between) and that tick prefilled nothing (a prefill is a stream's
   * one-off cost, not what keeping it running costs).
   */
  #measureTick(plan: StepPlan, startMs: number): void {
    if (!this.capacity) return;
    const last = this.#lastStepTick;
    if (last) this.capacity.observeTick(last.streams, (startMs - last.startMs) / 1000);
    this.#lastStepTick = plan.steps.length > 0 && plan.prefills.length === 0 ? { startMs, streams: plan.steps.length } : undefined;
  }

  #nextWake(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#wake = () => {
        this.#wake = undefined;
        resolve();
      };
    });
  }

  async #executeNow(plan: StepPlan): Promise<void> {
    const startedMs = performance.now();
    let output: StepOutput;
    try {
      output = await this.#runner.execute(plan);
    } catch (error) {
      this.#failPlan(plan, error);
      return;
    }
    this.#observeDecodes(plan, startedMs);
    this.#applyOutput(output, plan);
  }

  /** How late a plan's decodes settled against the audio they made: the decoders' side of the capacity. */
  #observeDecodes(plan: StepPlan, startedMs: number): void {
    if (!this.capacity || plan.decodes.length === 0) return;
    const seconds = (performance.now() - startedMs) / 1000;
    for (const { frames } of plan.decodes) this.capacity.observeDecode(frames, seconds);
  }

  /** The runner threw for a whole plan: every request it named fails with that error. */
  #failPlan(plan: StepPlan, error: unknown): void {
    this.#scheduler.apply({ results: [], stageSeconds: {}, batchSizes: {} }, plan, performance.now());
    const failure = error instanceof Error ? error : new Error(String(error));
    if (this.#runner.failure) this.#fail(this.#runner.failure);
    for (const id of [...plan.prefills, ...plan.steps, ...plan.decodes.map((decode) => decode.requestId)]) this.#finish(id, "error", failure);
  }

  #finish(id: RequestId, reason: FinishReason, error?: Error): void {
    const request = this.#scheduler.get(id);
    if (!request) return;
    this.#scheduler.finish(id, reason, error);
    this.#ended(reason, request);
    this.#notify(id);
    this.#checkPlaceWaiters();
  }

  /**
   * A tick's decodes, left in flight. Unless they share model calls, each request's decode is a plan of its
   * own: a stream's audio goes out the moment its decode settles, not when the tick's slowest has (12 streams
   * on two decoder workers waited for six decodes each), and the scheduler's order (closest to running dry
   * first) is the order the decoders take them in. The tick still counts once against the in-flight bound.
   */
  #launchDecodes(plan: StepPlan): void {
    if (this.#runner.decodesShareCalls || plan.decodes.length <= 1) return this.#launch(plan);
    const parts = plan.decodes.map((decode, index): StepPlan => ({ ...plan, decodes: [decode], finishedRequestIds: index === 0 ? plan.finishedRequestIds : [] }));
    this.#track(Promise.all(parts.map((part) => this.#run(part).finally(() => this.#wake?.()))).then(() => {}));
  }

  #launch(plan: StepPlan): void {
    this.#track(this.#run(plan));
  }

  #run(plan: StepPlan): Promise<void> {
    const startedMs = performance.now();
    return this.#runner.execute(plan).then(
      (output) => {
        this.#observeDecodes(plan, startedMs);
        this.#applyOutput(output, plan);
      },
      (error: unknown) => this.#failPlan(plan, error),
    );
  }

  #track(settled: Promise<void>): void {
    this.#inFlight.add(settled);
    void settled.finally(() => {
      this.#inFlight.delete(settled);
      this.#wake?.();
    });
  }

  #applyOutput(output: StepOutput, plan: StepPlan): void {
    const live = new Map(output.results.map((result) => [result.requestId, this.#scheduler.get(result.requestId)]));
    this.#scheduler.apply(output, plan, performance.now());
    for (const [id, request] of live) {
      if (request && isFinished(request.status)) this.#ended(request.finishReason!, request);
      this.#notify(id);
    }
    this.observer?.tick(output.stageSeconds, output.batchSizes);
  }

  /** Running requests the model gave nothing to do, with nothing in flight: a runner bug, ended rather than hung. */
  #failStuck(): void {
    for (const request of this.#scheduler.liveRequests()) {
      if (request.status === RequestStatus.WAITING || request.status === RequestStatus.PAUSED || request.decoding || !request.known) continue;
      const work = this.#runner.nextWork(request.id);
      if (!work) continue;
      const { prefillPositions, canStep, decodeFrames } = work;
      if (prefillPositions > 0 || canStep || decodeFrames > 0) continue;
      this.#finish(request.id, "error", new Error("the model reported no further work for an unfinished request"));
    }
  }

  #ended(reason: FinishReason, request?: EngineRequest): void {
    this.#lastTurnoverMs = performance.now();
    if (request?.admittedAtMs !== undefined && (reason === "stop" || reason === "length")) {
      this.#lengths.observe(request, request.framesMade, (performance.now() - request.admittedAtMs) / 1000);
    }
    this.observer?.finished(reason);
    // A place is free: the oldest submission waiting for room may take it.
    this.#roomWaiters.shift()?.();
  }

  #notify(id: RequestId): void {
    const consumer = this.#consumers.get(id);
    this.#consumers.delete(id);
    consumer?.();
  }

  #roomFor(signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const index = this.#roomWaiters.indexOf(wake);
        if (index >= 0) this.#roomWaiters.splice(index, 1);
        reject(signal.reason);
      };
      const wake = () => {
        signal.removeEventListener("abort", onAbort);
        if (this.#closed) return reject(new EngineUnavailableError("closed"));
        resolve();
      };
      this.#roomWaiters.push(wake);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }
}

/** The longest Retry-After told: past a minute, the estimate says more about the load than the clock. */
const MAX_RETRY_AFTER_SECONDS = 60;

function hasWork(plan: StepPlan): boolean {
  return plan.newRequests.length > 0 || plan.prefills.length > 0 || plan.steps.length > 0 || plan.decodes.length > 0 || plan.finishedRequestIds.length > 0;
}
