/**
 * The main thread's side of the Flite worker (flite-worker.ts): one sentence in the worker at a time, the
 * rest waiting here in arrival order. Waiting here rather than in the worker's message queue is what lets
 * an aborted request's sentences be dropped before they run. A worker that dies fails its sentence and is
 * replaced for the next one.
 */
import { Worker } from "node:worker_threads";
import { awaitWorkerReady } from "../../lib/worker-ready.ts";
import type { FliteWorkerReply, FliteWorkerRequest } from "./flite-worker.ts";

interface Pending {
  args: string[];
  signal: AbortSignal;
  resolve: (wav: Uint8Array | undefined) => void;
  reject: (error: Error) => void;
}

const START_TIMEOUT_MS = 60_000;

async function startWorker(): Promise<Worker> {
  // node:worker_threads behaves the same under Bun and Deno (see models/pocket/decoder/worker-client.ts).
  const worker = new Worker(new URL("./flite-worker.ts", import.meta.url));
  await awaitWorkerReady(worker, "Flite", START_TIMEOUT_MS);
  worker.unref();
  return worker;
}

export class FliteClient {
  readonly #waiting: Pending[] = [];
  #inFlight: (Pending & { requestId: number }) | undefined;
  #worker: Worker | undefined;
  #starting: Promise<Worker> | undefined;
  #nextRequestId = 1;
  #closed = false;
  #failure: Error | undefined;

  private constructor(worker: Worker) {
    this.#adopt(worker);
  }

  /** Starts the worker and compiles Flite in it; rejects if it cannot. */
  static async start(): Promise<FliteClient> {
    return new FliteClient(await startWorker());
  }

  /**
   * Runs Flite with `args` (plus the output file). Resolves with the WAV it wrote, or with undefined when
   * `signal` aborted before the sentence started.
   */
  run(args: string[], signal: AbortSignal): Promise<Uint8Array | undefined> {
    if (this.#closed) return Promise.reject(new Error("classic engine is closed"));
    return new Promise((resolve, reject) => {
      this.#waiting.push({ args, signal, resolve, reject });
      this.#pump();
    });
  }

  /** Set when a worker that died could not be replaced: Flite can run nothing more in this process. */
  get failure(): Error | undefined {
    return this.#failure;
  }

  /**
   * Fails every sentence not yet answered, the one in the worker included (the worker it runs in is
   * terminated, so no reply will ever come), then stops the worker. A worker still starting is stopped when
   * it is ready, not waited for.
   */
  async close(): Promise<void> {
    this.#closed = true;
    const closed = () => new Error("classic engine is closed");
    for (const pending of this.#waiting.splice(0)) pending.reject(closed());
    this.#inFlight?.reject(closed());
    this.#inFlight = undefined;
    const worker = this.#worker;
    this.#worker = undefined;
    await worker?.terminate();
  }

  #adopt(worker: Worker): void {
    this.#worker = worker;
    worker.on("message", (reply: FliteWorkerReply) => {
      const current = this.#inFlight;
      if (!current || (reply.kind !== "synthesized" && reply.kind !== "error") || reply.requestId !== current.requestId) return;
      this.#inFlight = undefined;
      worker.unref();
      if (reply.kind === "synthesized") current.resolve(reply.wav);
      else current.reject(new Error(`flite: ${reply.message}`));
      this.#pump();
    });
    const lost = (why: string) => {
      if (this.#worker !== worker) return;
      this.#worker = undefined;
      const current = this.#inFlight;
      this.#inFlight = undefined;
      current?.reject(new Error(`the Flite worker stopped: ${why}`));
      this.#pump();
    };
    worker.on("error", (error: Error) => lost(error.message));
    worker.on("messageerror", (error: Error) => lost(`unreadable reply: ${error.message}`));
    worker.on("exit", (code: number) => lost(`exit code ${code}`));
  }

  #pump(): void {
    if (this.#inFlight || this.#closed) return;
    // Sentences of requests that went away while waiting are skipped, not synthesized.
    while (this.#waiting[0]?.signal.aborted) this.#waiting.shift()!.resolve(undefined);
    const next = this.#waiting[0];
    if (!next) return;
    const worker = this.#worker;
    if (!worker) {
      if (this.#starting) return;
      this.#starting = startWorker();
      this.#starting.then(
        (started) => {
          this.#starting = undefined;
          if (this.#closed) return void started.terminate();
          this.#adopt(started);
          this.#pump();
        },
        (error: Error) => {
          this.#starting = undefined;
          this.#failure = new Error(`the Flite worker died and could not be restarted: ${error.message}`);
          for (const pending of this.#waiting.splice(0)) pending.reject(error);
        },
      );
      return;
    }
    this.#waiting.shift();
    const requestId = this.#nextRequestId++;
    this.#inFlight = { ...next, requestId };
    // A sentence in progress must keep the process alive until its reply arrives.
    worker.ref();
    worker.postMessage({ kind: "synthesize", requestId, args: next.args } satisfies FliteWorkerRequest);
  }
}
