import { expect, test } from "bun:test";
import { releaseFreeMemory, tuneAllocator } from "../../src/system/allocator.ts";

const glibc = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header?.glibcVersionRuntime;

test("under Bun on Linux glibc the allocator takes the fixed mmap and trim thresholds, and a trim runs", async () => {
  if (process.platform !== "linux" || !glibc) throw new Error("this test needs Linux with glibc (the machines this project runs on)");
  expect(await tuneAllocator()).toBe(true);
  await releaseFreeMemory();
});
