/**
 * How many streams this engine can keep in real time, learnt from its own ticks. Pure: no clock, no model;
 * the engine feeds it what it measured.
 *
 * A running stream gets one AR step a tick, so it stays real time while a tick (the loop's whole period:
 * sampling, decode dispatch, the event loop's other work) is shorter than a frame. The period of a tick
 * that steps N streams is fitted as `fixed + perStream · N` by exponentially weighted least squares (recent
 * ticks count most, so the fit follows the machine's load), with a weak pull toward a prior so that a fit
 * from ticks that all stepped the same N still has a slope. The decoders are watched on their own: a decode
 * of F frames settling later than F frames of real time means the decoders are behind, whatever the ticks say.
 *
 * `admits(n)` says whether an n-th stream keeps the predicted period within `target` of a frame, with the
 * decoders keeping up; the scheduler admits by it, and Retry-After is estimated from the same figure.
 */

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
  readonly #prior: CapacityPrior;
  readonly #decay: number;
  // Weighted sums of the ticks seen: weight, x (streams), y (seconds), x², xy.
  #w = 0;
  #x = 0;
  #y = 0;
  #xx = 0;
  #xy = 0;
  #fit: CapacityPrior;
  /** Decode latency over the audio it made, averaged; above `target` the decoders fall behind. */
  #decodeLoad = 0;
  #ticksSeen = 0;

  constructor(options: CapacityOptions) {
    this.framePeriodSeconds = options.framePeriodSeconds;
    this.target = options.target ?? DEFAULT_REAL_TIME_TARGET;
    this.#prior = options.prior ?? DEFAULT_CAPACITY_PRIOR;
    this.#decay = 0.5 ** (1 / (options.halfLifeTicks ?? DEFAULT_HALF_LIFE_TICKS));
    this.#fit = { ...this.#prior };
  }

  /** A tick that stepped `streams` streams (and prefilled none) took `seconds`, start to next start. */
  observeTick(streams: number, seconds: number): void {
    if (!(streams > 0) || !(seconds >= 0) || !Number.isFinite(seconds)) return;
    const decay = this.#decay;
    this.#w = this.#w * decay + 1;
    this.#x = this.#x * decay + streams;
    this.#y = this.#y * decay + seconds;
    this.#xx = this.#xx * decay + streams * streams;
    this.#xy = this.#xy * decay + streams * seconds;
    this.#ticksSeen++;
    this.#fit = this.#solve();
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

  /**
   * Least squares over the decayed sums, each coefficient pulled toward the prior with PRIOR_WEIGHT ticks'
   * worth (as if the prior had been measured at one and at eight streams); the slope is kept positive.
   */
  #solve(): CapacityPrior {
    const prior = this.#prior;
    const points = [1, 8];
    let [w, x, y, xx, xy] = [this.#w, this.#x, this.#y, this.#xx, this.#xy];
    for (const streams of points) {
      const seconds = prior.fixedSeconds + prior.perStreamSeconds * streams;
      const weight = PRIOR_WEIGHT / points.length;
      w += weight;
      x += weight * streams;
      y += weight * seconds;
      xx += weight * streams * streams;
      xy += weight * streams * seconds;
    }
    const determinant = w * xx - x * x;
    let perStreamSeconds = determinant > 0 ? (w * xy - x * y) / determinant : prior.perStreamSeconds;
    const floor = prior.perStreamSeconds / 100;
    if (!(perStreamSeconds > floor)) perStreamSeconds = floor;
    const fixedSeconds = Math.max(0, (y - perStreamSeconds * x) / w);
    return { fixedSeconds, perStreamSeconds };
  }
}
