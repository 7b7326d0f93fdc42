import { describe, expect, test } from "bun:test";
import { SEND_HIGH_WATER_BYTES, waitForDrain } from "../../src/async/drain.ts";

describe("waitForDrain", () => {
  test("returns at once while the unsent bytes are at or under the mark", async () => {
    expect(await waitForDrain({ bufferedBytes: () => SEND_HIGH_WATER_BYTES, closed: () => false, stallTimeoutMs: 1000 })).toBe("drained");
  });

  test("waits while the client reads, and returns once it is under the mark", async () => {
    let unsent = SEND_HIGH_WATER_BYTES + 64 * 1024;
    let looks = 0;
    const outcome = await waitForDrain({
      bufferedBytes: () => {
        looks++;
        // The client takes 8 KiB between looks: slow, but never stalled.
        unsent -= 8 * 1024;
        return unsent;
      },
      closed: () => false,
      stallTimeoutMs: 200,
    });
    expect(outcome).toBe("drained");
    expect(looks).toBeGreaterThan(5);
  });

  test("a client that takes nothing is stalled after the timeout", async () => {
    expect(await waitForDrain({ bufferedBytes: () => SEND_HIGH_WATER_BYTES + 1, closed: () => false, stallTimeoutMs: 30 })).toBe("stalled");
  });

  test("a connection that closes while waiting ends the wait", async () => {
    let closed = false;
    setTimeout(() => (closed = true), 20);
    expect(await waitForDrain({ bufferedBytes: () => SEND_HIGH_WATER_BYTES + 1, closed: () => closed, stallTimeoutMs: 60_000 })).toBe("closed");
  });
});
