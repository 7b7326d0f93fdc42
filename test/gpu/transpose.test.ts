import { describe, expect, test } from "bun:test";
import { storageBuffer } from "../../src/gpu/kernel.ts";
import { transposeReference } from "./reference/transpose.ts";
import { transpose, transposeUniforms } from "../../src/gpu/transpose.ts";
import { expectClose, gpuForTests, randomArray, readFloat32, seededRandom, submitDispatches, wgslStructByteSize } from "./support.ts";

// A pure copy: bit-exact.
const TRANSPOSE_TOLERANCE = { atol: 0, rtol: 0 };

describe("transpose kernel", () => {
  test("packs exactly the fields of TransposeParams", () => {
    expect(transposeUniforms({ batch: 1, rows: 1, cols: 1 }).length * 4).toBe(wgslStructByteSize("transpose", "TransposeParams"));
  });

  for (const [batch, rows, cols] of [[1, 1, 1], [2, 512, 16], [3, 17, 33], [1, 5, 300]] as const) {
    test(`matches the CPU reference for [${batch}, ${rows}, ${cols}]`, async () => {
      const { device } = await gpuForTests();
      const input = randomArray(seededRandom(batch + rows + cols), batch * rows * cols);
      const shape = { batch, rows, cols };
      const output = storageBuffer(device, input.byteLength);
      submitDispatches(device, [transpose(device, shape, { input: storageBuffer(device, input), output })]);
      expectClose(await readFloat32(device, output, input.length), transposeReference(input, shape), { ...TRANSPOSE_TOLERANCE, label: `transpose [${batch}, ${rows}, ${cols}]` });
    });
  }
});
