/**
 * Draining for a graceful shutdown, whatever the protocol. Once draining starts, readiness answers 503 (the
 * load balancer stops sending traffic), each listener refuses new work (http/drain-gate.ts; Wyoming drops new
 * connections), and the work already accepted is waited for: HTTP responses until their last byte, and
 * sessions (WebSocket or Wyoming) until what they had flushed is spoken (then they close). Reads (listings,
 * health, metrics) keep answering until the listener closes.
 */

export interface DrainableSession {
  /** Finish what was flushed, then close 1001. */
  drain(): void;
  /** Close 1001 now. */
  goAway(): void;
}

export class ServerLifecycle {
  #draining = false;
  #activeRequests = 0;
  readonly #sessions = new Set<DrainableSession>();
  #idleWaiters: (() => void)[] = [];

  get draining(): boolean {
    return this.#draining;
  }

  /** HTTP requests whose response has not yet ended, and WebSocket sessions still open. */
  get active(): { requests: number; sessions: number } {
    return { requests: this.#activeRequests, sessions: this.#sessions.size };
  }

  /** One HTTP request in progress; the returned function ends it (once). */
  trackRequest(): () => void {
    this.#activeRequests++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#activeRequests--;
      this.#wakeIfIdle();
    };
  }

  /** One open WebSocket session; the returned function is called when it closes. A session opened while draining is drained at once. */
  trackSession(session: DrainableSession): () => void {
    this.#sessions.add(session);
    if (this.#draining) session.drain();
    return () => {
      if (this.#sessions.delete(session)) this.#wakeIfIdle();
    };
  }

  /** Starts draining: from now on readiness is 503, new work is refused, and every open session finishes and closes. */
  startDraining(): void {
    if (this.#draining) return;
    this.#draining = true;
    for (const session of [...this.#sessions]) session.drain();
  }

  /** Resolves true once nothing is active, or false when `timeoutMs` passes first. */
  async idle(timeoutMs: number): Promise<boolean> {
    if (this.#isIdle()) return true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const becameIdle = new Promise<boolean>((resolve) => this.#idleWaiters.push(() => resolve(true)));
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    try {
      return await Promise.race([becameIdle, timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The grace is over: every session still open closes with 1001 now. */
  closeSessions(): void {
    for (const session of [...this.#sessions]) session.goAway();
  }

  #isIdle(): boolean {
    return this.#activeRequests === 0 && this.#sessions.size === 0;
  }

  #wakeIfIdle(): void {
    if (!this.#isIdle()) return;
    for (const wake of this.#idleWaiters.splice(0)) wake();
  }
}
