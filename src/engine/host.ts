/**
 * Owns the model's lifecycle: the server listens at once and reports `loading` on /health until
 * the explicit load finishes, then `ready`, or `failed` with the reason if the load threw. Once the model
 * is loaded, its engine (core.ts) is made around the model's runner: from then on all model execution is
 * the engine's.
 */
import type { SpeechModel } from "../models/contract.ts";
import { DEFAULT_FIRST_AUDIO_BUDGET_SECONDS, DEFAULT_MAX_QUEUE, DEFAULT_MAX_QUEUE_WAIT_SECONDS, DEFAULT_MAX_STREAMS, type Config } from "../config.ts";
import { Engine, type EngineOptions } from "./core.ts";
import { residentBytes } from "../system/memory-limit.ts";
import { collectGarbage } from "../runtime/detect.ts";
import { releaseFreeMemory } from "../system/allocator.ts";

export type ModelState = "loading" | "ready" | "failed";

export const DEFAULT_ENGINE_OPTIONS: Readonly<EngineOptions> = Object.freeze({
  maxStreams: DEFAULT_MAX_STREAMS,
  maxQueue: DEFAULT_MAX_QUEUE,
  maxQueueWaitSeconds: DEFAULT_MAX_QUEUE_WAIT_SECONDS,
  firstAudioBudgetSeconds: DEFAULT_FIRST_AUDIO_BUDGET_SECONDS,
});

/**
 * What admitting one more request is planned to cost in resident memory: its model state (19.9 MiB a
 * running stream at real size, bench/load.ts at 16 streams) and its decode buffers, rounded up.
 */
const PLANNED_BYTES_PER_REQUEST = 32 * 1024 ** 2;
/** The share of --memory-budget admission plans to fill: the rest is for runs' transient buffers. */
const MEMORY_BUDGET_USE = 0.9;
/**
 * An engine with nothing to do gives its streams' memory back this long after the last one ended: the JS
 * heap collected, then the allocator's free pages returned. Without it the idle server stayed near its
 * last load's high-water mark (real-size int8 bundle, after one stream: 606 → 553 MiB with the trim alone).
 * Not at once: the trim hands back pages the next stream then faults in again, and 1 s after the last
 * stream cost the next one's first audio ~30 ms (one stream at a time with pauses, 2 cores: 100 → 129 ms).
 * Five seconds spares a client that speaks sentence by sentence or turn by turn.
 */
export const IDLE_RELEASE_DELAY_MS = 5000;

function releaseMemoryNow(): void {
  collectGarbage();
  void releaseFreeMemory();
}

/** A callback that, once the calls stop for `delayMs`, collects and returns free memory (`release`). */
export function idleMemoryRelease(delayMs = IDLE_RELEASE_DELAY_MS, release: () => void = releaseMemoryNow): () => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(release, delayMs);
    (timer as { unref?: () => void }).unref?.();
  };
}

/** The engine options a configuration sets (--max-streams, --max-queue, --max-queue-wait, --first-audio-budget, --memory-budget). */
export function engineOptionsOf(config: Pick<Config, "maxStreams" | "maxQueue"> & Partial<Pick<Config, "memoryBudget" | "maxQueueWait" | "firstAudioBudget">>): EngineOptions {
  const budget = config.memoryBudget ?? null;
  return {
    maxStreams: config.maxStreams,
    maxQueue: config.maxQueue,
    ...(config.maxQueueWait === undefined ? {} : { maxQueueWaitSeconds: config.maxQueueWait }),
    ...(config.firstAudioBudget === undefined ? {} : { firstAudioBudgetSeconds: config.firstAudioBudget }),
    onIdle: idleMemoryRelease(),
    ...(budget === null ? {} : { memory: { budgetBytes: budget * MEMORY_BUDGET_USE, plannedBytesPerRequest: PLANNED_BYTES_PER_REQUEST, residentBytes } }),
  };
}

export class ModelHost {
  #state: ModelState = "loading";
  #model: SpeechModel | undefined;
  #engine: Engine | undefined;
  #failure: Error | undefined;
  readonly loaded: Promise<void>;

  private constructor(load: Promise<SpeechModel>, engineOptions: EngineOptions) {
    this.loaded = load.then(
      (model) => {
        this.#model = model;
        this.#engine = new Engine(model.runner, model.capabilities, engineOptions);
        this.#state = "ready";
      },
      (error: unknown) => {
        this.#failure = error instanceof Error ? error : new Error(String(error));
        this.#state = "failed";
      },
    );
  }

  static load(loader: () => Promise<SpeechModel>, engineOptions: EngineOptions = DEFAULT_ENGINE_OPTIONS): ModelHost {
    return new ModelHost(Promise.resolve().then(loader), engineOptions);
  }

  get state(): ModelState {
    return this.#state;
  }

  get failure(): Error | undefined {
    return this.#failure;
  }

  /** The model once ready; undefined while loading or after a failed load. */
  get model(): SpeechModel | undefined {
    return this.#model;
  }

  /** The engine that runs the model, once ready. */
  get engine(): Engine | undefined {
    return this.#engine;
  }

  async close(): Promise<void> {
    await this.loaded;
    await this.#engine?.close();
    await this.#model?.close();
  }
}
