import type { Context } from "hono";
import type { StreamOutcome } from "../metrics.ts";
import { streamEnded } from "./access-log.ts";

/**
 * The abort a streamed response's generation runs under: it fires when the client leaves (the request's
 * signal), and pullStream fires it when the body is cancelled or stalls. Made before the generation starts,
 * which is before the body exists, so that a full engine is still a 429.
 */
export function clientAbort(requestSignal: AbortSignal): AbortController {
  const abort = new AbortController();
  if (requestSignal.aborted) abort.abort();
  else requestSignal.addEventListener("abort", () => abort.abort(), { once: true, signal: abort.signal });
  return abort;
}

/**
 * Turns a byte generator into a response body that produces only as fast as the client reads (pull-based)
 * and stops generation when the client goes away: the request's signal and the stream's cancel both fire
 * `abort` (clientAbort), whose signal the generator runs under, so the model stops within one frame. A
 * client that stays connected but reads nothing for `stallTimeoutMs` while a chunk waits for it is treated
 * as gone too, so it cannot hold the generation's state for good. Only time spent waiting on the client
 * counts: a slow synthesis that is still making its next chunk is never cut.
 */
export function pullStream(
  bytes: AsyncGenerator<Uint8Array, void, undefined>,
  abort: AbortController,
  onEnd: (outcome: StreamOutcome, error?: unknown) => void,
  stallTimeoutMs: number,
): ReadableStream<Uint8Array> {
  let ended = false;
  let stallTimer: ReturnType<typeof setTimeout> | undefined;
  const finish = (outcome: StreamOutcome, error?: unknown) => {
    if (ended) return;
    ended = true;
    clearTimeout(stallTimer);
    onEnd(outcome, error);
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        clearTimeout(stallTimer);
        try {
          const { value, done } = await bytes.next();
          if (abort.signal.aborted) {
            finish("aborted");
            controller.close();
            return;
          }
          if (done) {
            finish("completed");
            controller.close();
          } else {
            controller.enqueue(value);
            // The next pull comes when the client has taken this chunk.
            stallTimer = setTimeout(() => {
              abort.abort();
              finish("aborted");
              controller.error(new Error(`the client read nothing for ${stallTimeoutMs} ms`));
              void bytes.return(undefined);
            }, stallTimeoutMs);
          }
        } catch (error) {
          finish(abort.signal.aborted ? "aborted" : "failed", error);
          controller.error(error);
        }
      },
      async cancel() {
        abort.abort();
        finish("aborted");
        await bytes.return(undefined);
      },
    },
    { highWaterMark: 0 },
  );
}

/**
 * A streamed response over a generation already started under `abort`: the body pulls `bytes` (pullStream),
 * the access log hears how the stream ended, and `onFailed` how it failed. Until the body is handed over
 * nobody reads or stops the generation, so anything that throws on the way (`open` makes the headers first:
 * they are what can throw, and the body must not exist if they do) gives the generation up.
 */
export function streamedResponse(
  c: Context,
  abort: AbortController,
  open: () => { bytes: AsyncGenerator<Uint8Array, void, undefined>; headers: HeadersInit },
  stallTimeoutMs: number,
  onFailed: (error: unknown) => void,
): Response {
  try {
    const { bytes, headers } = open();
    const ended = streamEnded(c);
    const body = pullStream(bytes, abort, (outcome, error) => {
      ended(outcome);
      if (outcome === "failed") onFailed(error);
    }, stallTimeoutMs);
    return new Response(body, { headers });
  } catch (error) {
    abort.abort();
    throw error;
  }
}
