/**
 * The Mimi encoder graph behind a worker thread (worker.ts): `run` has the contract of one in-process run of
 * the graph, and leaves the JS thread, so a voice encode never stalls the engine's ticks or the server.
 */
import { Worker } from "node:worker_threads";
import type { CpuProvider } from "../../../onnx/runtime.ts";
import type { Float32Tensor } from "../stages/state.ts";
import type { EncoderWorkerReply, EncoderWorkerRequest } from "./protocol.ts";

/** How long a closing worker may take to finish its run and exit before it is terminated. */
const CLOSE_GRACE_MS = 10_000;
/**
 * An encoder worker with nothing to encode for this long is closed, and started again by the next encode.
 * Voices are cloned rarely next to how often they speak (an uploaded voice is encoded once, then cached),
 * and an idle worker holds the encoder's weights and the thread's heap: ~45 MiB of the real-size bundle's
 * idle server. A start costs ~0.2 s before that next encode.
 */
export const ENCODER_WORKER_IDLE_MS = 30_000;

export class WorkerVoiceEncoderGraph {
  #nextRequestId = 1;
  readonly #pending = new Map<number, { resolve: (tensor: Float32Tensor) => void; reject: (error: Error) => void }>();
  #failure: Error | undefined;

  private constructor(private readonly worker: Worker) {
    worker.on("message", (reply: EncoderWorkerReply) => {
      if (reply.kind !== "encoded" && reply.kind !== "error") return;
      const pending = this.#pending.get(reply.requestId);
      this.#pending.delete(reply.requestId);
      if (this.#pending.size === 0) worker.unref();
      if (reply.kind === "encoded") pending?.resolve({ data: reply.data, dims: reply.dims });
      else pending?.reject(new Error(`Mimi encoder: ${reply.message}`));
    });
    worker.on("error", (error: Error) => this.#fail(new Error(`the Mimi encoder worker stopped: ${error.message}`)));
    worker.on("messageerror", (error: Error) => this.#fail(new Error(`a Mimi encoder worker reply could not be read: ${error.message}`)));
    worker.on("exit", (code: number) => this.#fail(new Error(`the Mimi encoder worker exited (code ${code})`)));
    // An idle encoder must not keep the process alive; one with runs pending must (see decoder/worker-client.ts).
    worker.unref();
  }

  /** Starts the worker and opens the graph in it; rejects if it cannot (the caller encodes in-process). */
  static async start(options: { path: string; provider: CpuProvider; threads?: number; startTimeoutMs?: number }): Promise<WorkerVoiceEncoderGraph> {
    const worker = new Worker(new URL("./worker.ts", import.meta.url));
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("the Mimi encoder worker did not start in time")), options.startTimeoutMs ?? 60_000);
        worker.once("message", (reply: EncoderWorkerReply) => {
          clearTimeout(timer);
          if (reply.kind === "ready") resolve();
          else reject(new Error(reply.kind === "failed" ? reply.message : `unexpected ${reply.kind} before ready`));
        });
        worker.once("error", (error: Error) => {
          clearTimeout(timer);
          reject(error);
        });
        const open: EncoderWorkerRequest = { kind: "open", path: options.path, provider: options.provider, threads: options.threads ?? 1 };
        worker.postMessage(open);
      });
    } catch (error) {
      await worker.terminate();
      throw new Error(`the Mimi encoder worker could not start: ${(error as Error).message}`, { cause: error });
    }
    return new WorkerVoiceEncoderGraph(worker);
  }

  get failed(): boolean {
    return this.#failure !== undefined;
  }

  /** One run of the graph: audio [1, 1, N] → latents [1, T, D]. The audio is copied; the caller keeps it. */
  run(audio: Float32Array): Promise<Float32Tensor> {
    if (this.#failure) return Promise.reject(this.#failure);
    const requestId = this.#nextRequestId++;
    const result = new Promise<Float32Tensor>((resolve, reject) => this.#pending.set(requestId, { resolve, reject }));
    if (this.#pending.size === 1) this.worker.ref();
    const copy = audio.slice();
    this.worker.postMessage({ kind: "encode", requestId, audio: copy } satisfies EncoderWorkerRequest, [copy.buffer as ArrayBuffer]);
    return result;
  }

  /** Lets the run in progress finish, then the worker releases its session and exits. */
  async close(): Promise<void> {
    this.#fail(new Error("the Mimi encoder worker is closed"));
    const exited = new Promise<void>((resolve) => this.worker.once("exit", () => resolve()));
    this.worker.postMessage({ kind: "close" } satisfies EncoderWorkerRequest);
    const timer = setTimeout(() => void this.worker.terminate(), CLOSE_GRACE_MS);
    await exited;
    clearTimeout(timer);
  }

  #fail(error: Error): void {
    this.#failure ??= error;
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
  }
}

/**
 * The encoder worker as encodes need it: started by the first run, closed after `idleMs` without one, started
 * again by the next. `failed` once a start has failed (the caller then encodes in-process); a worker that
 * stops mid-run fails that run, and the next run starts a new one.
 */
export class OnDemandVoiceEncoderWorker {
  #worker: Promise<WorkerVoiceEncoderGraph> | undefined;
  #startFailure: Error | undefined;
  #running = 0;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  /** Workers started so far (the first encode's, and one after each idle close). */
  starts = 0;

  constructor(
    private readonly options: { path: string; provider: CpuProvider; threads?: number; idleMs?: number },
    private readonly startWorker: typeof WorkerVoiceEncoderGraph.start = (startOptions) => WorkerVoiceEncoderGraph.start(startOptions),
  ) {}

  get failed(): boolean {
    return this.#startFailure !== undefined || this.#closed;
  }

  /** Whether a worker is running or starting now. */
  get running(): boolean {
    return this.#worker !== undefined;
  }

  async run(audio: Float32Array): Promise<Float32Tensor> {
    if (this.#closed) throw new Error("the Mimi encoder worker is closed");
    if (this.#startFailure) throw this.#startFailure;
    clearTimeout(this.#idleTimer);
    this.#running++;
    try {
      const worker = await this.#current();
      return await worker.run(audio);
    } finally {
      this.#running--;
      if (this.#running === 0) this.#closeWhenIdle();
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#idleTimer);
    await this.#stop();
  }

  #current(): Promise<WorkerVoiceEncoderGraph> {
    const current = this.#worker;
    if (current) {
      // A worker that stopped is replaced; its failure was the run's that saw it.
      return current.then((worker) => {
        if (!worker.failed) return worker;
        if (this.#worker === current) this.#worker = undefined;
        return this.#current();
      });
    }
    this.starts++;
    const started = this.startWorker(this.options);
    this.#worker = started;
    started.catch((error: Error) => {
      this.#startFailure ??= error;
      if (this.#worker === started) this.#worker = undefined;
    });
    return started;
  }

  #closeWhenIdle(): void {
    if (this.#closed) return;
    this.#idleTimer = setTimeout(() => void this.#stop(), this.options.idleMs ?? ENCODER_WORKER_IDLE_MS);
    this.#idleTimer.unref?.();
  }

  async #stop(): Promise<void> {
    const worker = this.#worker;
    this.#worker = undefined;
    const started = await worker?.catch(() => undefined);
    await started?.close();
  }
}
