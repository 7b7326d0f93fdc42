/**
 * The per-stream table the attention kernels read: for batch row n, the KV-cache slot its ring lives in
 * and its offset (positions that stream has already run through the transformer; RoPE position of its
 * next step). Rewritten with `queue.writeBuffer` before each submission, so one prepared set of
 * dispatches serves every step of every mix of streams.
 */
import { storageBuffer } from "./kernel.ts";

export interface StreamPosition {
  /** Which slot of the KV-cache buffers holds this stream's ring. */
  slot: number;
  /** Positions already decoded by this stream (16 per latent frame in the Mimi decoder). */
  offset: number;
}

export function streamTableWords(streams: readonly StreamPosition[], slots: number): Uint32Array {
  const words = new Uint32Array(streams.length * 2);
  const seen = new Set<number>();
  streams.forEach(({ slot, offset }, row) => {
    if (!Number.isInteger(slot) || slot < 0 || slot >= slots) throw new Error(`stream ${row}: cache slot ${slot} is outside 0..${slots - 1}`);
    // Two rows writing one ring in the same call would race in store_kv.
    if (seen.has(slot)) throw new Error(`stream ${row}: cache slot ${slot} is used by two streams of one batch`);
    seen.add(slot);
    if (!Number.isInteger(offset) || offset < 0 || offset > 0xffffffff) throw new Error(`stream ${row}: offset ${offset} is not a u32`);
    words[2 * row] = slot;
    words[2 * row + 1] = offset;
  });
  return words;
}

export function createStreamTable(device: GPUDevice, capacity: number): GPUBuffer {
  return storageBuffer(device, capacity * 8, "stream table");
}

export function writeStreamTable(device: GPUDevice, table: GPUBuffer, streams: readonly StreamPosition[], slots: number): void {
  if (streams.length * 8 > table.size) throw new Error(`stream table holds ${table.size / 8} streams, not ${streams.length}`);
  device.queue.writeBuffer(table, 0, streamTableWords(streams, slots));
}
