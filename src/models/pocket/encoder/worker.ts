/**
 * The Mimi encoder in a worker thread (worker-client.ts starts it). onnxruntime-node runs a session on the
 * thread that calls it: in the main thread, encoding a reference clip (a second of work or more) would hold
 * up every playing stream and every other request, /health included, for as long.
 */
import { readlinkSync } from "node:fs";
import { setPriority } from "node:os";
import { parentPort } from "node:worker_threads";
import { SerialQueue } from "../../../async/serial-queue.ts";
import { configureOnnxRuntime, loadOnnxRuntime, type OnnxSession } from "../../../onnx/runtime.ts";
import type { EncoderWorkerReply, EncoderWorkerRequest } from "./protocol.ts";

if (!parentPort) throw new Error("encoder/worker.ts runs as a worker thread (worker-client.ts starts it)");
const port = parentPort;
const reply = (message: EncoderWorkerReply, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);

let session: OnnxSession | undefined;
const messages = new SerialQueue();
let closing = false;

port.on("message", (message: EncoderWorkerRequest) => {
  if (message.kind === "close") {
    closing = true;
    void messages.run(async () => {
      await session?.release().catch(() => undefined);
      port.close();
    });
    return;
  }
  void messages.run(() => (message.kind === "open" ? open(message) : encode(message))).catch(() => undefined);
});

/**
 * The lowest scheduling priority for this thread (and the onnxruntime threads it starts): an encode then runs
 * on whatever CPU the playing streams leave, instead of taking a core from them. Linux only: setpriority on a
 * thread id changes that one thread; elsewhere the encode runs at normal priority.
 */
function yieldToPlayingStreams(): void {
  try {
    const threadId = Number(readlinkSync("/proc/thread-self").split("/").pop());
    if (Number.isInteger(threadId) && threadId > 0) setPriority(threadId, 19);
  } catch {
    // No /proc/thread-self (not Linux), or not allowed: normal priority.
  }
}

async function open(message: Extract<EncoderWorkerRequest, { kind: "open" }>): Promise<void> {
  try {
    yieldToPlayingStreams();
    configureOnnxRuntime({ threads: message.threads });
    const runtime = await loadOnnxRuntime({ provider: message.provider });
    session = await runtime.createSession(message.path);
    reply({ kind: "ready" });
  } catch (error) {
    reply({ kind: "failed", message: (error as Error).message });
  }
}

async function encode(message: Extract<EncoderWorkerRequest, { kind: "encode" }>): Promise<void> {
  if (closing) return;
  try {
    if (!session) throw new Error("the encoder worker has no open session");
    const outputs = await session.run({ audio: new session.Tensor("float32", message.audio, [1, 1, message.audio.length]) });
    const latents = outputs[session.outputNames[0]!]!;
    const data = (latents.data as Float32Array).slice();
    reply({ kind: "encoded", requestId: message.requestId, data, dims: [...latents.dims] }, [data.buffer as ArrayBuffer]);
  } catch (error) {
    reply({ kind: "error", requestId: message.requestId, message: (error as Error).message });
  }
}
