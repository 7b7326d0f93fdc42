import { describe, expect, test } from "bun:test";
import { storageBuffer } from "../../src/gpu/kernel.ts";
import { layerNorm, layerNormUniforms } from "../../src/gpu/layer-norm.ts";
import { layerNormReference } from "./reference/layer-norm.ts";
import { expectClose, gpuForTests, randomArray, readFloat32, seededRandom, submitDispatches, wgslStructByteSize } from "./support.ts";

// f32 sums over up to 2048 channels against a float64 reference.
const LAYER_NORM_TOLERANCE = { atol: 2e-5, rtol: 1e-5 };
const MIMI_EPS = 1e-5;

describe("layer-norm kernel", () => {
  test("packs exactly the fields of LayerNormParams", () => {
    expect(layerNormUniforms({ rows: 1, channels: 1, eps: MIMI_EPS }).length * 4).toBe(wgslStructByteSize("layer-norm", "LayerNormParams"));
  });

  // rows = streams · steps; 512 is the Mimi width, the others are below / off the 128-thread workgroup.
  for (const [rows, channels] of [[1, 1], [1, 512], [3, 100], [32, 512], [7, 333]] as const) {
    test(`matches the CPU reference for [${rows}, ${channels}]`, async () => {
      const { device } = await gpuForTests();
      const rand = seededRandom(rows * 1000 + channels);
      // An offset mean makes a one-pass E[x²] − mean² variance visibly wrong.
      const input = randomArray(rand, rows * channels, 2).map((value) => value + 3);
      const weight = randomArray(rand, channels).map((value) => 1 + 0.2 * value);
      const bias = randomArray(rand, channels, 0.1);
      const shape = { rows, channels, eps: MIMI_EPS };
      const output = storageBuffer(device, rows * channels * 4);
      submitDispatches(device, [
        layerNorm(device, shape, { input: storageBuffer(device, input), weight: storageBuffer(device, weight), bias: storageBuffer(device, bias), output }),
      ]);
      expectClose(await readFloat32(device, output, rows * channels), layerNormReference(input, weight, bias, shape), { ...LAYER_NORM_TOLERANCE, label: `layer-norm [${rows}, ${channels}]` });
    });
  }
});
