/** Dropped output tensors are collected once their bytes pass the threshold, not before, and the count starts again. */
import { expect, test } from "bun:test";
import { OutputGarbage } from "../../src/onnx/output-garbage.ts";

test("a collection once the dropped bytes reach the threshold, then counting starts again", () => {
  let collections = 0;
  const garbage = new OutputGarbage(16, () => collections++);
  garbage.dropped(8);
  garbage.dropped(7);
  expect(collections).toBe(0);
  garbage.dropped(1);
  expect(collections).toBe(1);
  for (let index = 0; index < 5; index++) garbage.dropped(8);
  expect(collections).toBe(3);
  expect(garbage.collections).toBe(3);
});

test("under Bun the collector is Bun's own full collection, which frees an output tensor's memory", () => {
  const garbage = new OutputGarbage(1);
  garbage.dropped(1);
  expect(garbage.collections).toBe(1);
});

test("without a collector (a runtime that exposes none) dropping is a no-op", () => {
  const garbage = new OutputGarbage(1, null);
  garbage.dropped(1_000_000);
  expect(garbage.collections).toBe(0);
});
