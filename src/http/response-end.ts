/**
 * When a response has really ended: a body made as it is streamed ends when its last byte is taken, or when
 * the client goes away, long after the handler returned. Access logs (latency, audio seconds) and the
 * shutdown's count of active requests both need that moment.
 */
import type { Context } from "hono";

export type ResponseEnd = "completed" | "client_closed" | "failed";

/**
 * Calls `callback` once, when `c.res` has ended. A response without a body, or with a declared length (built
 * whole in memory), ends now; a streamed body is passed through a reader of the same pace (highWaterMark 0,
 * so flow control and stall detection still see the client's reads).
 */
export function whenResponseEnds(c: Context, callback: (end: ResponseEnd) => void): void {
  let called = false;
  const end = (how: ResponseEnd) => {
    if (called) return;
    called = true;
    callback(how);
  };
  const response = c.res;
  // A WebSocket upgrade (101, or Bun's empty upgrade answer) has no body to wait for.
  if (!response.body || response.headers.has("content-length") || response.status === 101) return end("completed");
  const reader = response.body.getReader();
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const { value, done } = await reader.read();
          if (done) {
            end("completed");
            controller.close();
          } else {
            controller.enqueue(value);
          }
        } catch (error) {
          end("failed");
          controller.error(error);
        }
      },
      async cancel(reason) {
        end("client_closed");
        await reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
  c.res = new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}
