import { expect, test } from "bun:test";
import { fullGarbageCollector, isBun, isDeno } from "../../src/runtime/detect.ts";

/** Made in its own frame, so no stack slot of the test holds the target. */
function unreferencedTarget(): WeakRef<object> {
  return new WeakRef({ bytes: new Uint8Array(1 << 20) });
}

test("under Bun the runtime is Bun, not Deno, and the full collection frees what nothing holds", async () => {
  expect(isBun()).toBe(true);
  expect(isDeno()).toBe(false);
  const collect = fullGarbageCollector();
  expect(collect).toBeFunction();
  const ref = unreferencedTarget();
  // A WeakRef keeps its target until the job that made it ends.
  await new Promise((resolve) => setTimeout(resolve, 0));
  collect!();
  expect(ref.deref()).toBeUndefined();
});
