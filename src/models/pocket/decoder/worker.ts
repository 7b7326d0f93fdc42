/**
 * The Mimi decoder in a worker thread (worker-client.ts starts it). onnxruntime-node runs a session on the
 * thread that calls it, so in the main thread a decode and the next FlowLM step take turns on one core;
 * here the decode runs on the other core while the main thread samples.
 *
 * Messages in: `open` once, then `decode` and `release`; out: `ready` or `failed`, then one `decoded` or
 * `error` per decode, in order, and `log` at any time (the worker has no logger: the main thread logs them).
 * States live here, keyed by the ids the main thread hands out.
 */
import { parentPort } from "node:worker_threads";
import { SerialQueue } from "../../../async/serial-queue.ts";
import { configureOnnxRuntime, loadOnnxRuntime } from "../../../onnx/runtime.ts";
import { MimiDecoder, openMimiDecoderSession } from "../stages/mimi-decoder.ts";
import { stateBytes, type MimiState } from "../stages/state.ts";
import { OutputGarbage } from "../../../onnx/output-garbage.ts";
import type { DecoderWorkerReply, DecoderWorkerRequest } from "./protocol.ts";

if (!parentPort) throw new Error("decoder/worker.ts runs as a worker thread (worker-client.ts starts it)");
const port = parentPort;
const reply = (message: DecoderWorkerReply, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);

let decoder: MimiDecoder | undefined;
const states = new Map<number, MimiState>();
// Decodes run one after another in arrival order: a state's next decode needs the previous one's result.
const messages = new SerialQueue();
/**
 * Every decode drops the state it replaced (8 MB at full size), collected every 16 MB: at 16 streams, left
 * to the collector's own pace, two workers' dead states added ~250 MB to the peak (bench/load.ts at 16 streams).
 */
const garbage = new OutputGarbage(16 * 1024 * 1024);

/** Set by `close` as it arrives: decodes queued behind it are not run. */
let closing = false;

port.on("message", (message: DecoderWorkerRequest) => {
  if (message.kind === "close") {
    closing = true;
    void messages.run(close);
    return;
  }
  const handle = message.kind === "open" ? () => open(message) : message.kind === "decode" ? () => decode(message) : async () => release(message.stateId);
  // Nobody awaits a message's handling, so a handler's failure is logged here; the queue goes on to the next.
  void messages.run(handle).catch((error: unknown) => reply({ kind: "log", level: "error", message: `Mimi decoder worker: ${(error as Error).message}` }));
});

async function open(message: Extract<DecoderWorkerRequest, { kind: "open" }>): Promise<void> {
  try {
    configureOnnxRuntime({ threads: message.threads });
    const runtime = await loadOnnxRuntime({ provider: message.provider });
    // With onnxruntime's CPU arena: a decode allocates ~280 MB per 100 frames in blocks of 4–30 MB, each a
    // fresh mapping under the allocator's 4 MiB mmap threshold (system/allocator.ts); the arena keeps one
    // working set instead. Real-size int8, 2 cores (bench/one-stream-ab.ts, 12–16 alternating streams): RTF
    // 0.192 → 0.173, level with the code before the footprint work (0.161 vs 0.163); the 8-stream peak in
    // 1 GiB (one worker, bench/memory-limit.ts) 762 → 794 MiB.
    const { session, manifest } = await openMimiDecoderSession(runtime, message.path, message.manifest, message.config, { memoryArena: true });
    decoder = new MimiDecoder(session, manifest, message.config);
    reply({ kind: "ready" });
  } catch (error) {
    reply({ kind: "failed", message: (error as Error).message });
  }
}

async function decode(message: Extract<DecoderWorkerRequest, { kind: "decode" }>): Promise<void> {
  if (closing) return;
  try {
    if (!decoder) throw new Error("the decoder worker has no open decoder");
    // emptyState on the main thread only allocates an id; the state itself is made here on first use.
    const state = states.get(message.stateId) ?? (message.fresh ? decoder.emptyState() : undefined);
    if (!state) throw new Error(`decoder state ${message.stateId} is unknown or was released`);
    const reuseState = message.nextStateId === message.stateId;
    const result = await decoder.decode(state, message.latents, { reuseState });
    states.set(message.nextStateId, result.state);
    reply({ kind: "decoded", requestId: message.requestId, audio: result.audio }, [result.audio.buffer as ArrayBuffer]);
    // The state this decode replaced in place is dead now; one kept under its own id dies at its release.
    if (reuseState && result.state.tensors !== state.tensors) garbage.dropped(stateBytes(state));
  } catch (error) {
    reply({ kind: "error", requestId: message.requestId, message: (error as Error).message });
  }
}

function release(stateId: number): void {
  const state = states.get(stateId);
  if (state === undefined) return;
  states.delete(stateId);
  garbage.dropped(stateBytes(state));
}

/**
 * Exits once no run is in progress. Terminating the thread in the middle of one is not safe: onnxruntime-node
 * completes it on its own thread and calls back into a JavaScript environment that is gone, which aborts
 * the whole process.
 */
async function close(): Promise<void> {
  states.clear();
  await decoder?.close().catch(() => undefined);
  port.close();
}
