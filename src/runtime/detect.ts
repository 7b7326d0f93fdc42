/**
 * Which JavaScript runtime runs this process, for the few places whose code must differ (the WebGPU binding,
 * glibc's allocator through bun:ffi, forcing a collection, bundling the page's engine). Serving is
 * runtime/serve.ts's; this only answers "which one". Every layer asks it, the shared modules (system/)
 * included, so runtime/ sits under them all and imports nothing of ours but lib/ (.dependency-cruiser.cjs).
 */

export function isBun(): boolean {
  return "Bun" in globalThis;
}

export function isDeno(): boolean {
  return "Deno" in globalThis;
}

/**
 * The runtime's synchronous full collection: Bun's (the one that frees native memory held by dropped
 * objects, such as onnxruntime's output tensors), Node's `gc` when exposed (--expose-gc); null where there
 * is none.
 */
export function fullGarbageCollector(): (() => void) | null {
  const bun = (globalThis as { Bun?: { gc(force: boolean): void } }).Bun;
  if (bun) return () => bun.gc(true);
  const gc = (globalThis as { gc?: () => void }).gc;
  return typeof gc === "function" ? gc : null;
}

/** Frees what the JS heap dropped, now, where the runtime lets us (see fullGarbageCollector); elsewhere nothing. */
export function collectGarbage(): void {
  fullGarbageCollector()?.();
}

/** Bun's bundler (Bun.build), which makes the page's workers (browser/build.ts); null elsewhere: Deno has none built in. */
export function bunBundler(): typeof Bun.build | null {
  const bun = (globalThis as { Bun?: typeof Bun }).Bun;
  return bun ? bun.build.bind(bun) : null;
}
