/**
 * Turns a byte generator into a response body that produces only as fast as the client reads (pull-based)
 * and stops generation when the client goes away: the request's signal and the stream's cancel both abort
 * the generator's signal, so the model stops within one frame.
 */
export type StreamEnd = "completed" | "aborted" | "failed";

export function pullStream(
  produce: (signal: AbortSignal) => AsyncGenerator<Uint8Array, void, undefined>,
  requestSignal: AbortSignal,
  onEnd: (outcome: StreamEnd, error?: unknown) => void,
): ReadableStream<Uint8Array> {
  const abort = new AbortController();
  const abortFromRequest = () => abort.abort();
  requestSignal.addEventListener("abort", abortFromRequest, { once: true });
  const iterator = produce(abort.signal);
  let ended = false;
  const finish = (outcome: StreamEnd, error?: unknown) => {
    if (ended) return;
    ended = true;
    requestSignal.removeEventListener("abort", abortFromRequest);
    onEnd(outcome, error);
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
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
