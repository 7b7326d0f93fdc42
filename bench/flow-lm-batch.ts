/**
 * FlowLM AR step cost, one stream per call (the published graph, windowed caches, as the server ran it
 * before) against B streams in one call (the batched step graph over cache slots), at B = 1, 4, 8, 16.
 *   bun bench/flow-lm-batch.ts [--model <bundle-dir>] [--precision int8|fp32] [--positions 300] [--steps 20]
 * Each stream is prefilled to about `--positions` positions (streams spread ±25 % around it, as
 * concurrent streams are), then `--steps` AR steps are timed; the table gives ms per tick (all B streams
 * one step) and ms per stream-step. Without --model it runs the tiny golden fixture (harness check only).
 */
import { parseArgs } from "node:util";
import { loadPocketBundle } from "../src/models/pocket/bundle/load.ts";
import { closePocketSessions, openPocketSessions } from "../src/models/pocket/sessions.ts";
import { createPocketStages } from "../src/models/pocket/pipeline.ts";
import type { FlowLmState } from "../src/models/pocket/stages/state.ts";
import { fixtureBundle } from "../test/models/pocket/bundle-fixture.ts";

const { values } = parseArgs({ options: { model: { type: "string" }, precision: { type: "string", default: "int8" }, positions: { type: "string", default: "300" }, steps: { type: "string", default: "20" }, batches: { type: "string", default: "1,4,8,16" } } });
const bundleDir = values.model ?? fixtureBundle();
const bundle = await loadPocketBundle(bundleDir, { precision: values.precision === "fp32" ? "fp32" : "int8" });
const sessions = await openPocketSessions(bundle);
const stages = await createPocketStages(bundle, sessions);
const slots = stages.flowLmSlots;
if (!slots) throw new Error(`no batched step: ${stages.flowLmSlotsUnavailable}`);
const { flowLm } = stages;
const { latentDim, conditioningDim } = flowLm.config;
const steps = Number(values.steps);
const positions = Number(values.positions);

async function prefilled(rows: number, seed: number): Promise<FlowLmState> {
  let state = flowLm.emptyState();
  for (let done = 0; done < rows; done += 128) {
    const count = Math.min(128, rows - done);
    const data = Float32Array.from({ length: count * conditioningDim }, (_, index) => Math.sin((index + done * conditioningDim) * 0.013 + seed) * 0.5);
    state = await flowLm.prefill(state, { data, dims: [1, count, conditioningDim] });
  }
  return state;
}
const latent = Float32Array.from({ length: latentDim }, (_, index) => Math.cos(index * 0.7));

console.log(`${bundle.name}, ${bundle.graphs.flowLmMain.precision}, ${sessions.provider}; streams at ~${positions} positions, ${steps} steps`);
console.log("| streams | one per call: ms / tick | batched: ms / tick | one per call: ms / stream-step | batched: ms / stream-step | speed-up |");
console.log("|---|---|---|---|---|---|");
for (const batch of values.batches!.split(",").map(Number)) {
  const states = await Promise.all(Array.from({ length: batch }, (_, index) => prefilled(Math.round(positions * (0.75 + (0.5 * index) / Math.max(1, batch - 1))), index)));
  // One stream per call: each state steps in place, as the runner did.
  const own = states.map((state) => ({ ...state, tensors: state.tensors.map((tensor) => new flowLm.Tensor(tensor.type as "float32", (tensor.data as Float32Array).slice(), tensor.dims)) }));
  await flowLm.step(own[0]!, latent);
  let started = performance.now();
  for (let step = 0; step < steps; step++) {
    for (let index = 0; index < own.length; index++) own[index] = (await flowLm.step(own[index]!, latent, { reuseState: true })).state as (typeof own)[number];
  }
  const perCall = (performance.now() - started) / steps;

  const held = states.map((state) => slots.admit(state));
  await slots.step(held.map((slot) => ({ slot, latent })));
  started = performance.now();
  for (let step = 0; step < steps; step++) await slots.step(held.map((slot) => ({ slot, latent })));
  const batched = (performance.now() - started) / steps;
  for (const slot of held) slots.release(slot);
  console.log(`| ${batch} | ${perCall.toFixed(1)} | ${batched.toFixed(1)} | ${(perCall / batch).toFixed(2)} | ${(batched / batch).toFixed(2)} | ${(perCall / batched).toFixed(2)}× |`);
}
await closePocketSessions(sessions);
