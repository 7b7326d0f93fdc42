/**
 * Run by test/e2e/gpu/deno.test.ts under Deno: decodes the first latents of pocket-tiny's golden decoder case
 * on Deno's own WebGPU (navigator.gpu) with the WGSL decoder and prints one JSON line with the adapter,
 * backend and the relative RMS error against the golden audio.
 */
import { readFileSync } from "node:fs";
import { MimiGpuDecoder } from "../../../src/models/pocket/mimi-wgsl/decoder.ts";
import { readMimiWeightsFromOnnx } from "../../../src/models/pocket/mimi-wgsl/weights.ts";
import { decodeSafetensorsWithInt64 } from "../../../src/formats/safetensors.ts";
import { compareTensors } from "../../../src/conformance/report.ts";
import { gpuForTests } from "../support.ts";

const fixture = process.argv[2]!;
const frames = 3;
const context = await gpuForTests();
const decoder = new MimiGpuDecoder(context.device, await readMimiWeightsFromOnnx(`${fixture}/mimi_decoder.onnx`), { heads: 2 });
const golden = decodeSafetensorsWithInt64(readFileSync(`${fixture}/golden.safetensors`));
const latents = (golden["mimi.latents"]!.data as Float32Array).subarray(0, frames * decoder.config.latentDim);
let state = decoder.emptyState();
const audio = new Float32Array(frames * decoder.config.samplesPerFrame);
for (let frame = 0; frame < frames; frame++) {
  const result = await decoder.decode(state, latents.subarray(frame * decoder.config.latentDim, (frame + 1) * decoder.config.latentDim));
  state = result.state;
  audio.set(result.audio, frame * decoder.config.samplesPerFrame);
}
const expected = (golden["mimi.audio_single"]!.data as Float32Array).subarray(0, audio.length);
console.log(JSON.stringify({ runtime: "Deno" in globalThis ? "deno" : "other", backend: context.backend, adapter: context.adapterDescription, samples: audio.length, ...compareTensors(audio, expected) }));
decoder.destroy();
context.device.destroy();
