/**
 * Bounded concurrency: at most `permits` holders at a time, the rest waiting in arrival order, so no waiter
 * starves. A permit is held from `acquire` until its release is called, across awaits and yields (a whole
 * streamed generation may hold one), or for the length of one task with `run`. Calling a release a second
 * time does nothing, so a `finally` may release without tracking whether it already did.
 */
export class Semaphore {
  #freePermits: number;
  readonly #waiting: (() => void)[] = [];

  constructor(permits: number) {
    if (!Number.isInteger(permits) || permits < 1) throw new RangeError(`a semaphore needs a positive whole number of permits, got ${permits}`);
    this.#freePermits = permits;
  }

  /** Waits for a permit; resolves with the function that gives it back. */
  async acquire(): Promise<() => void> {
    if (this.#freePermits > 0) this.#freePermits--;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // The permit passes straight to the longest waiter, so a newcomer cannot take it first.
      const next = this.#waiting.shift();
      if (next) next();
      else this.#freePermits++;
    };
  }

  /** Runs `task` under a permit, released when the task settles. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    const release = await this.acquire();
    try {
      return await task();
    } finally {
      release();
    }
  }
}
