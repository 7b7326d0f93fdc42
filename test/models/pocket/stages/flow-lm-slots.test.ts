/**
 * The batched FlowLM step (src/models/pocket/batched/, stages/flow-lm-slots.ts) on the tiny fixture, fp32
 * and int8 (the fixture's graph quantized as the published int8 bundles are, ../shared/tools/
 * quantize_int8.py): a stream's outputs are bit-identical alone and batched, whatever runs beside it and
 * however the batch changes between ticks; slots are reused after a stream ends; they follow the published
 * graph within 1e-5 over a whole chunk; a stream stops at 1000 positions; on both CPU providers. Needs python3 with onnx and
 * numpy for the int8 graph (Debian: apt-get install python3-onnx python3-numpy); without them the int8
 * tests fail.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { loadPocketBundle } from "../../../../src/models/pocket/bundle/load.ts";
import { createPocketStages, type PocketStages } from "../../../../src/models/pocket/pipeline.ts";
import { closePocketSessions, openPocketSessions, type PocketSessions } from "../../../../src/models/pocket/sessions.ts";
import { flowLmWeightsFromGraph } from "../../../../src/models/pocket/batched/flow-lm-weights.ts";
import { readOnnxGraphWeights } from "../../../../src/onnx/proto.ts";
import type { FlowLmSlot, FlowLmSlots } from "../../../../src/models/pocket/stages/flow-lm-slots.ts";
import type { FlowLmState } from "../../../../src/models/pocket/stages/state.ts";
import { randomArray, seededRandom } from "../../../gpu/support.ts";
import { fixtureBundle, POCKET_TINY_FIXTURE } from "../bundle-fixture.ts";
import { REPO_ROOT } from "../../../support/repo.ts";

const QUANTIZER = join(REPO_ROOT, "..", "shared", "tools", "quantize_int8.py");
const INSTALL_HINT = "apt-get install -y python3-onnx python3-numpy";

function python(): string {
  for (const candidate of [process.env.VOXEDGE_PYTHON, "/usr/bin/python3", "python3"].filter((entry): entry is string => !!entry)) {
    if (spawnSync(candidate, ["-c", "import onnx, numpy"], { encoding: "utf8" }).status === 0) return candidate;
  }
  throw new Error(`the int8 quantizer needs python3 with onnx and numpy; install them with: ${INSTALL_HINT} (or set VOXEDGE_PYTHON)`);
}

const bundleDir = fixtureBundle();
afterAll(() => rmSync(bundleDir, { recursive: true, force: true }));

const CONFIGURATIONS = [
  { precision: "fp32", provider: "onnxruntime-node" },
  { precision: "int8", provider: "onnxruntime-node" },
  { precision: "fp32", provider: "onnxruntime-web" },
  { precision: "int8", provider: "onnxruntime-web" },
] as const;

for (const { precision, provider } of CONFIGURATIONS) {
  describe(`batched FlowLM step, ${precision} on ${provider}`, () => {
    let sessions: PocketSessions;
    let stages: PocketStages;
    let slots: FlowLmSlots;

    beforeAll(async () => {
      if (precision === "int8" && !existsSync(join(bundleDir, "flow_lm_main_int8.onnx"))) {
        const quantized = join(bundleDir, "flow_lm_main_int8.onnx");
        const run = spawnSync(python(), [QUANTIZER, join(POCKET_TINY_FIXTURE, "flow_lm_main.onnx"), quantized], { encoding: "utf8" });
        if (run.status !== 0) throw new Error(`quantize_int8.py failed: ${run.stderr}`);
      }
      const bundle = await loadPocketBundle(bundleDir, { precision });
      expect(bundle.graphs.flowLmMain.precision).toBe(precision);
      sessions = await openPocketSessions(bundle, { provider });
      expect(sessions.provider).toBe(provider);
      stages = await createPocketStages(bundle, sessions);
      if (!stages.flowLmSlots) throw new Error(`no batched step: ${stages.flowLmSlotsUnavailable}`);
      slots = stages.flowLmSlots;
    });
    afterAll(async () => closePocketSessions(sessions));

    const width = () => stages.flowLm.config.conditioningDim;
    const latentDim = () => stages.flowLm.config.latentDim;
    /** A state prefilled by the published graph with `rows` seeded conditioning rows. */
    const prefilled = (rows: number, seed: number): Promise<FlowLmState> => stages.flowLm.prefill(stages.flowLm.emptyState(), { data: randomArray(seededRandom(seed), rows * width(), 1), dims: [1, rows, width()] });
    /** Latent k of stream `seed` (BOS at k = 0). */
    const latentOf = (seed: number, k: number) => (k === 0 ? null : randomArray(seededRandom(seed * 1000 + k), latentDim(), 1));
    type Trace = Array<{ conditioning: Float32Array; eosLogit: number }>;

    /** `steps` steps of one stream through the slots, alone. */
    async function alone(state: FlowLmState, seed: number, steps: number): Promise<Trace> {
      const slot = slots.admit(state);
      const trace: Trace = [];
      for (let k = 0; k < steps; k++) trace.push(...(await slots.step([{ slot, latent: latentOf(seed, k) }])));
      slots.release(slot);
      return trace;
    }

    test("the load-time check passed: within 1e-5 of the published graph, rows independent", () => {
      expect(stages.flowLmSlotsUnavailable).toBeUndefined();
      expect(slots.occupied).toBe(0);
      expect(slots.stateBytes).toBe(0);
    });

    test("a stream's outputs are bit-identical alone and in a crowd that grows and shrinks between ticks", async () => {
      const subject = await prefilled(9, 1);
      const expected = await alone(subject, 1, 40);
      const random = seededRandom(7);
      const slot = slots.admit(subject);
      const crowd: Array<{ slot: FlowLmSlot; seed: number; k: number }> = [];
      const sizes = new Set<number>();
      let nextSeed = 100;
      const actual: Trace = [];
      for (let k = 0; k < 40; k++) {
        // Others join (at other positions) and leave at random; some ticks they do not step at all.
        if (random() < 0.4 && crowd.length < 6) crowd.push({ slot: slots.admit(await prefilled(2 + Math.floor(random() * 90), nextSeed)), seed: nextSeed++, k: 0 });
        if (random() < 0.25 && crowd.length > 0) slots.release(crowd.splice(Math.floor(random() * crowd.length), 1)[0]!.slot);
        const stepping = crowd.filter(() => random() < 0.8);
        const rows = [...stepping.map((other) => ({ slot: other.slot, latent: latentOf(other.seed, other.k) })), { slot, latent: latentOf(1, k) }].sort(() => random() - 0.5);
        sizes.add(rows.length);
        const results = await slots.step(rows);
        for (const other of stepping) other.k++;
        actual.push(results[rows.findIndex((row) => row.slot === slot)]!);
      }
      for (const other of crowd) slots.release(other.slot);
      slots.release(slot);
      expect(sizes.size).toBeGreaterThan(2);
      expect(actual.map((step) => step.eosLogit)).toEqual(expected.map((step) => step.eosLogit));
      actual.forEach((step, k) => expect(step.conditioning).toEqual(expected[k]!.conditioning));
      expect(slots.occupied).toBe(0);
      expect(slots.stateBytes).toBe(0);
    });

    test("a slot given back is reused: the stream moved into it, and the one admitted after, step as they would alone", async () => {
      const [first, second, third] = await Promise.all([prefilled(5, 11), prefilled(40, 12), prefilled(20, 13)]);
      const expectedSecond = await alone(second, 12, 12);
      const expectedThird = await alone(third, 13, 6);
      const a = slots.admit(first);
      const b = slots.admit(second);
      const secondTrace: Trace = [];
      for (let k = 0; k < 6; k++) secondTrace.push((await slots.step([{ slot: a, latent: latentOf(11, k) }, { slot: b, latent: latentOf(12, k) }]))[1]!);
      // The first stream ends: the second moves into its slot, the third takes the second's.
      slots.release(a);
      const c = slots.admit(third);
      expect(slots.occupied).toBe(2);
      const thirdTrace: Trace = [];
      for (let k = 0; k < 6; k++) {
        const [fromSecond, fromThird] = await slots.step([{ slot: b, latent: latentOf(12, 6 + k) }, { slot: c, latent: latentOf(13, k) }]);
        secondTrace.push(fromSecond!);
        thirdTrace.push(fromThird!);
      }
      slots.release(b);
      slots.release(c);
      expect(secondTrace).toEqual(expectedSecond);
      expect(thirdTrace).toEqual(expectedThird);
    });

    test("over a whole chunk the batched step follows the published graph within 1e-5", async () => {
      const start = await prefilled(30, 21);
      let published = start;
      const slot = slots.admit(start);
      let worst = 0;
      for (let k = 0; k < 60; k++) {
        const latent = latentOf(21, k);
        const reference = await stages.flowLm.step(published, latent);
        published = reference.state;
        const [batched] = await slots.step([{ slot, latent }]);
        const scale = Math.max(...reference.conditioning.map(Math.abs));
        reference.conditioning.forEach((value, index) => (worst = Math.max(worst, Math.abs(value - batched!.conditioning[index]!) / scale)));
        worst = Math.max(worst, Math.abs(reference.eosLogit - batched!.eosLogit) / Math.max(1, Math.abs(reference.eosLogit)));
      }
      expect(slot.positions).toBe(90);
      slots.release(slot);
      // Not zero by construction: the new position's key and value enter outside the cache's MatMuls.
      expect(worst).toBeLessThan(1e-5);
    });

    test("a stream holds at most 1000 positions", async () => {
      const nearlyFull = await prefilled(999, 31);
      const slot = slots.admit(nearlyFull);
      await slots.step([{ slot, latent: null }]);
      expect(slot.positions).toBe(1000);
      await expect(slots.step([{ slot, latent: latentOf(31, 1) }])).rejects.toThrow(/1000/);
      slots.release(slot);
      await expect(slots.step([{ slot, latent: null }])).rejects.toThrow(/released/);
    });
  });
}

test("a graph without FlowLM's shape gives a reason instead of weights", async () => {
  const read = flowLmWeightsFromGraph(await readOnnxGraphWeights(join(POCKET_TINY_FIXTURE, "flow_lm_flow.onnx")), { layers: 2, heads: 4, headDim: 16, latentDim: 32 });
  expect("reason" in read && read.reason).toMatch(/linears|LayerNorm|bos_emb/);
});
