/**
 * The messages between the encoder worker (encoder-worker.ts) and its pool (encoder-pool.ts). In: `file`, and a
 * stream's `open`, `push`…, then `end` or `close`; out: one `done` or `error` per request (none for `close`).
 * A stream's messages are handled in the order sent; files and other streams interleave with them.
 */
import type { EncodingOptions, ResponseFormat } from "./formats.ts";

export type EncoderWorkerRequest =
  | { kind: "file"; requestId: number; samples: Float32Array; sampleRateHz: number; format: ResponseFormat; options: EncodingOptions; speed: number }
  | { kind: "open"; requestId: number; streamId: number; format: ResponseFormat; sampleRateHz: number; options: EncodingOptions }
  | { kind: "push"; requestId: number; streamId: number; samples: Float32Array }
  | { kind: "end"; requestId: number; streamId: number }
  | { kind: "close"; streamId: number };

export type EncoderWorkerReply =
  | { kind: "ready" }
  /** `sampleCount`: the file's length in samples, after its speed change. */
  | { kind: "done"; requestId: number; bytes: Uint8Array; sampleCount: number }
  | { kind: "error"; requestId: number; message: string };
