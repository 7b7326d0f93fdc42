/**
 * The CPU Mimi decoder's cost per frame by frames per call: whether more rows per call (more frames of one
 * stream, or, equivalently for the convolutions and the transformer's MatMuls, more streams) make a frame
 * cheaper. Decodes `--frames` latents in calls of k, for each k, on a fresh state.
 *   bun bench/mimi-frames.ts [--model <bundle-dir>] [--precision int8|fp32] [--frames 64] [--calls 1,2,4,8,16]
 * Without --model it runs the tiny golden fixture (harness check only).
 */
import { parseArgs } from "node:util";
import { loadPocketBundle } from "../src/models/pocket/bundle/load.ts";
import { closePocketSessions, openPocketSessions } from "../src/models/pocket/sessions.ts";
import { createPocketStages } from "../src/models/pocket/pipeline.ts";
import { fixtureBundle } from "../test/models/pocket/bundle-fixture.ts";

const { values } = parseArgs({ options: { model: { type: "string" }, precision: { type: "string", default: "int8" }, frames: { type: "string", default: "64" }, calls: { type: "string", default: "1,2,4,8,16" } } });
const bundle = await loadPocketBundle(values.model ?? fixtureBundle(), { precision: values.precision === "fp32" ? "fp32" : "int8" });
const sessions = await openPocketSessions(bundle);
const { mimiDecoder } = await createPocketStages(bundle, sessions);
const { latentDim } = mimiDecoder.config;
const frames = Number(values.frames);
const latents = Float32Array.from({ length: frames * latentDim }, (_, index) => Math.sin(index * 0.37));

console.log(`${bundle.name}, mimi_decoder ${bundle.graphs.mimiDecoder.precision}, ${sessions.provider}, ${frames} frames a row`);
console.log("| frames per call | ms per call | ms per frame |");
console.log("|---|---|---|");
for (const perCall of values.calls!.split(",").map(Number)) {
  // One warm-up call at this size, so the runtime's buffers for it exist.
  await mimiDecoder.decode(mimiDecoder.emptyState(), latents.subarray(0, perCall * latentDim));
  let state = mimiDecoder.emptyState();
  const calls = Math.floor(frames / perCall);
  const started = performance.now();
  for (let call = 0; call < calls; call++) state = (await mimiDecoder.decode(state, latents.subarray(call * perCall * latentDim, (call + 1) * perCall * latentDim), { reuseState: true })).state;
  const elapsed = performance.now() - started;
  console.log(`| ${perCall} | ${(elapsed / calls).toFixed(1)} | ${(elapsed / (calls * perCall)).toFixed(2)} |`);
}
await closePocketSessions(sessions);
