/**
 * What the browser build gets for `node:worker_threads` (build.ts maps it here): the part of its API the
 * Mimi decoder's worker and its client use (decoder/worker.ts, decoder/worker-client.ts), over Web Workers.
 * - `Worker`: a Web Worker (a module) with worker_threads' event methods (`on`, `once`, `off`), `terminate`
 *   and an "exit" event when terminated; `ref`/`unref` do nothing (a page has no event loop to keep alive).
 * - `parentPort`: in a dedicated worker, the port to the one that started it. From its first listener on it
 *   takes the worker's messages, and holds those that arrive while nobody listens (the decoder's module may
 *   still be loading when its first messages come). Null elsewhere.
 */

type Listener = (value: unknown) => void;

/** What the port uses of a dedicated worker's global scope (the project's types have the DOM's, not the WebWorker library's). */
interface DedicatedWorkerScope {
  onmessage: ((event: MessageEvent) => void) | null;
  postMessage(message: unknown, transfer: Transferable[]): void;
  close(): void;
}

/** Node-style listeners over a message source; messages wait in a queue while nobody listens for them. */
class Listeners {
  readonly #byEvent = new Map<string, Array<{ listener: Listener; once: boolean }>>();
  readonly #waiting: unknown[] = [];

  on(event: string, listener: Listener, once = false): void {
    const list = this.#byEvent.get(event) ?? [];
    list.push({ listener, once });
    this.#byEvent.set(event, list);
    if (event === "message") this.#deliverWaiting();
  }

  off(event: string, listener: Listener): void {
    const list = this.#byEvent.get(event);
    if (list) this.#byEvent.set(event, list.filter((entry) => entry.listener !== listener));
  }

  emit(event: string, value: unknown): void {
    const list = this.#byEvent.get(event) ?? [];
    if (list.length === 0) {
      if (event === "message") this.#waiting.push(value);
      return;
    }
    this.#byEvent.set(event, list.filter((entry) => !entry.once));
    for (const { listener } of list) listener(value);
  }

  #deliverWaiting(): void {
    while (this.#waiting.length > 0 && (this.#byEvent.get("message")?.length ?? 0) > 0) this.emit("message", this.#waiting.shift());
  }
}

export class Worker {
  readonly #worker: globalThis.Worker;
  readonly #listeners = new Listeners();

  constructor(url: string | URL) {
    this.#worker = new globalThis.Worker(url, { type: "module" });
    this.#worker.onmessage = (event) => this.#listeners.emit("message", event.data);
    this.#worker.onmessageerror = () => this.#listeners.emit("messageerror", new Error("a message could not be read"));
    this.#worker.onerror = (event) => this.#listeners.emit("error", new Error(event.message || "the worker failed to start"));
  }

  postMessage(message: unknown, transfer: Transferable[] = []): void {
    this.#worker.postMessage(message, transfer);
  }

  on(event: string, listener: Listener): this {
    this.#listeners.on(event, listener);
    return this;
  }

  once(event: string, listener: Listener): this {
    this.#listeners.on(event, listener, true);
    return this;
  }

  off(event: string, listener: Listener): this {
    this.#listeners.off(event, listener);
    return this;
  }

  ref(): void {}

  unref(): void {}

  async terminate(): Promise<number> {
    this.#worker.terminate();
    this.#listeners.emit("exit", 1);
    return 1;
  }
}

class ParentPort {
  readonly #listeners = new Listeners();
  #listening = false;

  constructor(private readonly scope: DedicatedWorkerScope) {}

  postMessage(message: unknown, transfer: Transferable[] = []): void {
    this.scope.postMessage(message, transfer);
  }

  on(event: string, listener: Listener): this {
    this.#listen();
    this.#listeners.on(event, listener);
    return this;
  }

  once(event: string, listener: Listener): this {
    this.#listen();
    this.#listeners.on(event, listener, true);
    return this;
  }

  /** Takes the worker's messages from the first listener on: a worker that never listens keeps its own onmessage. */
  #listen(): void {
    if (this.#listening) return;
    this.#listening = true;
    this.scope.onmessage = (event: MessageEvent) => this.#listeners.emit("message", event.data);
  }

  off(event: string, listener: Listener): this {
    this.#listeners.off(event, listener);
    return this;
  }

  /** A worker's close: it stops taking messages and ends. */
  close(): void {
    this.scope.close();
  }
}

const inDedicatedWorker = typeof (globalThis as { DedicatedWorkerGlobalScope?: unknown }).DedicatedWorkerGlobalScope === "function" && globalThis instanceof (globalThis as unknown as { DedicatedWorkerGlobalScope: new () => object }).DedicatedWorkerGlobalScope;

export const parentPort: ParentPort | null = inDedicatedWorker ? new ParentPort(globalThis as unknown as DedicatedWorkerScope) : null;
export const isMainThread = !inDedicatedWorker;
export default { Worker, parentPort, isMainThread };
