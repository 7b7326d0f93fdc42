/**
 * Generation outside the engine (conformance, benches, tests): a caller's generations run on a PocketRunner
 * through the plans the engine makes (src/engine/core.ts), without its admission, pacing and metrics. Each
 * tick is one plan of a prefill unit or an AR step for every request; the decodes that made due then go out
 * as a second plan, left in flight while the next tick samples where the decoder leaves the JS thread
 * (`decodesOverlap`), awaited otherwise.
 *
 * The loop rule, the frame caps, the seed default and the decode schedule are the runner's
 * (request-state.ts): what the golden cases check through this driver is what the server runs.
 */
import { NO_WORK, type RequestId, type StepPlan } from "../contract.ts";
import type { Generation } from "./request-state.ts";
import { generationJob, type PocketRunner } from "./runner.ts";

export interface GenerationRequest extends Generation {
  /** Once aborted, no more of its frames are yielded and no more of its steps run. */
  signal?: AbortSignal;
}

export interface GeneratedFrame {
  /** Raw float PCM at the model rate, unclamped (docs/pocket-tts.md §6.17): [samplesPerFrame] = 1920. */
  samples: Float32Array;
  chunkIndex: number;
  /** Index of this frame within its chunk. */
  frameIndex: number;
}

export interface DriveOptions {
  /**
   * Hears what each plan cost, as the engine's observer does: wall seconds per runner stage (prefill, flow_lm,
   * flow_head, decode) and the rows of each model call.
   */
  onTick?: (stageSeconds: Readonly<Record<string, number>>, batchSizes: Readonly<Record<string, number[]>>) => void;
}

/** Streams the audio of one generation, frame by frame as each is decoded. */
export async function* generateSpeech(runner: PocketRunner, request: GenerationRequest, options: DriveOptions = {}): AsyncGenerator<GeneratedFrame, void, undefined> {
  for await (const { frame } of generateSpeechTogether(runner, [request], options)) yield frame;
}

/**
 * Runs `requests` together on `runner`: every tick's work for all of them is one plan, so their AR steps
 * (and on WGSL their equal-sized decodes) share model calls. Yields each frame as it is decoded, with the
 * index of its request; one request's frames come in order. The first failure ends the run with its error.
 * The runner holds no other requests meanwhile: it takes one plan of prefills and steps at a time.
 */
export async function* generateSpeechTogether(runner: PocketRunner, requests: readonly GenerationRequest[], options: DriveOptions = {}): AsyncGenerator<{ request: number; frame: GeneratedFrame }, void, undefined> {
  // A request's id is its index.
  const ids: RequestId[] = requests.map((_, index) => index);
  const queues = requests.map((): GeneratedFrame[] => []);
  /** Requests the runner still works for: not finished, not aborted. */
  const working = new Set(ids);
  const decoding = new Set<RequestId>();
  const inFlight = new Set<Promise<void>>();
  let newRequests: StepPlan["newRequests"] = requests.map((generation, requestId) => ({ requestId, job: generationJob(generation) }));
  let ended: RequestId[] = [];
  let failure: { error: unknown } | undefined;

  const execute = async (plan: Partial<StepPlan>): Promise<void> => {
    const finishedRequestIds = ended;
    ended = [];
    const output = await runner.execute({ newRequests: [], prefills: [], steps: [], decodes: [], finishedRequestIds, ...plan });
    options.onTick?.(output.stageSeconds, output.batchSizes);
    for (const { requestId, audio, error, finishReason } of output.results) {
      if (!working.has(requestId)) continue;
      if (error) failure ??= { error };
      for (const { samples, chunkIndex, frameIndex } of audio) queues[requestId]!.push({ samples, chunkIndex, frameIndex });
      if (finishReason) end(requestId);
    }
  };
  const end = (id: RequestId) => {
    working.delete(id);
    ended.push(id);
  };
  const dropIfAborted = (id: RequestId): boolean => {
    if (!requests[id]!.signal?.aborted) return false;
    queues[id]!.length = 0;
    if (working.has(id)) end(id);
    return true;
  };

  try {
    for (;;) {
      if (failure) throw failure.error;
      for (const id of ids) dropIfAborted(id);
      let worked = false;
      if (working.size > 0) {
        const prefills: RequestId[] = [];
        const steps: RequestId[] = [];
        const firstTick = newRequests.length > 0;
        for (const id of working) {
          // Requests the runner has not seen yet need their first prefill unit, as the engine plans them.
          const work = firstTick ? undefined : (runner.nextWork(id) ?? NO_WORK);
          if (!work || work.prefillPositions > 0) prefills.push(id);
          else if (work.canStep) steps.push(id);
        }
        if (prefills.length + steps.length > 0) {
          worked = true;
          await execute({ newRequests, prefills, steps });
          newRequests = [];
        }
        // Before this tick's frames are handed out, so the next decode runs while the caller takes them.
        const decodes: StepPlan["decodes"][number][] = [];
        for (const id of working) {
          const frames = decoding.has(id) ? 0 : (runner.nextWork(id)?.decodeFrames ?? 0);
          if (frames > 0) decodes.push({ requestId: id, frames });
        }
        if (decodes.length > 0) {
          worked = true;
          for (const { requestId } of decodes) decoding.add(requestId);
          const settled: Promise<void> = execute({ decodes })
            .catch((error: unknown) => void (failure ??= { error }))
            .finally(() => {
              for (const { requestId } of decodes) decoding.delete(requestId);
              inFlight.delete(settled);
            });
          inFlight.add(settled);
          if (!runner.decodesOverlap) await settled;
        }
      }
      if (failure) throw failure.error;
      for (const id of ids) {
        while (!dropIfAborted(id) && queues[id]!.length > 0) yield { request: id, frame: queues[id]!.shift()! };
      }
      if (working.size === 0) return;
      if (!worked) {
        if (inFlight.size === 0) throw new Error(`Pocket TTS generation stalled: requests ${[...working].join(", ")} have nothing to prefill, step or decode`);
        await Promise.race(inFlight);
      }
    }
  } finally {
    // No decode outlives the call (the caller may close the sessions next); then the runner frees every
    // state, once it has taken the requests.
    await Promise.allSettled([...inFlight]);
    if (newRequests.length === 0) await runner.execute({ newRequests: [], prefills: [], steps: [], decodes: [], finishedRequestIds: ids });
  }
}
