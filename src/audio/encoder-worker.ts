/**
 * Encoding in a worker thread (encoder-pool.ts starts it): the speed change and encoding of whole files and the
 * streams' encoders. On the main thread one long file (a 4,096-character aac request) held every stream,
 * socket and /health for tens of seconds.
 *
 * Fairness: a file is worked through in slices (file-encoding.ts), and between two slices the worker's event
 * loop turns, so the streams' chunks and other files' slices that arrived meanwhile run before the next one:
 * a long file shares the thread rather than holding it.
 */
import { parentPort } from "node:worker_threads";
import { setImmediate } from "node:timers";
import { renderFileOnThisThread } from "./file-encoding.ts";
import type { StreamEncoder } from "./codec.ts";
import { codecOf } from "./formats.ts";
import type { EncoderWorkerReply, EncoderWorkerRequest } from "./encoder-protocol.ts";

if (!parentPort) throw new Error("encoder-worker.ts runs as a worker thread (encoder-pool.ts starts it)");
const port = parentPort;

/** Lets the event loop turn: messages that arrived during a slice are handled before the next slice. */
const pause = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Each stream's encoder and the tail of its work, so that its messages run one after another in order. */
const streams = new Map<number, { encoder: Promise<StreamEncoder>; tail: Promise<unknown> }>();

function replyDone(requestId: number, bytes: Uint8Array, sampleCount = 0): void {
  // Handed over, not copied: a view of part of a buffer (or of a shared empty one) is copied first, so that
  // the buffer given away is the reply's alone.
  const owned = bytes.byteLength > 0 && bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice();
  port.postMessage({ kind: "done", requestId, bytes: owned, sampleCount } satisfies EncoderWorkerReply, [owned.buffer as ArrayBuffer]);
}

function replyError(requestId: number, error: unknown): void {
  port.postMessage({ kind: "error", requestId, message: error instanceof Error ? error.message : String(error) } satisfies EncoderWorkerReply);
}

function inOrder(streamId: number, work: (encoder: StreamEncoder) => Promise<void>): void {
  const stream = streams.get(streamId);
  if (!stream) return;
  stream.tail = stream.tail.then(async () => work(await stream.encoder));
}

port.on("message", (message: EncoderWorkerRequest) => {
  switch (message.kind) {
    case "file":
      void renderFileOnThisThread(message.samples, message.sampleRateHz, message.format, message.options, message.speed, pause).then(
        ({ bytes, sampleCount }) => replyDone(message.requestId, bytes, sampleCount),
        (error) => replyError(message.requestId, error),
      );
      return;
    case "open": {
      const encoder = codecOf(message.format).createStream(message.sampleRateHz, message.options);
      const tail = encoder.then(
        () => replyDone(message.requestId, new Uint8Array(0)),
        (error) => {
          streams.delete(message.streamId);
          replyError(message.requestId, error);
        },
      );
      streams.set(message.streamId, { encoder, tail });
      return;
    }
    case "push":
    case "end": {
      if (!streams.has(message.streamId)) return replyError(message.requestId, new Error(`encoder stream ${message.streamId} is not open`));
      inOrder(message.streamId, async (encoder) => {
        try {
          if (message.kind === "push") return replyDone(message.requestId, await encoder.push(message.samples));
          streams.delete(message.streamId);
          replyDone(message.requestId, await encoder.end());
        } catch (error) {
          replyError(message.requestId, error);
        }
      });
      return;
    }
    case "close":
      inOrder(message.streamId, async (encoder) => {
        encoder.close();
        streams.delete(message.streamId);
      });
      return;
  }
});

port.postMessage({ kind: "ready" } satisfies EncoderWorkerReply);
