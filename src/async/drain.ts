/**
 * Flow control for a connection we write to faster than its client reads (a WebSocket, a Wyoming socket):
 * the writer waits while more than a high-water mark is unsent, so a slow reader pauses its own generation
 * instead of growing our buffers; one that takes nothing for `stallTimeoutMs` is reported stalled, so its
 * caller can drop it and free its generation state. Any progress restarts that clock: a slow link draining a
 * large file may stay above the mark for longer.
 */

/** Bytes a connection may hold unsent before its writer waits. */
export const SEND_HIGH_WATER_BYTES = 1024 * 1024;
/** How often the unsent count is looked at again while waiting: runtimes report no "drained" event we share. */
const DRAIN_POLL_MS = 10;

export interface DrainOptions {
  /** Bytes written and not yet taken by the client. */
  bufferedBytes(): number;
  /** True once the connection is closed: waiting stops. */
  closed(): boolean;
  stallTimeoutMs: number;
  /** Unsent bytes at or below which the wait ends; SEND_HIGH_WATER_BYTES unless given. */
  highWaterBytes?: number;
}

/** "drained" once at most the high-water mark is unsent, "stalled" when nothing was taken for the timeout, "closed" when the connection closed first. */
export async function waitForDrain(options: DrainOptions): Promise<"drained" | "stalled" | "closed"> {
  let lastBufferedBytes = options.bufferedBytes();
  let lastReadAt = performance.now();
  const highWaterBytes = options.highWaterBytes ?? SEND_HIGH_WATER_BYTES;
  while (!options.closed()) {
    const bufferedBytes = options.bufferedBytes();
    if (bufferedBytes <= highWaterBytes) return "drained";
    if (bufferedBytes < lastBufferedBytes) lastReadAt = performance.now();
    lastBufferedBytes = bufferedBytes;
    if (performance.now() - lastReadAt > options.stallTimeoutMs) return "stalled";
    await new Promise((resolve) => setTimeout(resolve, DRAIN_POLL_MS));
  }
  return "closed";
}
