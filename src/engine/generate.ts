/**
 * The server's engine for callers that run a few jobs to their end outside any server: the conformance
 * harness, benches and tests. The engine plans their ticks as it plans the server's, with three limits set so
 * that what a tick holds depends on the jobs alone, never on the machine's speed or the reader's: every job
 * is admitted at once (no admission by measured real-time capacity, which times ticks by the wall clock),
 * every prefill unit due runs in the tick it is due, and no request pauses for a reader that is behind.
 */
import type { AudioChunk, ModelRunner, SynthesisJob } from "../models/contract.ts";
import { Engine, type EngineObserver } from "./core.ts";

/** What the engine needs of the model: its audio rate and its frame rate (ModelCapabilities). */
export interface ModelTiming {
  nativeSampleRateHz: number;
  framesPerSecond: number;
}

/** Hears what each plan cost: wall seconds per runner stage and the rows of each model call (EngineObserver.tick). */
export type TickListener = EngineObserver["tick"];

/** An engine around `runner` that runs `jobs` jobs at once with the limits above. */
export function engineForJobs(runner: ModelRunner, model: ModelTiming, jobs: number, onTick?: TickListener): Engine {
  const engine = new Engine(runner, model, { maxStreams: jobs, maxQueue: 0, prefillPositionsPerTick: Infinity, pauseAboveSeconds: Infinity, realTimeAdmission: false });
  if (onTick) engine.observer = { tick: onTick, finished: () => {}, rejected: () => {} };
  return engine;
}

/**
 * Streams the audio of one job, chunk by chunk as the engine makes it; nothing more once its signal has
 * aborted. The engine is closed before the stream ends, so no model call outlives it.
 */
export async function* generate(runner: ModelRunner, model: ModelTiming, job: SynthesisJob, onTick?: TickListener): AsyncGenerator<AudioChunk, void, undefined> {
  const engine = engineForJobs(runner, model, 1, onTick);
  try {
    for await (const chunk of await engine.submit(job)) {
      if (job.signal.aborted) return;
      yield chunk;
    }
  } finally {
    await engine.close();
  }
}

/**
 * Runs `jobs` together on one engine, so their AR steps (and the decodes a runner batches) share model calls,
 * and returns each job's audio. The first failure ends the run with its error, once the engine has closed.
 */
export async function generateTogether(runner: ModelRunner, model: ModelTiming, jobs: readonly SynthesisJob[], onTick?: TickListener): Promise<AudioChunk[][]> {
  const engine = engineForJobs(runner, model, jobs.length, onTick);
  try {
    const streams = await Promise.all(jobs.map((job) => engine.submit(job)));
    return await Promise.all(streams.map((stream) => Array.fromAsync(stream)));
  } finally {
    await engine.close();
  }
}
