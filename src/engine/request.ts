/**
 * One request's life in the engine: an ordered status (so "finished" is one comparison), the one table from
 * finished states to finish reasons (and from those to how a stream ended), and the audio the request has
 * made and its consumer has not yet taken.
 */
import type { StreamOutcome } from "../metrics.ts";
import type { AudioChunk, FinishReason, RequestId, RequestWork, SynthesisJob } from "../models/contract.ts";

/** Ordered: every status from FINISHED_STOPPED on is final. */
export enum RequestStatus {
  /** Admitted, waiting for a running place. */
  WAITING = 0,
  /** Running: prefill work (voice, text chunk) owed or in progress. */
  PREFILLING = 1,
  /** Running: stepping and decoding. */
  RUNNING = 2,
  /** Running, but its consumer is behind: it gives up its turns, not its state, until the consumer drains. */
  PAUSED = 3,
  FINISHED_STOPPED = 4,
  FINISHED_LENGTH_CAPPED = 5,
  FINISHED_ABORTED = 6,
  FINISHED_ERROR = 7,
}

export function isFinished(status: RequestStatus): boolean {
  return status >= RequestStatus.FINISHED_STOPPED;
}

/** The one map from final states to finish reasons; metrics, usage, logs and the SSE/WebSocket done events derive from it. */
export const FINISH_REASONS: Readonly<Record<FinishedStatus, FinishReason>> = Object.freeze({
  [RequestStatus.FINISHED_STOPPED]: "stop",
  [RequestStatus.FINISHED_LENGTH_CAPPED]: "length",
  [RequestStatus.FINISHED_ABORTED]: "abort",
  [RequestStatus.FINISHED_ERROR]: "error",
});

export type FinishedStatus = RequestStatus.FINISHED_STOPPED | RequestStatus.FINISHED_LENGTH_CAPPED | RequestStatus.FINISHED_ABORTED | RequestStatus.FINISHED_ERROR;

export const FINISHED_STATUS_OF: Readonly<Record<FinishReason, FinishedStatus>> = Object.freeze({
  stop: RequestStatus.FINISHED_STOPPED,
  length: RequestStatus.FINISHED_LENGTH_CAPPED,
  abort: RequestStatus.FINISHED_ABORTED,
  error: RequestStatus.FINISHED_ERROR,
});

/**
 * How a stream ended, as the metrics tell it, for each way its generation can end: the speech ending by
 * itself or cut by a frame cap is a stream completed; "abort" is the client leaving, its reader letting go,
 * or the shutdown's grace running out.
 */
export const STREAM_OUTCOMES: Readonly<Record<FinishReason, StreamOutcome>> = Object.freeze({
  stop: "completed",
  length: "completed",
  abort: "aborted",
  error: "failed",
});

/**
 * Longest audio one request may generate, from its input length: 10 s plus 1 s per character. Speech runs at
 * about 15 characters a second and the slowest text (digits, symbols read as words) at about 2, so this
 * never cuts speech short; it ends a generation whose end of speech never comes. Every front end's jobs
 * take it as their frame cap (the speech service's and the page's).
 */
export function maxFramesForInput(inputChars: number, framesPerSecond: number): number {
  return Math.ceil(framesPerSecond * (10 + inputChars));
}

/** Prefill cost assumed for a request the model has not seen yet (its voice and first chunk): about one text chunk. */
export const NEW_REQUEST_PREFILL_POSITIONS = 64;

/** What a request the runner has not seen yet needs: its first prefill unit. */
export const NEW_REQUEST_WORK: Readonly<RequestWork> = Object.freeze({ prefillPositions: NEW_REQUEST_PREFILL_POSITIONS, canStep: false, decodeFrames: 0 });

export class EngineRequest {
  status = RequestStatus.WAITING;
  /** Whether the runner has made the request's state (it was in a plan's newRequests). */
  known = false;
  /** A decode plan holding this request has not settled yet. */
  decoding = false;
  error: Error | undefined;
  /** Frames handed to the consumer's queue (the cap `job.maxNewTokens` applies to these). */
  framesMade = 0;
  /** Audio made and not yet taken by the consumer. */
  readonly queue: AudioChunk[] = [];
  queuedSeconds = 0;
  /** Seconds of audio the consumer has taken, and when it took its first (performance.now() ms). */
  takenSeconds = 0;
  firstTakenAtMs: number | undefined;
  /** When the first audio was made (for time to first audio). */
  firstAudioAtMs: number | undefined;
  /** When it got a running place (performance.now() ms): its running time feeds Retry-After. */
  admittedAtMs: number | undefined;
  /** Seconds of audio queued before the consumer may take the first (set at admission, by load). */
  firstAudioHoldSeconds = 0;
  /** Requests starting (running, no audio taken yet) when it got its place, itself included. */
  startersAtAdmission = 1;

  /** Removes the request's listener from its job's signal. */
  detach: () => void = () => {};

  constructor(
    readonly id: RequestId,
    readonly job: SynthesisJob,
    readonly arrivedAtMs: number,
  ) {}

  get finishReason(): FinishReason | undefined {
    return isFinished(this.status) ? FINISH_REASONS[this.status as FinishedStatus] : undefined;
  }

  /**
   * How far ahead of its listener the request is, in seconds: audio taken minus wall time since the first
   * was taken. The smallest goes first; one that has had no audio yet is the most urgent of all.
   */
  slackSeconds(nowMs: number): number {
    if (this.firstTakenAtMs === undefined) return -Infinity;
    return this.takenSeconds - (nowMs - this.firstTakenAtMs) / 1000;
  }
}
