/**
 * Runs tasks one at a time, in the order they were given: the one promise queue of the code base (the voice
 * store's mutations, the shared ONNX sessions, the WGSL decoder's plans, a WebSocket session's messages, the
 * decoder worker's messages, the WebGPU EP's session creation).
 *
 * Failure semantics, the same for every user: a task's error goes to its own caller, through the promise
 * `run` returns, and nowhere else; the queue carries on with the next task as if the failed one had
 * succeeded. A queue that stopped at the first error would leave every later caller waiting forever, and one
 * that logged errors itself would report them twice to callers that await. Callers that fire and forget (a
 * message loop) attach their own `catch`, which is where such an error is logged.
 *
 * A task always starts asynchronously, even on an idle queue, so `run` never runs it inside the caller's
 * stack, and a task that throws synchronously rejects its promise like one that rejects.
 */
export class SerialQueue {
  /** Settles (never rejects) when the last task given so far has settled. */
  #tail: Promise<unknown> = Promise.resolve();
  #pendingCount = 0;

  run<T>(task: () => T | Promise<T>): Promise<T> {
    this.#pendingCount++;
    const result = this.#tail.then(() => task()).finally(() => this.#pendingCount--);
    this.#tail = result.catch(() => undefined);
    return result;
  }

  /** Tasks given and not yet settled, the running one included. */
  get pendingCount(): number {
    return this.#pendingCount;
  }

  /** Resolves once every task given so far has settled, whether it succeeded or failed. */
  async idle(): Promise<void> {
    await this.#tail;
  }
}
