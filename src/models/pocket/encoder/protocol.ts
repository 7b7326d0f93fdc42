/**
 * The messages between the Mimi encoder worker (worker.ts) and its client (worker-client.ts). In: `open` once,
 * then `encode`, and `close` last; out: `ready` or `failed`, then one `encoded` or `error` per encode.
 */
import type { CpuProvider } from "../../../onnx/runtime.ts";

export type EncoderWorkerRequest =
  | { kind: "open"; path: string; provider: CpuProvider; threads: number }
  /** One run of the encoder graph over `audio` (24 kHz, a whole number of frames). */
  | { kind: "encode"; requestId: number; audio: Float32Array }
  | { kind: "close" };

export type EncoderWorkerReply =
  | { kind: "ready" }
  | { kind: "failed"; message: string }
  | { kind: "encoded"; requestId: number; data: Float32Array; dims: number[] }
  | { kind: "error"; requestId: number; message: string };
