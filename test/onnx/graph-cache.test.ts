import { afterEach, beforeEach, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GraphCache } from "../../src/onnx/graph-cache.ts";

let dir: string;
let source: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "voxedge-graph-cache-"));
  source = join(dir, "graph.onnx");
  writeFileSync(source, "source graph");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

test("a miss makes the graph and keeps it as a file with its meta; a hit loads that file without making it again", async () => {
  const cache = new GraphCache(join(dir, "cache"));
  let made = 0;
  const make = async () => (made++, { model: new TextEncoder().encode("rewritten"), meta: { plans: [1, 2] } });
  const first = await cache.prepare(source, "v", make);
  expect(first.model).toBeUndefined();
  expect(first.path).not.toBe(source);
  expect(await Bun.file(first.path).text()).toBe("rewritten");
  expect(first.meta).toEqual({ plans: [1, 2] });
  const second = await cache.prepare(source, "v", make);
  expect(made).toBe(1);
  expect(second).toEqual(first);
  // Another variant of the same source is another file.
  expect((await cache.prepare(source, "w", make)).path).not.toBe(first.path);
});

test("'no change needed' is cached too; an edited source is made again", async () => {
  const cache = new GraphCache(join(dir, "cache"));
  let made = 0;
  expect(await cache.prepare(source, "v", async () => (made++, null))).toEqual({ path: source, meta: null });
  expect(await cache.prepare(source, "v", async () => (made++, null))).toEqual({ path: source, meta: null });
  expect(made).toBe(1);
  utimesSync(source, new Date(), new Date(Date.now() + 5000));
  await cache.prepare(source, "v", async () => (made++, null));
  expect(made).toBe(2);
});

test("a cache folder that cannot be written hands the bytes back, and no cache at all does the same", async () => {
  const blocked = join(dir, "a-file");
  writeFileSync(blocked, "");
  const model = new TextEncoder().encode("rewritten");
  const unwritable = await new GraphCache(join(blocked, "cache")).prepare(source, "v", async () => ({ model, meta: 1 }));
  expect(unwritable).toEqual({ path: source, model, meta: 1 });
  expect(await new GraphCache(undefined).prepare(source, "v", async () => ({ model, meta: 1 }))).toEqual({ path: source, model, meta: 1 });
  expect(readdirSync(dir).sort()).toEqual(["a-file", "graph.onnx"]);
});

test("a model file cut short (a crash after its unsynced write) is made again, not handed to the runtime", async () => {
  const cache = new GraphCache(join(dir, "cache"));
  let made = 0;
  const make = async () => (made++, { model: new TextEncoder().encode("rewritten graph"), meta: {} });
  const first = await cache.prepare(source, "v", make);
  writeFileSync(first.path, "rewri");
  const second = await cache.prepare(source, "v", make);
  expect(made).toBe(2);
  expect(await Bun.file(second.path).text()).toBe("rewritten graph");
  // No temporary files are left beside the cache entries.
  expect(readdirSync(join(dir, "cache")).filter((name) => !name.endsWith(".onnx") && !name.endsWith(".json"))).toEqual([]);
});
