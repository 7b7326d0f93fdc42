/**
 * The main thread's side of the encoder workers (encoder-worker.ts): where every file is encoded and every
 * stream's encoder runs, so that no encode holds the event loop. Started on first use; a worker with nothing
 * to do does not keep the process alive. A stream stays on the worker it opened on (its encoder's state lives
 * there); a file goes to the worker with the least audio in hand. A worker that dies fails what it held and
 * is replaced for the next request.
 */
import { Worker } from "node:worker_threads";
import { awaitWorkerReady } from "../lib/worker-ready.ts";
import type { EncoderWorkerReply, EncoderWorkerRequest } from "./encoder-protocol.ts";
import type { EncodingOptions, ResponseFormat } from "./formats.ts";

const START_TIMEOUT_MS = 60_000;

interface Pending {
  resolve: (reply: { bytes: Uint8Array; sampleCount: number }) => void;
  reject: (error: Error) => void;
  /** Bytes of audio this request handed to the worker, until it is answered. */
  inputBytes: number;
}

/** One worker thread and the requests it has not answered yet. */
class EncoderThread {
  readonly #pending = new Map<number, Pending>();
  #failure: Error | undefined;
  openStreams = 0;
  inputBytes = 0;

  private constructor(private readonly worker: Worker) {
    worker.on("message", (reply: EncoderWorkerReply) => {
      if (reply.kind === "ready") return;
      const pending = this.#pending.get(reply.requestId);
      if (!pending) return;
      this.#settled(reply.requestId, pending);
      if (reply.kind === "done") pending.resolve({ bytes: reply.bytes, sampleCount: reply.sampleCount });
      else pending.reject(new Error(`encoder: ${reply.message}`));
    });
    worker.on("error", (error: Error) => this.#fail(new Error(`the encoder worker stopped: ${error.message}`)));
    worker.on("messageerror", (error: Error) => this.#fail(new Error(`an encoder worker reply could not be read: ${error.message}`)));
    worker.on("exit", (code: number) => this.#fail(new Error(`the encoder worker exited (code ${code})`)));
    worker.unref();
  }

  static async start(): Promise<EncoderThread> {
    // node:worker_threads behaves the same under Bun and Deno (see models/pocket/decoder/worker-client.ts).
    const worker = new Worker(new URL("./encoder-worker.ts", import.meta.url));
    await awaitWorkerReady(worker, "encoder", START_TIMEOUT_MS);
    return new EncoderThread(worker);
  }

  get failed(): boolean {
    return this.#failure !== undefined;
  }

  /** Sends `message` (handing over `transfer`) and resolves with its reply. */
  request(message: EncoderWorkerRequest & { requestId: number }, transfer: ArrayBuffer[] = [], inputBytes = 0): Promise<{ bytes: Uint8Array; sampleCount: number }> {
    if (this.#failure) return Promise.reject(this.#failure);
    return new Promise((resolve, reject) => {
      this.#pending.set(message.requestId, { resolve, reject, inputBytes });
      this.inputBytes += inputBytes;
      // A request in progress keeps the process alive until its reply arrives.
      if (this.#pending.size === 1) this.worker.ref();
      this.worker.postMessage(message, transfer);
    });
  }

  post(message: EncoderWorkerRequest): void {
    if (!this.#failure) this.worker.postMessage(message);
  }

  async close(): Promise<void> {
    this.#fail(new Error("the encoder worker was closed"));
    await this.worker.terminate();
  }

  #settled(requestId: number, pending: Pending): void {
    this.#pending.delete(requestId);
    this.inputBytes -= pending.inputBytes;
    if (this.#pending.size === 0) this.worker.unref();
  }

  #fail(error: Error): void {
    this.#failure ??= error;
    for (const [requestId, pending] of this.#pending) {
      this.#settled(requestId, pending);
      pending.reject(this.#failure);
    }
  }
}

/** A stream's encoder in a worker, with the contract of codec.ts's StreamEncoder. */
export interface PooledStreamEncoder {
  push(samples: Float32Array): Promise<Uint8Array>;
  end(): Promise<Uint8Array>;
  close(): void;
}

export class EncoderPool {
  readonly #threads: (Promise<EncoderThread> | undefined)[];
  /** Each slot's started worker, once it is. */
  readonly #live: (EncoderThread | undefined)[] = [];
  #nextRequestId = 1;
  #nextStreamId = 1;
  /** A stream encoder dropped without close() or end() (an error path) still frees its worker state. */
  readonly #abandoned = new FinalizationRegistry<{ thread: EncoderThread; streamId: number }>(({ thread, streamId }) => {
    thread.openStreams--;
    thread.post({ kind: "close", streamId });
  });

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`an encoder pool needs at least one worker, got ${size}`);
    this.#threads = Array.from({ length: size }, () => undefined);
  }

  /** Bytes of audio handed to the workers and not yet answered: what encoding holds in memory now. */
  get inputBytesInFlight(): number {
    return this.#started().reduce((sum, thread) => sum + thread.inputBytes, 0);
  }

  /**
   * The file of `samples` played `speed` times faster, in `format`, and its length in samples. `samples`' buffer
   * is handed to the worker, not copied: the caller's array is empty afterwards.
   */
  async renderFile(samples: Float32Array, sampleRateHz: number, format: ResponseFormat, options: EncodingOptions, speed: number): Promise<{ bytes: Uint8Array; sampleCount: number }> {
    const thread = await this.#thread((candidate) => candidate.inputBytes);
    // A view of part of a buffer is copied, so the buffer handed over holds only this audio.
    const owned = samples.byteOffset === 0 && samples.byteLength === samples.buffer.byteLength ? samples : samples.slice();
    const requestId = this.#nextRequestId++;
    return thread.request({ kind: "file", requestId, samples: owned, sampleRateHz, format, options, speed }, [owned.buffer as ArrayBuffer], owned.byteLength);
  }

  async openStream(format: ResponseFormat, sampleRateHz: number, options: EncodingOptions): Promise<PooledStreamEncoder> {
    const thread = await this.#thread((candidate) => candidate.openStreams);
    const streamId = this.#nextStreamId++;
    thread.openStreams++;
    try {
      await thread.request({ kind: "open", requestId: this.#nextRequestId++, streamId, format, sampleRateHz, options });
    } catch (error) {
      thread.openStreams--;
      throw error;
    }
    let open = true;
    const finish = () => {
      if (!open) return false;
      open = false;
      this.#abandoned.unregister(handle);
      thread.openStreams--;
      return true;
    };
    const handle: PooledStreamEncoder = {
      push: (chunk) => {
        if (!open) return Promise.reject(new Error("the stream encoder is closed"));
        // A copy is sent: the caller keeps its chunk (80 ms of audio, a few KB).
        const copy = chunk.slice();
        return thread.request({ kind: "push", requestId: this.#nextRequestId++, streamId, samples: copy }, [copy.buffer], copy.byteLength).then((reply) => reply.bytes);
      },
      end: () => {
        if (!finish()) return Promise.reject(new Error("the stream encoder is closed"));
        return thread.request({ kind: "end", requestId: this.#nextRequestId++, streamId }).then((reply) => reply.bytes);
      },
      close: () => {
        if (finish()) thread.post({ kind: "close", streamId });
      },
    };
    this.#abandoned.register(handle, { thread, streamId }, handle);
    return handle;
  }

  async close(): Promise<void> {
    const threads = this.#threads.splice(0, this.#threads.length, ...this.#threads.map(() => undefined));
    this.#live.length = 0;
    await Promise.all(threads.map((thread) => thread?.then((started) => started.close(), () => undefined)));
  }

  #started(): EncoderThread[] {
    return this.#live.filter((thread): thread is EncoderThread => thread !== undefined && !thread.failed);
  }

  /** The live worker with the least `load`; a slot never started, or whose worker died, starts one first. */
  async #thread(load: (thread: EncoderThread) => number): Promise<EncoderThread> {
    this.#threads.forEach((slot, index) => {
      if (slot !== undefined && !this.#live[index]?.failed) return;
      const starting = EncoderThread.start();
      this.#threads[index] = starting;
      this.#live[index] = undefined;
      starting.then(
        (thread) => {
          if (this.#threads[index] === starting) this.#live[index] = thread;
        },
        () => {
          if (this.#threads[index] === starting) this.#threads[index] = undefined;
        },
      );
    });
    const slots = [...this.#threads];
    const threads = await Promise.all(slots.map((slot) => slot!.catch(() => undefined)));
    const live = threads.filter((thread): thread is EncoderThread => thread !== undefined && !thread.failed);
    // Every start failed: the first one's error, so the caller sees why.
    if (live.length === 0) return slots[0]!;
    return live.reduce((best, thread) => (load(thread) < load(best) ? thread : best));
  }
}

let shared: EncoderPool | undefined;
let sharedSize = 1;

/** Sets how many encoder workers the process runs (--encoder-threads); takes effect before the first encode. */
export function configureEncoderThreads(count: number): void {
  if (!Number.isInteger(count) || count < 1) throw new RangeError(`encoder threads must be a positive integer, got ${count}`);
  sharedSize = count;
  if (shared && shared.size !== count) {
    void shared.close();
    shared = undefined;
  }
}

/** The process's encoder workers, started on first use. */
export function encoderPool(): EncoderPool {
  shared ??= new EncoderPool(sharedSize);
  return shared;
}
