/**
 * How many streams this engine can keep in real time, learnt from its own ticks. Pure: no clock, no model;
 * the engine feeds it what it measured.
 *
 * A running stream gets one AR step a tick, so it stays real time while a tick (the loop's whole period:
 * sampling, decode dispatch, the event loop's other work) is shorter than a frame. The period of a tick
 * that steps N streams is fitted as `fixed + perStream · N` by exponentially weighted least squares (recent
 * ticks count most, so the fit follows the machine's load), with a weak pull toward a prior so that a fit
 * from ticks that all stepped the same N still has a slope (line-fit.ts). The decoders are watched on their own: a decode
 * of F frames settling later than F frames of real time means the decoders are behind, whatever the ticks say.
 *
 * `admits(n)` says whether an n-th stream keeps the predicted period within `target` of a frame, with the
 * decoders keeping up; the scheduler admits by it, and the expected wait for a place (queue-wait.ts) paces
 * requests by the same fit.
 */
import { DecayedLineFit } from "./line-fit.ts";

export interface CapacityPrior {
  /** Seconds of a tick that steps no stream (the loop's own overhead). */
  fixedSeconds: number;
  /** Seconds each stepping stream adds to a tick. */
  perStreamSeconds: number;
}

export interface CapacityOptions {
  /** Seconds of audio one AR step makes (80 ms for Pocket TTS's 12.5 Hz frames). */
  framePeriodSeconds: number;
  /** Share of a frame's time a tick may take: the rest absorbs noise, prefills and bursts. */
  target?: number;
  prior?: CapacityPrior;
  /** Ticks over which an observation's weight halves. */
  halfLifeTicks?: number;
}

/**
 * A cold engine's belief before it has measured anything, from the real-size int8 bundle on the 2-core
 * machine of docs/benchmarks.md: 8 streams ticked every ~70 ms under load (bench/load.ts), about 8 ms a stream
 * and a few ms of the loop's own. A faster machine corrects it within a few ticks, since the measured ticks
 * soon outweigh it; a slower one at its first burst.
 */
export const DEFAULT_CAPACITY_PRIOR: CapacityPrior = { fixedSeconds: 0.006, perStreamSeconds: 0.008 };
/**
 * A tick may take 55 % of a frame (44 ms at 12.5 Hz). Not more: a stream's first seconds are decoded in pieces of
 * 1, 2, 4 and 8 frames, and beside the prefills of streams starting with it, its fourth piece comes back late
 * unless ticks stay well under a frame. On the 2-core machine (docs/benchmarks.md, 2026-12-03) with the hold
 * below, 8 streams arriving together ran dry 2 of 8 times at 85 % and 0 of 16 at 55 %.
 */
export const DEFAULT_REAL_TIME_TARGET = 0.55;
const DEFAULT_HALF_LIFE_TICKS = 200;
/** The prior weighs as much as this many ticks, at one and at eight streams. */
const PRIOR_WEIGHT = 4;
/**
 * Above this predicted share of a frame a stream admitted beside others holds its first audio until
 * FIRST_AUDIO_HOLD_FRAMES are queued (400 ms). Measured against the hold of 3 frames above 60 %: with 8 streams
 * arriving together, 0 of 8 ran dry (twice) against 3 of 8, for a p50 first audio of 641–645 ms against 443.
 * Smooth audio is worth the wait: a listener forgives a late start, not a stutter in the middle of a word.
 */
export const HOLD_ABOVE_UTILIZATION = 0.25;
export const FIRST_AUDIO_HOLD_FRAMES = 5;
/** Decodes over which the decoders' lateness is averaged (exponential). */
const DECODE_SMOOTHING = 0.1;

export class RealTimeCapacity {
  readonly framePeriodSeconds: number;
  readonly target: number;
  /** Tick seconds against streams stepped. */
  readonly #ticks: DecayedLineFit;
  #fit: CapacityPrior;
  /** Decode latency over the audio it made, averaged; above `target` the decoders fall behind. */
  #decodeLoad = 0;
  #ticksSeen = 0;

  constructor(options: CapacityOptions) {
    this.framePeriodSeconds = options.framePeriodSeconds;
    this.target = options.target ?? DEFAULT_REAL_TIME_TARGET;
    const prior = options.prior ?? DEFAULT_CAPACITY_PRIOR;
    this.#ticks = new DecayedLineFit({ intercept: prior.fixedSeconds, slope: prior.perStreamSeconds }, { halfLife: options.halfLifeTicks ?? DEFAULT_HALF_LIFE_TICKS, priorWeight: PRIOR_WEIGHT });
    this.#fit = { ...prior };
  }

  /** A tick that stepped `streams` streams (and prefilled none) took `seconds`, start to next start. */
  observeTick(streams: number, seconds: number): void {
    if (!(streams > 0) || !(seconds >= 0) || !Number.isFinite(seconds)) return;
    this.#ticks.observe(streams, seconds);
    this.#ticksSeen++;
    const { intercept, slope } = this.#ticks.line;
    this.#fit = { fixedSeconds: intercept, perStreamSeconds: slope };
  }

  /** A decode of `frames` frames settled `latencySeconds` after it was sent (its queue included). */
  observeDecode(frames: number, latencySeconds: number): void {
    if (!(frames > 0) || !(latencySeconds >= 0)) return;
    const load = latencySeconds / (frames * this.framePeriodSeconds);
    this.#decodeLoad += DECODE_SMOOTHING * (load - this.#decodeLoad);
  }

  /** The fitted tick: seconds of its own plus seconds a stream. */
  get fit(): Readonly<CapacityPrior> {
    return this.#fit;
  }

  get ticksSeen(): number {
    return this.#ticksSeen;
  }

  /** The decoders' recent latency over the audio they made (1: just real time). */
  get decodeLoad(): number {
    return this.#decodeLoad;
  }

  predictTickSeconds(streams: number): number {
    return this.#fit.fixedSeconds + this.#fit.perStreamSeconds * streams;
  }

  /** A tick's predicted share of a frame with `streams` streams stepping. */
  utilization(streams: number): number {
    return this.predictTickSeconds(streams) / this.framePeriodSeconds;
  }

  /** The most streams whose predicted tick stays within the target (at least one). */
  get streams(): number {
    const { fixedSeconds, perStreamSeconds } = this.#fit;
    const most = Math.floor((this.target * this.framePeriodSeconds - fixedSeconds) / perStreamSeconds);
    return Math.max(1, Number.isFinite(most) ? most : 1);
  }

  /**
   * Audio a stream admitted beside others holds back before its first is taken: none when it runs alone (its
   * first audio is never delayed) or while the predicted tick leaves room, else FIRST_AUDIO_HOLD_FRAMES, so the
   * player's buffer starts with a lead the stream can keep.
   */
  firstAudioHoldSeconds(streams: number): number {
    if (streams <= 1) return 0;
    return this.utilization(streams) > HOLD_ABOVE_UTILIZATION ? FIRST_AUDIO_HOLD_FRAMES * this.framePeriodSeconds : 0;
  }

  /** Whether `streams` streams at once stay real time by the estimate, the decoders keeping up too. */
  admits(streams: number): boolean {
    if (streams <= 1) return true;
    return streams <= this.streams && this.#decodeLoad <= this.target;
  }
}
