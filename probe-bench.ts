import { readFileSync } from "node:fs";
import { configureOnnxRuntime, createOnnxSession } from "./src/models/pocket/onnx.ts";
import { parseStateManifest, decodeSafetensorsWithInt64 } from "./src/models/pocket/bundle.ts";
import { MimiDecoder } from "./src/models/pocket/stages.ts";
const threads = Number(process.argv[2] ?? 1);
configureOnnxRuntime({ threads });
const dir = "/work/shared/fixtures/mimi-full";
const golden = JSON.parse(readFileSync(dir + "/golden.json", "utf8"));
const t0 = performance.now();
const session = await createOnnxSession(dir + "/mimi_decoder.onnx");
const created = performance.now() - t0;
const decoder = new MimiDecoder(session, parseStateManifest(golden.mimi_state_manifest, "x"), { latentDim: 32, samplesPerFrame: 1920 });
const latents = decodeSafetensorsWithInt64(readFileSync(dir + "/golden.safetensors"))["mimi.latents"]!.data as Float32Array;
const times: number[] = [];
const wholeTimes: number[] = [];
for (let rep = 0; rep < 4; rep++) {
  let st = decoder.emptyState();
  let t = performance.now();
  for (let k = 0; k < 16; k++) st = (await decoder.decode(st, latents.subarray(k * 32, k * 32 + 32))).state;
  times.push(performance.now() - t);
  t = performance.now();
  await decoder.decode(decoder.emptyState(), latents);
  wholeTimes.push(performance.now() - t);
}
const med = (a: number[]) => a.slice(1).sort((x, y) => x - y)[1]!.toFixed(0);
console.log(`threads=${threads} create=${created.toFixed(0)}ms  16x1-latent median=${med(times)}ms (${(Number(med(times)) / 16).toFixed(1)} ms/frame)  1x16 median=${med(wholeTimes)}ms`);
await session.release();
