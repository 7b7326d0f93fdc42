/**
 * glibc's allocator, told to give big buffers back. onnxruntime allocates its tensors with malloc (the CPU
 * arena is off, see onnx/runtime.ts), and glibc raises its mmap threshold each time a large block is freed,
 * up to 32 MiB: after the first runs, a stream's KV cache and every decode's buffers come from the heap, whose
 * freed holes stay resident. A fixed threshold of 4 MiB keeps blocks that large in their own mappings, which
 * return to the kernel when freed. Real-size int8 bundle, 8 streams on 2 cores (bench/memory-limit.ts):
 * peak RSS 960–1059 → 778 MiB. Smaller thresholds (128 KiB) cut a little more but slow every step
 * (one stream's RTF +30 %), since each mapping is a page-fault storm.
 *
 * Bun only (bun:ffi), Linux glibc only: elsewhere (musl, macOS, Deno) this does nothing, and says so.
 */
import { isBun } from "../runtime/detect.ts";

const M_TRIM_THRESHOLD = -1;
const M_MMAP_THRESHOLD = -3;
export const MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024;
/**
 * A fixed mmap threshold leaves the trim threshold at its 128 KiB default (glibc raises both together only
 * while the threshold is dynamic), and the heap's top is then given back and taken again on every step:
 * one stream's RTF 0.18 → 0.27. Kept free up to this much, the heap stops churning.
 */
const TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024;

interface Libc {
  mallopt(parameter: number, value: number): number;
  malloc_trim(pad: number): number;
}

let libc: Libc | null | undefined;

async function loadLibc(): Promise<Libc | null> {
  if (libc !== undefined) return libc;
  libc = null;
  if (!isBun() || process.platform !== "linux") return libc;
  try {
    const { dlopen, FFIType } = await import("bun:ffi");
    const { symbols } = dlopen("libc.so.6", {
      mallopt: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
      malloc_trim: { args: [FFIType.u64], returns: FFIType.i32 },
    });
    libc = { mallopt: (parameter, value) => symbols.mallopt(parameter, value) as number, malloc_trim: (pad) => symbols.malloc_trim(pad) as number };
  } catch {
    // Not glibc (musl has no mallopt), or no FFI.
  }
  return libc;
}

/** Sets the fixed mmap threshold; true when the allocator took it. Call before the model loads. */
export async function tuneAllocator(): Promise<boolean> {
  const c = await loadLibc();
  return c !== null && c.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) === 1 && c.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) === 1;
}

/** Gives the heap's free memory back to the kernel (after the load's transient buffers are freed). */
export async function releaseFreeMemory(): Promise<void> {
  (await loadLibc())?.malloc_trim(0);
}

