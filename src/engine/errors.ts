/**
 * What the engine refuses with, in its own terms: each front end maps them to its wire shape (an HTTP status,
 * a WebSocket error message, a Wyoming error event); the engine knows no protocol.
 */

/**
 * No running place is free and none is expected soon enough to wait for (or every waiting place, or the
 * memory budget, is taken): retry after `retryAfterSeconds`, the expected time to a free place.
 */
export class EngineFullError extends Error {
  constructor(
    readonly retryAfterSeconds: number,
    limits: { maxStreams: number; maxQueue: number },
    memoryBudgetBytes?: number,
    reason?: { expectedWaitSeconds: number; maxQueueWaitSeconds: number } | { firstAudioSeconds: number; firstAudioLimitSeconds: number; firstAudioBudgetSeconds: number },
  ) {
    const what =
      memoryBudgetBytes !== undefined
        ? `its memory budget of ${Math.round(memoryBudgetBytes / 1024 ** 2)} MiB (--memory-budget) is taken`
        : reason && "expectedWaitSeconds" in reason
          ? `every place it runs in real time is taken and the next is expected in ${reason.expectedWaitSeconds.toFixed(1)} s, longer than a request may wait (--max-queue-wait ${reason.maxQueueWaitSeconds} s)`
          : reason
            ? `so many streams are starting that this one's first audio is expected in ${reason.firstAudioSeconds.toFixed(2)} s, more than the ${reason.firstAudioLimitSeconds.toFixed(2)} s --first-audio-budget ${reason.firstAudioBudgetSeconds} s leaves a prediction`
            : `${limits.maxStreams} streams running, ${limits.maxQueue} waiting`;
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
