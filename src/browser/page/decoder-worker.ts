/**
 * The Mimi decoder's worker in the page (`/playground/decoder.js`): the server's decoder worker
 * (models/pocket/decoder/worker.ts), which the page engine starts as the server starts it, so decoding
 * overlaps sampling on another core. Its first message says where the model's files are; it mounts them
 * (read from the cache the engine filled) and then runs the decoder worker, which takes every later message.
 */
import { parentPort } from "./platform/worker-threads.ts";
import { mountFiles } from "./platform/fs.ts";
import { ModelFiles, type ListedFile } from "./model-files.ts";
import { configureOnnxRuntime } from "../../onnx/runtime.ts";

/** What the engine worker sends first (engine-worker.ts, spawnDecoderWorker). */
export interface DecoderWorkerMount {
  kind: "mount";
  root: string;
  base: string;
  headers: Record<string, string>;
  listing: ListedFile[];
  wasmPaths: string;
}

if (!parentPort) throw new Error("decoder-worker.ts runs as a page's worker");
parentPort.once("message", (message) => {
  const mount = message as DecoderWorkerMount;
  const files = new ModelFiles(mount.listing, { base: mount.base, headers: mount.headers, source: "server" });
  void files.mountable().then(async (entries) => {
    mountFiles(mount.root, entries);
    configureOnnxRuntime({ wasmPaths: mount.wasmPaths });
    // Its messages ("open", then decodes) waited in parentPort's queue until now.
    await import("../../models/pocket/decoder/worker.ts");
  });
});
