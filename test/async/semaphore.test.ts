import { describe, expect, test } from "bun:test";
import { Semaphore } from "../../src/async/semaphore.ts";

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((res) => (resolve = res));
  return { promise, resolve };
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("Semaphore", () => {
  test("never lets more than `permits` tasks run at once, and runs them all", async () => {
    const semaphore = new Semaphore(3);
    let running = 0;
    let mostRunning = 0;
    const gates = Array.from({ length: 10 }, () => deferred());
    const finished = gates.map((gate, index) =>
      semaphore.run(async () => {
        running++;
        mostRunning = Math.max(mostRunning, running);
        await gate.promise;
        running--;
        return index;
      }),
    );
    await settle();
    expect(running).toBe(3);
    for (const gate of gates) {
      gate.resolve();
      await settle();
      expect(running).toBeLessThanOrEqual(3);
    }
    expect(await Promise.all(finished)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(mostRunning).toBe(3);
  });

  test("waiters get permits in arrival order", async () => {
    const semaphore = new Semaphore(1);
    const releaseFirst = await semaphore.acquire();
    const order: number[] = [];
    const waiters = [1, 2, 3].map((index) =>
      semaphore.acquire().then((release) => {
        order.push(index);
        release();
      }),
    );
    await settle();
    expect(order).toEqual([]);
    releaseFirst();
    await Promise.all(waiters);
    expect(order).toEqual([1, 2, 3]);
  });

  test("a release called twice gives back one permit", async () => {
    const semaphore = new Semaphore(1);
    const release = await semaphore.acquire();
    release();
    release();
    const held = await semaphore.acquire();
    let secondGranted = false;
    void semaphore.acquire().then(() => (secondGranted = true));
    await settle();
    expect(secondGranted).toBe(false);
    held();
    await settle();
    expect(secondGranted).toBe(true);
  });

  test("run gives the permit back when its task fails", async () => {
    const semaphore = new Semaphore(1);
    await expect(semaphore.run(async () => Promise.reject(new Error("task failed")))).rejects.toThrow("task failed");
    expect(await semaphore.run(async () => "next")).toBe("next");
  });

  test("refuses a permit count that is not a positive whole number", () => {
    for (const permits of [0, -1, 1.5, Number.NaN]) expect(() => new Semaphore(permits)).toThrow(RangeError);
  });
});
