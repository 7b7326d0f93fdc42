import { describe, expect, test } from "bun:test";
import { storageBuffer } from "../../src/gpu/kernel.ts";
import { latentDenormDispatch, latentDenormUniforms } from "../../src/gpu/latent-denorm.ts";
import { referenceLatentDenorm } from "./reference/latent-denorm.ts";
import { expectClose, gpuForTests, randomArray, readFloat32, seededRandom, submitDispatches, wgslStructByteSize } from "./support.ts";

// One fused multiply-add per element; float32 either way.
const DENORM_TOLERANCE = { atol: 1e-6, rtol: 1e-6 };

describe("latent-denorm kernel", () => {
  test("uniform struct matches the WGSL declaration", () => {
    expect(wgslStructByteSize("latent-denorm", "LatentDenormParams")).toBe(latentDenormUniforms({ batch: 1, latentDim: 1, frames: 1 }).length * 4);
  });

  for (const shape of [
    { batch: 1, latentDim: 32, frames: 1 },
    { batch: 3, latentDim: 32, frames: 70 },
    { batch: 2, latentDim: 5, frames: 3 },
  ]) {
    test(`[${shape.batch}, ${shape.frames}, ${shape.latentDim}] matches the CPU reference`, async () => {
      const { device } = await gpuForTests();
      const rand = seededRandom(shape.batch * 100 + shape.frames);
      const latents = randomArray(rand, shape.batch * shape.frames * shape.latentDim, 3);
      const embStd = randomArray(rand, shape.latentDim);
      const embMean = randomArray(rand, shape.latentDim);
      const output = storageBuffer(device, latents.byteLength);
      submitDispatches(device, [latentDenormDispatch(device, shape, { latents: storageBuffer(device, latents), embStd: storageBuffer(device, embStd), embMean: storageBuffer(device, embMean), output })]);
      expectClose(await readFloat32(device, output, latents.length), referenceLatentDenorm(shape, latents, embStd, embMean), { ...DENORM_TOLERANCE, label: "denormalised latents" });
    });
  }
});
