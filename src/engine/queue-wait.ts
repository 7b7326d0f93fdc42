/**
 * How long a new request would wait for a running place, from what the engine holds now. Pure: the engine
 * feeds it its requests and what it has learnt of their lengths.
 *
 * A request's length in frames is unknown until the model ends it, so it is predicted from its text (speech
 * runs at about SPEECH_CHARS_PER_SECOND) and corrected by what the requests that ended made against their
 * prediction (a model that speaks slower, a frame cap that ends every request); its running time is those
 * frames at the engine's seconds per frame (a stream makes one frame a tick, or as fast as its listener takes
 * them). The places turn over as the running requests end, earliest first, and the waiting ones take them in
 * arrival order: the new request gets the place that frees after all of theirs.
 */
import { DecayedLineFit } from "./line-fit.ts";

/** Characters of ordinary text spoken in a second (about 170 words a minute). */
export const SPEECH_CHARS_PER_SECOND = 15;
/** Requests over which the learnt length ratio and seconds per frame are averaged (exponential). */
const LEARNING_RATE = 0.25;

/** The part of a request the estimate reads. */
export interface QueuedRequest {
  job: { text: string; maxNewTokens?: number };
  /** Frames it has made so far (0 while waiting). */
  framesMade: number;
}

export class RequestLengths {
  readonly framesPerSecond: number;
  /** Frames requests made over the frames their text predicted, averaged over those that ended by themselves. */
  #lengthRatio = 1;
  /** Wall seconds a request took per frame it made, averaged over the requests that ran to their end. */
  #secondsPerFrame: number;

  constructor(framesPerSecond: number) {
    this.framesPerSecond = framesPerSecond;
    // Before anything has ended: real time, the pace of a listener who plays as the audio arrives.
    this.#secondsPerFrame = 1 / framesPerSecond;
  }

  /** Frames the text alone predicts: its spoken length and half a second of lead-in and tail. */
  textFrames(text: string): number {
    return Math.max(1, Math.ceil(this.framesPerSecond * (0.5 + text.length / SPEECH_CHARS_PER_SECOND)));
  }

  /** Frames `request` is expected to make in all: predicted from its text, learnt ratio applied, within its cap. */
  expectedFrames(request: QueuedRequest): number {
    const predicted = Math.ceil(this.textFrames(request.job.text) * this.#lengthRatio);
    return Math.min(request.job.maxNewTokens ?? Infinity, predicted);
  }

  /** Frames `request` is expected still to make (at least one while it runs). */
  remainingFrames(request: QueuedRequest): number {
    return Math.max(1, this.expectedFrames(request) - request.framesMade);
  }

  get lengthRatio(): number {
    return this.#lengthRatio;
  }

  get secondsPerFrame(): number {
    return this.#secondsPerFrame;
  }

  /**
   * A request ran to its end (the model's or its cap's, not a client leaving): `frames` made in
   * `runningSeconds` from its admission.
   */
  observe(request: QueuedRequest, frames: number, runningSeconds: number): void {
    if (!(frames > 0) || !(runningSeconds > 0)) return;
    // A request its cap ended would have gone on: its ratio is a lower bound, learnt only when it raises the figure.
    const ratio = frames / this.textFrames(request.job.text);
    const capped = request.job.maxNewTokens !== undefined && frames >= request.job.maxNewTokens;
    if (!capped || ratio > this.#lengthRatio) this.#lengthRatio += LEARNING_RATE * (ratio - this.#lengthRatio);
    this.#secondsPerFrame += LEARNING_RATE * (runningSeconds / frames - this.#secondsPerFrame);
  }
}

/**
 * Seconds until a place is free for one more request: `places` run at once; the running requests end
 * `runningSeconds` from now, and each waiting one, in order, takes the first place that frees and holds it
 * for its `waitingSeconds`. 0 when a place is free now.
 */
export function expectedWaitSeconds(places: number, runningSeconds: readonly number[], waitingSeconds: readonly number[]): number {
  if (places <= 0) return Infinity;
  const ends = [...runningSeconds].sort((a, b) => a - b);
  // With more running than places (the capacity estimate fell), a place frees only once the surplus has ended.
  const free: number[] = ends.length >= places ? ends.slice(ends.length - places) : [...new Array<number>(places - ends.length).fill(0), ...ends];
  for (const seconds of waitingSeconds) {
    // `free` stays sorted: take its earliest, put back where that request ends.
    const start = free.shift()!;
    insertSorted(free, start + seconds);
  }
  return free[0]!;
}

/** Frames after which a running request's own pace is taken for its remaining ones (a second of audio). */
const OWN_PACE_AFTER_FRAMES = 12;

/**
 * `expectedWaitSeconds` over an engine's requests: a waiting one holds its place for its expected frames at
 * `secondsPerFrame`; a running one for its remaining frames, at its own pace once it has shown one (its
 * listener's, when slower); each of `reserved` requests still being read, as long as the others on average
 * (a second of audio when there are none).
 */
export function expectedWaitOf(
  places: number,
  requests: ReadonlyArray<{ request: QueuedRequest & { admittedAtMs: number | undefined }; waiting: boolean }>,
  reserved: number,
  lengths: RequestLengths,
  secondsPerFrame: number,
  nowMs: number,
): number {
  const running: number[] = [];
  const waiting: number[] = [];
  for (const { request, waiting: isWaiting } of requests) {
    if (isWaiting) {
      waiting.push(lengths.expectedFrames(request) * secondsPerFrame);
      continue;
    }
    const ownPace = request.framesMade >= OWN_PACE_AFTER_FRAMES && request.admittedAtMs !== undefined ? (nowMs - request.admittedAtMs) / 1000 / request.framesMade : secondsPerFrame;
    running.push(lengths.remainingFrames(request) * ownPace);
  }
  const known = [...running, ...waiting];
  const typical = known.length > 0 ? known.reduce((sum, seconds) => sum + seconds, 0) / known.length : lengths.framesPerSecond * secondsPerFrame;
  for (let index = 0; index < reserved; index++) waiting.push(typical);
  return expectedWaitSeconds(places, running, waiting);
}

function insertSorted(list: number[], value: number): void {
  let index = list.findIndex((item) => item > value);
  if (index < 0) index = list.length;
  list.splice(index, 0, value);
}

/**
 * How long a request takes from its running place to its first audio, against how many requests are
 * starting at once (it included): starts share the prefill budget and the ticks, and one started beside
 * others holds its first audio until it has a lead (capacity.ts). Fitted as `fixed + perStarter · starters`
 * by exponentially weighted least squares, pulled toward a prior (line-fit.ts), as RealTimeCapacity fits its ticks.
 */
export class StartLatency {
  readonly #starts: DecayedLineFit;
  #fit: { fixedSeconds: number; perStarterSeconds: number };
  #startsTogether = 0;

  constructor(prior = DEFAULT_START_PRIOR, halfLifeStarts = 50) {
    // The prior weighs as much as PRIOR_STARTS starts, half alone and half among eight.
    this.#starts = new DecayedLineFit({ intercept: prior.fixedSeconds, slope: prior.perStarterSeconds }, { halfLife: halfLifeStarts, priorWeight: PRIOR_STARTS });
    this.#fit = { ...prior };
  }

  get fit(): Readonly<{ fixedSeconds: number; perStarterSeconds: number }> {
    return this.#fit;
  }

  /**
   * Whether starts beside others have been measured enough to refuse by: until then a cold engine admits by
   * its capacity alone, so a machine or model faster than the prior is not refused before it has shown it.
   */
  get measured(): boolean {
    return this.#startsTogether >= MEASURED_STARTS_TOGETHER;
  }

  /** A request that started beside `starters` − 1 others had its first audio taken `seconds` after its admission. */
  observe(starters: number, seconds: number): void {
    if (!(starters >= 1) || !(seconds >= 0) || !Number.isFinite(seconds)) return;
    if (starters >= 2) this.#startsTogether++;
    this.#starts.observe(starters, seconds);
    const { intercept, slope } = this.#starts.line;
    this.#fit = { fixedSeconds: intercept, perStarterSeconds: slope };
  }

  /** Seconds to first audio for a request starting now beside `starters` − 1 others. */
  predict(starters: number): number {
    return this.#fit.fixedSeconds + this.#fit.perStarterSeconds * starters;
  }
}

/**
 * A cold engine's belief of its starts, from the real-size int8 bundle on the 2-core machine of
 * docs/benchmarks.md (~0.14 s alone, 0.5–0.8 s for four arriving together, 1.4–1.8 s for eight); it only
 * steadies the fit, which refuses nothing before it has measured starts beside others (`measured`).
 */
export const DEFAULT_START_PRIOR = { fixedSeconds: 0.05, perStarterSeconds: 0.15 };
const PRIOR_STARTS = 4;
/** Starts beside others measured before their fit may refuse a request. */
const MEASURED_STARTS_TOGETHER = 3;

/**
 * The share of --first-audio-budget the predicted start may take. The fit predicts a start's mean; the
 * starts of a burst spread about it (eight arriving together on the 2-core machine of docs/benchmarks.md:
 * p95 first audio 1.5–1.6 × the median), and six let in on a prediction just within a 1 s budget had a p95
 * of 1.02–1.08 s, one in six running dry.
 */
export const START_BUDGET_SHARE = 0.8;
