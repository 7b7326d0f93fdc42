/** The composition of the engine's options (src/engine/host.ts): the idle memory release's timing. */
import { describe, expect, test } from "bun:test";
import { engineOptionsOf, idleMemoryRelease } from "../../src/engine/host.ts";

describe("the idle memory release", () => {
  test("runs once, delayMs after the last of a run of idle calls, and again after a later one", async () => {
    let releases = 0;
    const onIdle = idleMemoryRelease(40, () => releases++);
    onIdle();
    await Bun.sleep(15);
    onIdle();
    await Bun.sleep(15);
    onIdle();
    expect(releases).toBe(0);
    await Bun.sleep(80);
    expect(releases).toBe(1);
    onIdle();
    await Bun.sleep(80);
    expect(releases).toBe(2);
  });

  test("every configuration's engine gets one", () => {
    expect(typeof engineOptionsOf({ maxStreams: 2, maxQueue: 2 }).onIdle).toBe("function");
  });
});
