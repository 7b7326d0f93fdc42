/**
 * Reading a byte stream that someone else writes, within a size cap and a time limit: the one capped reader for
 * request bodies (http/request-body.ts) and fetched ref_audio (voices/remote-media.ts).
 *
 * Whatever stops the read (too many bytes, the deadline, the signal), the source is cancelled at once: its
 * pending read settles, so a stalled sender cannot hold the reader past its limit, and nothing more of it is
 * read. The stream is pulled one chunk at a time (no read-ahead), so the cap counts only what the consumer
 * asked for. Each way of ending has its own error, chosen by the caller, so each caller keeps its own
 * vocabulary (413/408/499 for a request body, a 400 naming ref_audio for a download).
 */
import { concatBytes } from "../lib/concat.ts";

export interface StreamCap {
  maxBytes: number;
  /** The error the stream ends with once more than maxBytes have come; the rest is never read. */
  tooLarge: () => unknown;
  /** The whole stream must have come within timeoutMs of the call, else it ends with error(). */
  deadline?: { timeoutMs: number; error: () => unknown };
  /** Ends the read when it aborts, with the signal's reason: a deadline that spans more than this read. */
  signal?: AbortSignal;
  /** The error a failing source ends the stream with, in place of the source's own. */
  sourceFailed?: (error: unknown) => unknown;
}

/** `source` within `cap`, as a stream. */
export function capStream(source: ReadableStream<Uint8Array>, cap: StreamCap): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  const { signal } = cap;
  let receivedBytes = 0;
  let settled = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let output!: ReadableStreamDefaultController<Uint8Array>;
  const onAbort = () => stop(signal!.reason);
  const settle = () => {
    settled = true;
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  };
  const stop = (error: unknown) => {
    if (settled) return;
    settle();
    output.error(error);
    reader.cancel().catch(() => {});
  };
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        output = controller;
        // A listener added to a signal that has already aborted never fires.
        if (signal?.aborted) return stop(signal.reason);
        signal?.addEventListener("abort", onAbort, { once: true });
        const { deadline } = cap;
        if (deadline) timer = setTimeout(() => stop(deadline.error()), deadline.timeoutMs);
      },
      async pull(controller) {
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch (error) {
          if (settled) return;
          settle();
          controller.error(cap.sourceFailed ? cap.sourceFailed(error) : error);
          return;
        }
        if (settled) return;
        if (chunk.done) {
          settle();
          controller.close();
          return;
        }
        receivedBytes += chunk.value.byteLength;
        if (receivedBytes > cap.maxBytes) return stop(cap.tooLarge());
        controller.enqueue(chunk.value);
      },
      cancel(reason) {
        settle();
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

/** All of `source` within `cap`, as one array; rejects with the error that ended the read. No source is no bytes. */
export async function readCapped(source: ReadableStream<Uint8Array> | null, cap: StreamCap): Promise<Uint8Array> {
  if (!source) return new Uint8Array();
  const reader = capStream(source, cap).getReader();
  const chunks: Uint8Array[] = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
  }
  return concatBytes(chunks);
}
