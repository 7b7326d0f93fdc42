import { describe, expect, test } from "bun:test";
import { capStream, readCapped, type StreamCap } from "../../src/async/capped-stream.ts";

/** A source that hands out `chunks` one per pull, then stalls (or ends, with `end`), recording what was asked of it. */
function source(chunks: Uint8Array[], options: { end?: boolean; failWith?: Error } = {}) {
  const record = { pulls: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        record.pulls++;
        const next = chunks.shift();
        if (next) return controller.enqueue(next);
        if (options.failWith) return controller.error(options.failWith);
        if (options.end) return controller.close();
        return new Promise<void>(() => {});
      },
      cancel() {
        record.cancelled = true;
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, record };
}

const bytes = (length: number, value = 1) => new Uint8Array(length).fill(value);
const tooLarge = () => new Error("too large");
const cap = (over: Partial<StreamCap> = {}): StreamCap => ({ maxBytes: 10, tooLarge, ...over });

describe("capStream / readCapped", () => {
  test("reads a source within the cap to its end, up to exactly maxBytes", async () => {
    const { stream } = source([bytes(4, 1), bytes(6, 2)], { end: true });
    expect(Array.from(await readCapped(stream, cap()))).toEqual([1, 1, 1, 1, 2, 2, 2, 2, 2, 2]);
    expect(await readCapped(null, cap())).toEqual(new Uint8Array());
  });

  test("past maxBytes the read ends with tooLarge(), the source is cancelled and nothing more is read", async () => {
    const { stream, record } = source([bytes(6), bytes(6), bytes(6)], { end: true });
    await expect(readCapped(stream, cap())).rejects.toThrow("too large");
    expect(record.cancelled).toBe(true);
    expect(record.pulls).toBe(2);
  });

  test("pulls only what the consumer asks for: no read-ahead", async () => {
    const { stream, record } = source([bytes(1), bytes(1), bytes(1)], { end: true });
    const reader = capStream(stream, cap()).getReader();
    await reader.read();
    expect(record.pulls).toBe(1);
  });

  test("a source that stalls past the deadline ends with the deadline's error and is cancelled", async () => {
    const { stream, record } = source([bytes(2)]);
    const deadline = { timeoutMs: 20, error: () => new Error("too slow") };
    await expect(readCapped(stream, cap({ deadline }))).rejects.toThrow("too slow");
    expect(record.cancelled).toBe(true);
  });

  test("an abort ends a stalled read with the signal's reason and cancels the source", async () => {
    const { stream, record } = source([bytes(2)]);
    const controller = new AbortController();
    const reading = readCapped(stream, cap({ signal: controller.signal }));
    await Bun.sleep(0);
    controller.abort(new Error("deadline of the whole fetch"));
    await expect(reading).rejects.toThrow("deadline of the whole fetch");
    expect(record.cancelled).toBe(true);
  });

  test("a signal that aborted before the read began ends it at once, without reading", async () => {
    const { stream, record } = source([bytes(2)]);
    const reading = readCapped(stream, cap({ signal: AbortSignal.abort(new Error("already gone")) }));
    await expect(reading).rejects.toThrow("already gone");
    expect(record.pulls).toBe(0);
    expect(record.cancelled).toBe(true);
  });

  test("a failing source ends the read with its own error, or with sourceFailed's", async () => {
    const hungUp = new Error("connection reset");
    await expect(readCapped(source([bytes(1)], { failWith: hungUp }).stream, cap())).rejects.toBe(hungUp);
    const mapped = cap({ sourceFailed: (error) => new Error(`client left: ${(error as Error).message}`) });
    await expect(readCapped(source([bytes(1)], { failWith: hungUp }).stream, mapped)).rejects.toThrow("client left: connection reset");
  });

  test("a consumer that cancels cancels the source", async () => {
    const { stream, record } = source([bytes(1)]);
    await capStream(stream, cap()).cancel();
    expect(record.cancelled).toBe(true);
  });
});
