import { describe, expect, test } from "bun:test";
import { storageBuffer } from "../../src/gpu/kernel.ts";
import { layerScale, layerScaleUniforms } from "../../src/gpu/layer-scale.ts";
import { layerScaleReference } from "./reference/layer-scale.ts";
import { expectClose, gpuForTests, randomArray, readFloat32, seededRandom, submitDispatches, wgslStructByteSize } from "./support.ts";

// One f32 multiply-add per element.
const LAYER_SCALE_TOLERANCE = { atol: 1e-7, rtol: 1e-6 };

describe("layer-scale residual kernel", () => {
  test("packs exactly the fields of LayerScaleParams", () => {
    expect(layerScaleUniforms({ rows: 1, channels: 1 }).length * 4).toBe(wgslStructByteSize("layer-scale", "LayerScaleParams"));
  });

  for (const [rows, channels] of [[1, 1], [32, 512], [3, 77]] as const) {
    test(`matches the CPU reference for [${rows}, ${channels}]`, async () => {
      const { device } = await gpuForTests();
      const rand = seededRandom(rows * 31 + channels);
      const residual = randomArray(rand, rows * channels);
      const update = randomArray(rand, rows * channels, 3);
      const scale = randomArray(rand, channels, 0.4);
      const residualBuffer = storageBuffer(device, residual);
      submitDispatches(device, [layerScale(device, { rows, channels }, { update: storageBuffer(device, update), scale: storageBuffer(device, scale), residual: residualBuffer })]);
      expectClose(await readFloat32(device, residualBuffer, residual.length), layerScaleReference(residual, scale, update), { ...LAYER_SCALE_TOLERANCE, label: `layer-scale [${rows}, ${channels}]` });
    });
  }
});
