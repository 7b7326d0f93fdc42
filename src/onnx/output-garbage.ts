/**
 * onnxruntime's output tensors hold native memory that the JavaScript engine's collector does not see: a
 * loop that drops an 8 MB state tensor per call looks, to the collector, like a few small objects, so it
 * waits, and the process grows by hundreds of megabytes of dead tensors before it collects. This counts
 * the bytes a caller drops and asks for a collection once they pass a threshold, which bounds that growth
 * at the cost of one collection per `thresholdBytes` dropped.
 */
import { fullGarbageCollector } from "../runtime/detect.ts";

export class OutputGarbage {
  #dropped = 0;
  collections = 0;

  constructor(
    readonly thresholdBytes: number,
    /** null: the runtime offers no way to collect. */
    private readonly collect: (() => void) | null = fullGarbageCollector(),
  ) {}

  /** Call with the size of tensors no longer referenced. */
  dropped(bytes: number): void {
    if (this.collect === null) return;
    this.#dropped += bytes;
    if (this.#dropped < this.thresholdBytes) return;
    this.#dropped = 0;
    this.collections++;
    this.collect();
  }
}
