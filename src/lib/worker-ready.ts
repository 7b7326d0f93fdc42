/**
 * The start of a worker thread whose first message says whether it is ready (`{kind: "ready"}`) or why not
 * (`{kind: "failed", message}`): resolves on ready; otherwise terminates the worker and rejects, naming it,
 * on another first message, on an error event, or when none comes within `timeoutMs`.
 */
import type { Worker } from "node:worker_threads";

export async function awaitWorkerReady(worker: Worker, name: string, timeoutMs: number): Promise<void> {
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the ${name} worker did not start in time`)), timeoutMs);
      worker.once("message", (reply: { kind: string; message?: string }) => {
        clearTimeout(timer);
        if (reply.kind === "ready") resolve();
        else reject(new Error(reply.kind === "failed" ? `the ${name} worker could not load: ${reply.message}` : `unexpected ${reply.kind} before ready`));
      });
      worker.once("error", (error: Error) => {
        clearTimeout(timer);
        reject(new Error(`the ${name} worker failed to start: ${error.message}`));
      });
    });
  } catch (error) {
    await worker.terminate();
    throw error;
  }
}
