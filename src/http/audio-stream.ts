import type { StreamOutcome } from "../metrics.ts";

/**
 * Turns a byte generator into a response body that produces only as fast as the client reads (pull-based)
 * and stops generation when the client goes away: the request's signal and the stream's cancel both abort
 * the generator's signal, so the model stops within one frame. A client that stays connected but reads
 * nothing for `stallTimeoutMs` while a chunk waits for it is treated as gone too, so it cannot hold the
 * generation's state for good. Only time spent waiting on the client counts: a slow synthesis that is
 * still making its next chunk is never cut.
 */
export function pullStream(
  produce: (signal: AbortSignal) => AsyncGenerator<Uint8Array, void, undefined>,
  requestSignal: AbortSignal,
  onEnd: (outcome: StreamOutcome, error?: unknown) => void,
  stallTimeoutMs: number,
): ReadableStream<Uint8Array> {
  const abort = new AbortController();
  const abortFromRequest = () => abort.abort();
  requestSignal.addEventListener("abort", abortFromRequest, { once: true });
  const iterator = produce(abort.signal);
  let ended = false;
  let stallTimer: ReturnType<typeof setTimeout> | undefined;
  const finish = (outcome: StreamOutcome, error?: unknown) => {
    if (ended) return;
    ended = true;
    clearTimeout(stallTimer);
    requestSignal.removeEventListener("abort", abortFromRequest);
    onEnd(outcome, error);
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        clearTimeout(stallTimer);
        try {
          const { value, done } = await iterator.next();
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
              void iterator.return(undefined);
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
        await iterator.return(undefined);
      },
    },
    { highWaterMark: 0 },
  );
}
