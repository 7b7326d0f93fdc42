import { describe, expect, test } from "bun:test";
import { gelu, geluUniforms } from "../../src/gpu/gelu.ts";
import { storageBuffer } from "../../src/gpu/kernel.ts";
import { erfc, geluReference } from "./reference/gelu.ts";
import { expectClose, gpuForTests, randomArray, readFloat32, seededRandom, submitDispatches, wgslStructByteSize } from "./support.ts";

// Relative precision everywhere on the range activations reach, the negative tail included, where
// 1 + erf(x/√2) cancels (torch's own float32 formula loses all relative precision there). The erfc fit is
// good to 1.2e-7 and float32 rounding adds a few ulp: the worst measured is 4.5e-7 (llvmpipe through Dawn)
// and 4.7e-7 (lavapipe through Deno), at x ≈ −1.
const GELU_TOLERANCE = { atol: 0, rtol: 6e-7 };

describe("gelu kernel (exact erf form)", () => {
  test("packs exactly the fields of GeluParams", () => {
    expect(geluUniforms(1).length * 4).toBe(wgslStructByteSize("gelu", "GeluParams"));
  });

  test("the float64 erfc reference hits tabulated values", () => {
    // Abramowitz & Stegun table 7.1 and erfc(5) = 1.5374597944280349e-12.
    expectClose([erfc(0), erfc(0.5), erfc(1), erfc(2), erfc(3), erfc(5), erfc(-1)], [1, 0.4795001221869535, 0.15729920705028513, 0.004677734981047266, 2.209049699858544e-5, 1.5374597944280349e-12, 1.8427007929497148], {
      atol: 0,
      rtol: 1e-13,
      label: "erfc",
    });
  });

  test("stays within its relative tolerance on a dense sweep of [-8, 8]", async () => {
    const { device } = await gpuForTests();
    const count = 160_001;
    const input = new Float32Array(count).map((_, index) => -8 + (16 * index) / (count - 1));
    const values = storageBuffer(device, input);
    submitDispatches(device, [gelu(device, count, values)]);
    expectClose(await readFloat32(device, values, count), geluReference(input), { ...GELU_TOLERANCE, label: "gelu sweep" });
  });

  for (const count of [1, 255, 257, 16 * 2048]) {
    test(`matches the CPU reference on ${count} random values`, async () => {
      const { device } = await gpuForTests();
      const input = randomArray(seededRandom(count), count, 6);
      const values = storageBuffer(device, input);
      submitDispatches(device, [gelu(device, count, values)]);
      expectClose(await readFloat32(device, values, count), geluReference(input), { ...GELU_TOLERANCE, label: `gelu ×${count}` });
    });
  }
});
