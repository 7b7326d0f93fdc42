/** The composition of the engine's options (src/engine/host.ts): the idle memory release's timing. */
import { describe, expect, test } from "bun:test";
import { engineOptionsOf, idleMemoryRelease } from "../../src/engine/host.ts";
import { eventually } from "../support/eventually.ts";

describe("the idle memory release", () => {
  test("runs once, delayMs after the last of a run of idle calls, and again after a later one", async () => {
    let releases = 0;
    // Wide margins (calls 10 ms apart against a 300 ms delay): a loaded machine's stalls must not fire it early.
    const onIdle = idleMemoryRelease(300, () => releases++);
    onIdle();
    await Bun.sleep(10);
    onIdle();
    await Bun.sleep(10);
    onIdle();
    expect(releases).toBe(0);
    await eventually("the first release", () => releases === 1, 3000);
    await Bun.sleep(350);
    expect(releases).toBe(1);
    onIdle();
    await eventually("the second release", () => releases === 2, 3000);
  });

  test("every configuration's engine gets one", () => {
    expect(typeof engineOptionsOf({ maxStreams: 2, maxQueue: 2 }).onIdle).toBe("function");
  });
});
