import { describe, expect, test } from "bun:test";
import { storageBuffer } from "../../src/gpu/kernel.ts";
import { ropeReference } from "./reference/rope.ts";
import { rope, ropeFrequencies, ropeFrequencyBuffer, ropeUniforms } from "../../src/gpu/rope.ts";
import { streamTableWords } from "../../src/gpu/stream-table.ts";
import { expectClose, gpuForTests, randomArray, readFloat32, seededRandom, submitDispatches, wgslStructByteSize } from "./support.ts";

// The angle is the same float32 product on both sides; what remains is the kernel's own cos/sin (range
// reduction + Cephes polynomials, ~1e-7) times |x| ≤ 1.
const ROPE_TOLERANCE = { atol: 5e-7, rtol: 1e-6 };
const MAX_PERIOD = 10_000;

describe("rope kernel (interleaved pairs)", () => {
  test("packs exactly the fields of RopeParams", () => {
    expect(ropeUniforms({ streams: 1, steps: 1, heads: 1, headDim: 2 }).length * 4).toBe(wgslStructByteSize("rope", "RopeParams"));
  });

  test("frequencies follow upstream's float32 exp(i · −2 ln(max_period) / D)", () => {
    const frequencies = ropeFrequencies(64, MAX_PERIOD);
    expect(frequencies[0]).toBe(1);
    // Upstream rounds the coefficient −2 ln(10⁴)/64 to float32 first; i = 31 multiplies that rounding.
    expectClose([frequencies[1]!, frequencies[31]!], [MAX_PERIOD ** (-2 / 64), MAX_PERIOD ** (-62 / 64)], { atol: 0, rtol: 1e-6, label: "frequencies" });
  });

  test("rotates pair (2i, 2i+1), not (i, i + D/2)", async () => {
    const { device } = await gpuForTests();
    // One head of 4 dims at position 1: pair 0 turns by 1 rad, pair 1 by 1/√10000 = 0.01 rad.
    const qkv = new Float32Array([1, 0, 1, 0, 1, 0, 1, 0, 9, 9, 9, 9]);
    const buffer = storageBuffer(device, qkv);
    submitDispatches(device, [
      rope(device, { streams: 1, steps: 1, heads: 1, headDim: 4 }, { streamTable: storageBuffer(device, streamTableWords([{ slot: 0, offset: 1 }], 1)), frequencies: ropeFrequencyBuffer(device, 4, MAX_PERIOD), qkv: buffer }),
    ]);
    const [c1, s1, c2, s2] = [Math.cos(1), Math.sin(1), Math.cos(0.01), Math.sin(0.01)];
    expectClose(await readFloat32(device, buffer, 12), [c1, s1, c2, s2, c1, s1, c2, s2, 9, 9, 9, 9], { ...ROPE_TOLERANCE, label: "unit vectors" });
  });

  // Offsets per stream, including ones far into a long utterance (angles of tens of thousands of radians;
  // the kernel's reduction is exact below 102 943 rad, 8.5 minutes of audio in one Mimi state).
  const cases = [
    { streams: 1, steps: 1, heads: 1, headDim: 2, offsets: [0] },
    { streams: 3, steps: 16, heads: 8, headDim: 64, offsets: [0, 16, 4000] },
    { streams: 2, steps: 5, heads: 2, headDim: 16, offsets: [100_000, 7] },
  ];
  for (const { streams, steps, heads, headDim, offsets } of cases) {
    test(`matches the CPU reference for ${streams} streams × ${steps} steps, ${heads}×${headDim}, offsets ${offsets.join(", ")}`, async () => {
      const { device } = await gpuForTests();
      const qkv = randomArray(seededRandom(streams * 100 + steps + headDim), streams * steps * 3 * heads * headDim);
      const buffer = storageBuffer(device, qkv);
      const shape = { streams, steps, heads, headDim };
      const table = storageBuffer(device, streamTableWords(offsets.map((offset, slot) => ({ slot, offset })), streams));
      submitDispatches(device, [rope(device, shape, { streamTable: table, frequencies: ropeFrequencyBuffer(device, headDim, MAX_PERIOD), qkv: buffer })]);
      expectClose(await readFloat32(device, buffer, qkv.length), ropeReference(qkv, offsets, { ...shape, maxPeriod: MAX_PERIOD }), { ...ROPE_TOLERANCE, label: "rope" });
    });
  }
});
