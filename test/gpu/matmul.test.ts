import { describe, expect, test } from "bun:test";
import { storageBuffer } from "../../src/gpu/kernel.ts";
import { matmul, matmulUniforms } from "../../src/gpu/matmul.ts";
import { matmulReference } from "./reference/matmul.ts";
import { brokenRule, expectClose, gpuForTests, randomArray, readFloat32, seededRandom, submitDispatches, wgslStructByteSize } from "./support.ts";

// f32 accumulation over up to 2048 products of O(1/√inner)-scaled weights against float64.
const MATMUL_TOLERANCE = { atol: 1e-5, rtol: 1e-4 };

describe("matmul kernel", () => {
  test("packs exactly the fields of MatmulParams", () => {
    expect(matmulUniforms({ rows: 1, inner: 1, cols: 1 }, false).length * 4).toBe(wgslStructByteSize("matmul", "MatmulParams"));
  });

  test("a call that breaks a rule is refused, naming the rule", async () => {
    const { device } = await gpuForTests();
    const large = storageBuffer(device, 4096);
    expect(brokenRule(() => matmul(device, { rows: 2, inner: 3, cols: 0 }, { a: large, b: large, bias: null, out: large }))).toBe("cols is a positive integer");
    expect(brokenRule(() => matmul(device, { rows: 2, inner: 3, cols: 4 }, { a: large, b: storageBuffer(device, 8 * 4), bias: null, out: large }))).toBe("b holds the shape");
    expect(brokenRule(() => matmul(device, { rows: 2, inner: 3, cols: 40 }, { a: large, b: large, bias: storageBuffer(device, 36 * 4), out: large }))).toBe("bias holds the shape");
  });

  // Mimi's in_proj (16 rows per stream and frame, 512 → 1536), linear2 (2048 → 512), and shapes of 1 and
  // off the 16 × 64 × 32 tiling.
  const cases = [
    { rows: 1, inner: 1, cols: 1, bias: false },
    { rows: 16, inner: 512, cols: 1536, bias: false },
    { rows: 64, inner: 2048, cols: 512, bias: false },
    { rows: 33, inner: 45, cols: 70, bias: true },
    { rows: 5, inner: 31, cols: 129, bias: true },
  ];
  for (const { rows, inner, cols, bias } of cases) {
    test(`matches the CPU reference for [${rows}, ${inner}] · [${inner}, ${cols}]${bias ? " + bias" : ""}`, async () => {
      const { device } = await gpuForTests();
      const rand = seededRandom(rows * 7919 + inner * 31 + cols);
      const a = randomArray(rand, rows * inner);
      const b = randomArray(rand, inner * cols, 1.7 / Math.sqrt(inner));
      const biasValues = bias ? randomArray(rand, cols, 0.1) : null;
      const shape = { rows, inner, cols };
      const out = storageBuffer(device, rows * cols * 4);
      submitDispatches(device, [
        matmul(device, shape, { a: storageBuffer(device, a), b: storageBuffer(device, b), bias: biasValues ? storageBuffer(device, biasValues) : null, out }),
      ]);
      expectClose(await readFloat32(device, out, rows * cols), matmulReference(a, b, biasValues, shape), { ...MATMUL_TOLERANCE, label: `matmul ${rows}×${inner}×${cols}` });
    });
  }
});
