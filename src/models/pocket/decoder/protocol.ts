/**
 * The messages between the Mimi decoder worker (worker.ts) and its client (worker-client.ts). In: `open` once,
 * then `decode` and `release`, and `close` last; out: `ready` or `failed`, then one `decoded` or `error` per decode, in order,
 * and `log` lines for the main thread's logger at any time.
 */
import type { StateEntry } from "../bundle/pocket-bundle.ts";
import type { CpuProvider } from "../../../onnx/runtime.ts";
import type { MimiDecoderConfig } from "../stages/mimi-decoder.ts";

export type DecoderWorkerRequest =
  | { kind: "open"; path: string; manifest: StateEntry[]; config: MimiDecoderConfig; provider: CpuProvider; threads: number }
  | { kind: "decode"; requestId: number; stateId: number; fresh: boolean; nextStateId: number; latents: Float32Array }
  | { kind: "release"; stateId: number }
  /** Skip what is queued, let the run in progress finish, release the session and exit. */
  | { kind: "close" };

export type DecoderWorkerReply =
  | { kind: "ready" }
  | { kind: "failed"; message: string }
  | { kind: "decoded"; requestId: number; audio: Float32Array }
  | { kind: "error"; requestId: number; message: string }
  | { kind: "log"; level: "warn" | "error"; message: string };
