import { describe, expect, test } from "bun:test";
import { attention, attentionUniforms, createKvCache, kvCacheFloats } from "../../src/gpu/attention.ts";
import { storageBuffer } from "../../src/gpu/kernel.ts";
import { attentionReference, ringFromHistories, type StreamHistory } from "./reference/attention.ts";
import { streamTableWords } from "../../src/gpu/stream-table.ts";
import { brokenRule, expectClose, gpuForTests, randomArray, readFloat32, seededRandom, submitDispatches, wgslStructByteSize } from "./support.ts";

// f32 dot products of ≤ 256 terms and an online softmax against a float64 two-pass softmax.
const ATTENTION_TOLERANCE = { atol: 2e-6, rtol: 1e-5 };
// The ring holds copies of this call's keys and values.
const RING_TOLERANCE = { atol: 0, rtol: 0 };

function randomHistory(rand: () => number, positions: number, width: number): StreamHistory {
  const history: StreamHistory = { keys: [], values: [] };
  for (let p = 0; p < positions; p++) {
    history.keys.push(randomArray(rand, width));
    history.values.push(randomArray(rand, width));
  }
  return history;
}

interface Case {
  name: string;
  heads: number;
  headDim: number;
  context: number;
  /** Positions each stream has already seen (its history), and its cache slot. */
  streams: Array<{ offset: number; slot: number }>;
  slots: number;
  /** Steps of each successive call (all streams advance together). */
  calls: number[];
}

const cases: Case[] = [
  { name: "one stream, one step, fresh", heads: 1, headDim: 2, context: 250, streams: [{ offset: 0, slot: 0 }], slots: 1, calls: [1] },
  {
    name: "Mimi size, 3 streams at different offsets (one wrapped), permuted slots, two frames one at a time",
    heads: 8,
    headDim: 64,
    context: 250,
    streams: [
      { offset: 0, slot: 2 },
      { offset: 37, slot: 0 },
      { offset: 300, slot: 3 },
    ],
    slots: 4,
    calls: [16, 16],
  },
  { name: "tiny fixture size, a call longer than the window", heads: 2, headDim: 16, context: 250, streams: [{ offset: 10, slot: 1 }, { offset: 245, slot: 0 }], slots: 2, calls: [260, 3] },
  { name: "small window wrapping many times, odd sizes", heads: 3, headDim: 10, context: 5, streams: [{ offset: 3, slot: 0 }, { offset: 0, slot: 1 }], slots: 2, calls: [7, 1, 4, 9] },
];

describe("attention kernel (ring KV cache, per-stream offsets)", () => {
  test("packs exactly the fields of AttentionParams", () => {
    expect(attentionUniforms({ streams: 1, steps: 1, heads: 1, headDim: 1, context: 1, slots: 1 }).length * 4).toBe(wgslStructByteSize("attention", "AttentionParams"));
  });

  for (const { name, heads, headDim, context, streams, slots, calls } of cases) {
    test(`matches a linear-cache reference call after call: ${name}`, async () => {
      const { device } = await gpuForTests();
      const rand = seededRandom(heads * 1000 + headDim * 10 + context);
      const width = heads * headDim;
      const histories = streams.map(({ offset }) => randomHistory(rand, offset, width));
      const cacheShape = { slots, context, heads, headDim };
      const cache = createKvCache(device, cacheShape);
      device.queue.writeBuffer(cache, 0, ringFromHistories(streams.map(({ slot }, n) => ({ slot, history: histories[n]! })), slots, context, width));
      let offsets = streams.map(({ offset }) => offset);
      for (const [callIndex, steps] of calls.entries()) {
        const qkv = randomArray(rand, streams.length * steps * 3 * width);
        const table = storageBuffer(device, streamTableWords(streams.map(({ slot }, n) => ({ slot, offset: offsets[n]! })), slots));
        const output = storageBuffer(device, streams.length * steps * width * 4);
        const shape = { streams: streams.length, steps, heads, headDim, context, slots };
        submitDispatches(device, attention(device, shape, { streamTable: table, qkv: storageBuffer(device, qkv), cache, output }));
        const expected = attentionReference(qkv, histories, shape);
        expectClose(await readFloat32(device, output, expected.length), expected, { ...ATTENTION_TOLERANCE, label: `call ${callIndex} output` });
        offsets = offsets.map((offset) => offset + steps);
        const expectedRing = ringFromHistories(streams.map(({ slot }, n) => ({ slot, history: histories[n]! })), slots, context, width);
        expectClose(await readFloat32(device, cache, kvCacheFloats(cacheShape)), expectedRing, { ...RING_TOLERANCE, label: `call ${callIndex} ring` });
      }
    });
  }

  test("a call that breaks a rule is refused, naming the rule", async () => {
    const { device } = await gpuForTests();
    const large = storageBuffer(device, 1 << 16);
    const buffers = { streamTable: large, qkv: large, cache: large, output: large };
    const shape = { streams: 2, steps: 1, heads: 1, headDim: 4, context: 3, slots: 2 };
    expect(() => attention(device, shape, buffers)).not.toThrow();
    expect(brokenRule(() => attention(device, { ...shape, slots: 1 }, buffers))).toBe("slots ≥ streams");
    expect(brokenRule(() => attention(device, { ...shape, headDim: 260 }, buffers))).toBe("headDim ≤ 256");
    expect(brokenRule(() => attention(device, shape, { ...buffers, cache: storageBuffer(device, 44 * 4) }))).toBe("cache holds the shape");
  });

  test("refuses two streams on one cache slot", async () => {
    expect(() => streamTableWords([{ slot: 1, offset: 0 }, { slot: 1, offset: 5 }], 2)).toThrow(/used by two streams/);
  });
});
