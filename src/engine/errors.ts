/**
 * What the engine refuses with, in its own terms: each front end maps them to its wire shape (an HTTP status,
 * a WebSocket error message, a Wyoming error event); the engine knows no protocol.
 */

/** Every running and waiting place is taken (or the memory budget is): retry after `retryAfterSeconds`. */
export class EngineFullError extends Error {
  constructor(
    readonly retryAfterSeconds: number,
    limits: { maxStreams: number; maxQueue: number },
    memoryBudgetBytes?: number,
  ) {
    const what = memoryBudgetBytes === undefined ? `${limits.maxStreams} streams running, ${limits.maxQueue} waiting` : `its memory budget of ${Math.round(memoryBudgetBytes / 1024 ** 2)} MiB (--memory-budget) is taken`;
    super(`The server is at capacity (${what}); retry after ${retryAfterSeconds} s`);
    this.name = "EngineFullError";
  }
}

/** The engine takes no more work: it is shutting down, or it failed and the server needs a restart. */
export class EngineUnavailableError extends Error {
  constructor(readonly reason: "closed" | "failed", failure?: Error) {
    super(reason === "closed" ? "The engine is shutting down" : `The speech engine has failed (${failure?.message}); the server needs a restart`);
    this.name = "EngineUnavailableError";
  }
}
