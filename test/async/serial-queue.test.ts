import { describe, expect, test } from "bun:test";
import { SerialQueue } from "../../src/async/serial-queue.ts";

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets every queued microtask and promise reaction run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("SerialQueue", () => {
  test("runs tasks one at a time, in the order given", async () => {
    const queue = new SerialQueue();
    const events: string[] = [];
    const gates = [deferred(), deferred(), deferred()];
    const results = gates.map((gate, index) =>
      queue.run(async () => {
        events.push(`start ${index}`);
        await gate.promise;
        events.push(`end ${index}`);
        return index;
      }),
    );
    await settle();
    expect(events).toEqual(["start 0"]);
    gates[2]!.resolve();
    gates[1]!.resolve();
    await settle();
    expect(events).toEqual(["start 0"]);
    gates[0]!.resolve();
    expect(await Promise.all(results)).toEqual([0, 1, 2]);
    expect(events).toEqual(["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"]);
  });

  test("a failed task rejects only its own caller; the next one runs", async () => {
    const queue = new SerialQueue();
    const failing = queue.run(async () => {
      throw new Error("first failed");
    });
    const next = queue.run(async () => "second ran");
    await expect(failing).rejects.toThrow("first failed");
    expect(await next).toBe("second ran");
  });

  test("a task that throws synchronously rejects its promise instead of throwing from run", async () => {
    const queue = new SerialQueue();
    let returned: Promise<never> | undefined;
    expect(() => {
      returned = queue.run(() => {
        throw new Error("thrown synchronously");
      });
    }).not.toThrow();
    await expect(returned!).rejects.toThrow("thrown synchronously");
    expect(await queue.run(() => 42)).toBe(42);
  });

  test("a task never starts inside the caller's stack, even on an idle queue", async () => {
    const queue = new SerialQueue();
    let started = false;
    const result = queue.run(() => {
      started = true;
    });
    expect(started).toBe(false);
    await result;
    expect(started).toBe(true);
  });

  test("pendingCount counts tasks not yet settled; idle waits for all of them, failures included", async () => {
    const queue = new SerialQueue();
    const gate = deferred();
    const first = queue.run(() => gate.promise);
    const second = queue.run(async () => {
      throw new Error("second failed");
    });
    second.catch(() => {});
    expect(queue.pendingCount).toBe(2);
    let idle = false;
    const idled = queue.idle().then(() => (idle = true));
    await settle();
    expect(idle).toBe(false);
    gate.resolve();
    await first;
    await idled;
    expect(idle).toBe(true);
    expect(queue.pendingCount).toBe(0);
  });
});
