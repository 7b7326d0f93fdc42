import { describe, expect, test } from "bun:test";
import { eluDispatch, eluUniforms } from "../../src/gpu/elu.ts";
import { storageBuffer } from "../../src/gpu/kernel.ts";
import { referenceElu } from "./reference/elu.ts";
import { expectClose, gpuForTests, randomArray, readFloat32, seededRandom, submitDispatches, wgslStructByteSize } from "./support.ts";

// exp(x) − 1 in float32 against expm1 in float64: absolute error near 1 ulp of 1.
const ELU_TOLERANCE = { atol: 3e-7, rtol: 1e-6 };

describe("elu kernel", () => {
  test("uniform struct matches the WGSL declaration", () => {
    expect(wgslStructByteSize("elu", "EluParams")).toBe(eluUniforms(1).length * 4);
  });

  // The last count needs more than 65535 workgroups of 64, so the grid spills into y.
  for (const count of [1, 63, 64, 1000, 65536 * 64 + 5]) {
    test(`${count} values match the CPU reference`, async () => {
      const { device } = await gpuForTests();
      const input = randomArray(seededRandom(count), count, 4);
      const output = storageBuffer(device, count * 4);
      submitDispatches(device, [eluDispatch(device, count, storageBuffer(device, input), output)]);
      expectClose(await readFloat32(device, output, count), referenceElu(input), { ...ELU_TOLERANCE, label: `elu ×${count}` });
    });
  }
});
