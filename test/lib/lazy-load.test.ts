import { describe, expect, test } from "bun:test";
import { lazyLoad } from "../../src/lib/lazy-load.ts";

describe("lazyLoad", () => {
  test("loads nothing until first called, then once for every caller, concurrent ones included", async () => {
    let loads = 0;
    const load = lazyLoad(async () => ({ module: ++loads }));
    expect(loads).toBe(0);
    const [first, second] = await Promise.all([load(), load()]);
    expect(await load()).toBe(first);
    expect(second).toBe(first);
    expect(loads).toBe(1);
  });

  test("a failed load is forgotten: the next call tries again, and its success is kept", async () => {
    let attempts = 0;
    const load = lazyLoad(async () => {
      attempts++;
      if (attempts === 1) throw new Error("wasm compile ran out of memory");
      return "module";
    });
    const concurrent = [load(), load()];
    for (const call of concurrent) await expect(call).rejects.toThrow("wasm compile ran out of memory");
    expect(attempts).toBe(1);
    expect(await load()).toBe("module");
    expect(await load()).toBe("module");
    expect(attempts).toBe(2);
  });

  test("a caller that retries from its own catch starts a fresh load", async () => {
    let attempts = 0;
    const load = lazyLoad(async () => {
      if (++attempts === 1) throw new Error("file briefly unreadable");
      return attempts;
    });
    expect(await load().catch(() => load())).toBe(2);
  });

  test("a loader that throws synchronously rejects, and is retried too", async () => {
    let attempts = 0;
    const load = lazyLoad((): Promise<string> => {
      if (++attempts === 1) throw new Error("thrown before any promise");
      return Promise.resolve("loaded");
    });
    await expect(load()).rejects.toThrow("thrown before any promise");
    expect(await load()).toBe("loaded");
  });
});
