/**
 * The Mimi decoder behind a worker thread (worker.ts), with the same decode contract as MimiDecoder.
 * Its decodes leave the JS thread, so generation overlaps them with sampling (`concurrent`): on the 2-core
 * machine one core runs the FlowLM steps and the other decodes.
 *
 * States stay in the worker; the main thread holds handles. A handle given up with `reuseState` is the one
 * returned again (the worker updates that state in place); any other decode gets a new handle and state.
 * A handle's worker state is freed by `release` or, failing that, when the handle is garbage-collected.
 */
import { Worker } from "node:worker_threads";
import type { Logger } from "../../../log/logger.ts";
import type { PocketBundle, StateEntry } from "../bundle/pocket-bundle.ts";
import type { DecoderWorkerReply, DecoderWorkerRequest } from "./protocol.ts";
import { configuredOnnxThreads, type CpuProvider } from "../../../onnx/runtime.ts";
import type { MimiDecoderConfig } from "../stages/mimi-decoder.ts";
import type { StepOptions } from "../stages/state.ts";

/** A decoder state held by the worker. */
export interface WorkerDecoderState {
  readonly id: number;
  /** Not yet decoded from: the worker makes the state on first use. */
  fresh: boolean;
  /** Latent frames decoded since the state was fresh. */
  frames: number;
}

export interface DecoderWorkerOptions {
  path: string;
  manifest: readonly StateEntry[];
  config: MimiDecoderConfig;
  provider: CpuProvider;
  /** Intra-op threads of the worker's session (default 1). */
  threads?: number;
  /** How long the worker may take to open its session. */
  startTimeoutMs?: number;
  /** Where the worker's log messages go. */
  logger: Logger;
  /** Starts the worker; default: worker.ts as a worker thread. A page starts its own (browser/page/engine-worker.ts). */
  spawn?: SpawnDecoderWorker;
}

/** Starts one decoder worker, running worker.ts's code. */
export type SpawnDecoderWorker = () => Worker;

function logFromWorker(logger: Logger, reply: Extract<DecoderWorkerReply, { kind: "log" }>): void {
  logger[reply.level](reply.message);
}

/** How long a closing worker may take to finish its run and exit before it is terminated. */
const CLOSE_GRACE_MS = 10_000;

export class WorkerMimiDecoder {
  readonly concurrent = true;
  #nextStateId = 1;
  #nextRequestId = 1;
  readonly #pending = new Map<number, { resolve: (audio: Float32Array) => void; reject: (error: Error) => void }>();
  #failure: Error | undefined;
  #closed = false;
  readonly #released = new FinalizationRegistry<number>((stateId) => this.#post({ kind: "release", stateId }));

  private constructor(
    private readonly worker: Worker,
    readonly config: MimiDecoderConfig,
    logger: Logger,
  ) {
    worker.on("message", (reply: DecoderWorkerReply) => {
      if (reply.kind === "log") return logFromWorker(logger, reply);
      if (reply.kind !== "decoded" && reply.kind !== "error") return;
      const pending = this.#pending.get(reply.requestId);
      this.#pending.delete(reply.requestId);
      if (this.#pending.size === 0) worker.unref();
      if (reply.kind === "decoded") pending?.resolve(reply.audio);
      else pending?.reject(new Error(`Mimi decoder: ${reply.message}`));
    });
    worker.on("error", (error: Error) => this.#fail(new Error(`the Mimi decoder worker stopped: ${error.message}`)));
    // A reply that cannot be deserialised would otherwise leave its decode waiting forever.
    worker.on("messageerror", (error: Error) => this.#fail(new Error(`a Mimi decoder worker reply could not be read: ${error.message}`)));
    worker.on("exit", (code: number) => this.#fail(new Error(`the Mimi decoder worker exited (code ${code})`)));
    // An idle decoder must not keep the process alive, but one with decodes pending must: a worker that is
    // not referenced does not wake the event loop for its replies.
    worker.unref();
  }

  /** Starts the worker and opens the decoder in it; rejects if it cannot (the caller decodes in-process). */
  static async start(options: DecoderWorkerOptions): Promise<WorkerMimiDecoder> {
    // node:worker_threads rather than the global Worker: onnxruntime-web replaces globalThis.Worker with
    // worker_threads' class once it initialises in a process (a different event API), so the global one
    // cannot be relied on; worker_threads behaves the same under Bun and Deno.
    const worker = options.spawn ? options.spawn() : new Worker(new URL("./worker.ts", import.meta.url));
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("the Mimi decoder worker did not start in time")), options.startTimeoutMs ?? 60_000);
        const untilReady = (reply: DecoderWorkerReply) => {
          if (reply.kind === "log") return logFromWorker(options.logger, reply);
          worker.off("message", untilReady);
          clearTimeout(timer);
          if (reply.kind === "ready") resolve();
          else reject(new Error(reply.kind === "failed" ? reply.message : `unexpected ${reply.kind} before ready`));
        };
        worker.on("message", untilReady);
        worker.once("error", (error: Error) => {
          clearTimeout(timer);
          reject(error);
        });
        const open: DecoderWorkerRequest = { kind: "open", path: options.path, manifest: [...options.manifest], config: options.config, provider: options.provider, threads: options.threads ?? 1 };
        worker.postMessage(open);
      });
    } catch (error) {
      await worker.terminate();
      throw new Error(`the Mimi decoder worker could not start: ${(error as Error).message}`, { cause: error });
    }
    return new WorkerMimiDecoder(worker, options.config, options.logger);
  }

  emptyState(): WorkerDecoderState {
    return this.#handle();
  }

  async decode(state: WorkerDecoderState, latents: Float32Array, options: StepOptions = {}): Promise<{ state: WorkerDecoderState; audio: Float32Array }> {
    const frames = latents.length / this.config.latentDim;
    if (!Number.isInteger(frames) || frames < 1) throw new Error(`Mimi decoder input has ${latents.length} values, not a positive multiple of ${this.config.latentDim}`);
    if (this.#failure) throw this.#failure;
    const next = options.reuseState ? state : this.#handle();
    const requestId = this.#nextRequestId++;
    const audio = new Promise<Float32Array>((resolve, reject) => this.#pending.set(requestId, { resolve, reject }));
    if (this.#pending.size === 1) this.worker.ref();
    // A copy is sent: the caller keeps its latents.
    this.#post({ kind: "decode", requestId, stateId: state.id, fresh: state.fresh, nextStateId: next.id, latents: latents.slice() });
    state.fresh = false;
    const samples = await audio;
    if (samples.length !== frames * this.config.samplesPerFrame) throw new Error(`mimi_decoder returned ${samples.length} samples for ${frames} latents`);
    if (options.reuseState) {
      state.frames += frames;
      return { state, audio: samples };
    }
    next.fresh = false;
    next.frames = state.frames + frames;
    return { state: next, audio: samples };
  }

  /** Frees a state's worker memory now rather than when its handle is collected. */
  release(state: WorkerDecoderState): void {
    this.#released.unregister(state);
    this.#post({ kind: "release", stateId: state.id });
  }

  /** Whether the worker has stopped (crashed, exited or closed): every decode now fails. */
  get failed(): boolean {
    return this.#failure !== undefined;
  }

  /**
   * Pending decodes are rejected now; the worker finishes the run it is in (if any), releases its session
   * and exits. It is terminated only if it has not exited by CLOSE_GRACE_MS (a run that hangs): terminating
   * it mid-run can abort the process (worker.ts, close).
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#fail(new Error("the Mimi decoder worker was closed"));
    this.worker.postMessage({ kind: "close" } satisfies DecoderWorkerRequest);
    const stuck = setTimeout(() => void this.worker.terminate(), CLOSE_GRACE_MS);
    stuck.unref?.();
    this.worker.once("exit", () => clearTimeout(stuck));
  }

  #handle(): WorkerDecoderState {
    const state = { id: this.#nextStateId++, fresh: true, frames: 0 };
    this.#released.register(state, state.id, state);
    return state;
  }

  #post(message: DecoderWorkerRequest): void {
    if (this.#failure) return;
    this.worker.postMessage(message);
  }

  #fail(error: Error): void {
    this.#failure ??= error;
    for (const pending of this.#pending.values()) pending.reject(this.#failure);
    this.#pending.clear();
  }
}

/**
 * The bundle's Mimi decoder in a worker thread on onnxruntime-node, or null where that does not pay or
 * cannot start (the reason logged as a warning): generation then decodes in-process.
 */
export async function startDecoderWorker(bundle: PocketBundle, provider: CpuProvider, logger: Logger, spawn?: SpawnDecoderWorker): Promise<WorkerMimiDecoder | null> {
  // Measured (bench/pocket-providers.ts, 2 cores): with onnxruntime-node the worker takes RTF from 0.28 to
  // 0.18; with onnxruntime-web under Bun the worker's wasm decoder ran at ~55 ms/frame and first audio took
  // ~3 s, so onnxruntime-web decodes in-process there. A page that starts its own worker (`spawn`) is
  // another runtime: it decides (browser/page/engine-worker.ts, measured with bench/browser-engine.ts).
  if (provider !== "onnxruntime-node" && !spawn) return null;
  const { latentDim, samplesPerFrame } = bundle.dims;
  try {
    return await WorkerMimiDecoder.start({ path: bundle.graphs.mimiDecoder.path, manifest: bundle.mimiStateManifest, config: { latentDim, samplesPerFrame }, provider, threads: configuredOnnxThreads(), logger, ...(spawn ? { spawn } : {}) });
  } catch (error) {
    logger.warn("decoding in the main thread: the Mimi decoder worker could not start", { error: (error as Error).message });
    return null;
  }
}

/** A pool's state: a worker's own state, tagged with the worker that holds it. */
export interface PooledDecoderState extends WorkerDecoderState {
  readonly worker: number;
}

/**
 * Several decoder workers behind one decode contract: each state lives on one worker (the one holding the
 * fewest when it was made) and every decode of it goes there, so different streams' decodes run at the
 * same time on different cores. A stopped worker fails only the streams it held; new states go to the
 * others, and the pool counts as failed once every worker has stopped.
 */
export class WorkerMimiDecoderPool {
  readonly concurrent = true;
  readonly config: MimiDecoderConfig;
  readonly #live: number[];

  constructor(private readonly workers: readonly WorkerMimiDecoder[]) {
    if (workers.length === 0) throw new Error("a decoder pool needs a worker");
    this.config = workers[0]!.config;
    this.#live = workers.map(() => 0);
  }

  get size(): number {
    return this.workers.length;
  }

  emptyState(): PooledDecoderState {
    let chosen = -1;
    this.workers.forEach((worker, index) => {
      if (!worker.failed && (chosen < 0 || this.#live[index]! < this.#live[chosen]!)) chosen = index;
    });
    if (chosen < 0) chosen = 0;
    this.#live[chosen]!++;
    return Object.assign(this.workers[chosen]!.emptyState(), { worker: chosen });
  }

  async decode(state: PooledDecoderState, latents: Float32Array, options: StepOptions = {}): Promise<{ state: PooledDecoderState; audio: Float32Array }> {
    const decoded = await this.workers[state.worker]!.decode(state, latents, options);
    if (decoded.state === state) return { state, audio: decoded.audio };
    this.#live[state.worker]!++;
    return { state: Object.assign(decoded.state, { worker: state.worker }), audio: decoded.audio };
  }

  release(state: PooledDecoderState): void {
    this.#live[state.worker]!--;
    this.workers[state.worker]!.release(state);
  }

  get failed(): boolean {
    return this.workers.every((worker) => worker.failed);
  }

  close(): void {
    for (const worker of this.workers) worker.close();
  }
}

/** `count` decoder workers in a pool, or null where none starts (see startDecoderWorker). */
export async function startDecoderWorkers(bundle: PocketBundle, provider: CpuProvider, logger: Logger, count: number, spawn?: SpawnDecoderWorker): Promise<WorkerMimiDecoderPool | null> {
  // One after another: each start's transient (a runtime and a session being made) is over before the next.
  const started: (WorkerMimiDecoder | null)[] = [];
  for (let index = 0; index < count; index++) started.push(await startDecoderWorker(bundle, provider, logger, spawn));
  const workers = started.filter((worker): worker is WorkerMimiDecoder => worker !== null);
  if (workers.length < count && workers.length > 0) logger.warn(`${count - workers.length} of ${count} Mimi decoder workers could not start`);
  return workers.length > 0 ? new WorkerMimiDecoderPool(workers) : null;
}
