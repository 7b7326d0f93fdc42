/**
 * The Mimi decoder three ways, streaming one latent frame per stream per step as the generation loop does:
 *   wgsl        our WGSL kernels (src/models/pocket/mimi-wgsl/decoder.ts): N streams in one submission per step
 *   ort-webgpu  onnxruntime-web's WebGPU EP on the same device: one session run per stream per step
 *   cpu         the ONNX decoder on onnxruntime-node's CPU EP: one session run per stream per step
 * at batch sizes (streams) 1, 4 and 16. Prints frames/s (stream-frames decoded per second), ms per frame
 * (its inverse) and ms per step (wall time of one step of all N streams: a stream's frame latency).
 *
 *   bun bench/wgsl-decoder.ts [--model <bundle-dir>] [--batches 1,4,16] [--steps 8] [--warmup 2]
 *                             [--cell-seconds 60] [--backends wgsl,ort-webgpu,cpu] [--threads 1]
 *
 * The model is `<bundle-dir>/mimi_decoder.onnx` (fp32) with the bundle's `bundle.json` state manifest;
 * by default ../shared/fixtures/mimi-full (the released decoder's shape, random weights, golden.json
 * manifest). A cell stops early after --cell-seconds once it has two timed steps: onnxruntime's WebGPU EP
 * on a software adapter takes over a second per run. On a software adapter the figures say how the
 * backends compare there, not what a GPU does (docs/architecture.md: the server uses the CPU path there).
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { acquireGpu } from "../src/gpu/device.ts";
import { concatFloat32 } from "../src/lib/concat.ts";
import { MimiGpuDecoder, type MimiGpuState } from "../src/models/pocket/mimi-wgsl/decoder.ts";
import { readMimiWeightsFromOnnx, readMimiWeightsFromSafetensors } from "../src/models/pocket/mimi-wgsl/weights.ts";
import type { StateEntry } from "../src/models/pocket/bundle/pocket-bundle.ts";
import { parseStateManifest } from "../src/models/pocket/bundle/state-manifest.ts";
import { configureOnnxRuntime, createOnnxSession, loadOnnxRuntime, type OnnxSession } from "../src/onnx/runtime.ts";
import { MimiDecoder } from "../src/models/pocket/stages/mimi-decoder.ts";
import { type MimiState } from "../src/models/pocket/stages/state.ts";

const ROOT = join(import.meta.dirname, "..");
const DEFAULT_MODEL_DIR = join(ROOT, "..", "shared", "fixtures", "mimi-full");
const BACKENDS = ["wgsl", "ort-webgpu", "cpu"] as const;
type Backend = (typeof BACKENDS)[number];
const LATENT_DIM = 32;
const SAMPLES_PER_FRAME = 1920;
/** Steps of stream 0 compared between backends (batch 1). */
const PARITY_STEPS = 4;

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    batches: { type: "string", default: "1,4,16" },
    steps: { type: "string", default: "8" },
    warmup: { type: "string", default: "2" },
    "cell-seconds": { type: "string", default: "60" },
    backends: { type: "string", default: BACKENDS.join(",") },
    threads: { type: "string", default: "1" },
  },
});

const modelDir = resolve(values.model ?? DEFAULT_MODEL_DIR);
const modelPath = join(modelDir, "mimi_decoder.onnx");
const batches = values.batches.split(",").map(Number);
const timedSteps = Number(values.steps);
const warmupSteps = Number(values.warmup);
const cellSeconds = Number(values["cell-seconds"]);
const backends = values.backends.split(",") as Backend[];
for (const backend of backends) if (!BACKENDS.includes(backend)) throw new Error(`unknown backend ${backend}; choose from ${BACKENDS.join(", ")}`);
if (batches.some((batch) => !Number.isInteger(batch) || batch < 1) || !(timedSteps >= 1) || !(warmupSteps >= 0)) throw new Error("--batches, --steps and --warmup take positive integers");
if (!existsSync(modelPath)) throw new Error(`${modelPath} not found (pass --model <bundle-dir> holding mimi_decoder.onnx)`);

/** The decoder's state manifest: the bundle's bundle.json, or the fixture's golden.json. */
function stateManifest(dir: string): StateEntry[] {
  for (const file of ["bundle.json", "golden.json"]) {
    const path = join(dir, file);
    if (existsSync(path)) return parseStateManifest((JSON.parse(readFileSync(path, "utf8")) as { mimi_state_manifest: unknown }).mimi_state_manifest, path);
  }
  throw new Error(`${dir} has neither bundle.json nor golden.json to read the Mimi state manifest from`);
}

/** Normalised latents ~N(0, 1) for (stream, step), the same in every backend (Box–Muller over an LCG). */
function latentFor(stream: number, step: number): Float32Array {
  let state = (stream * 7919 + step * 104_729 + 1) >>> 0;
  const uniform = () => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    return (state + 0.5) / 4_294_967_296;
  };
  return Float32Array.from({ length: LATENT_DIM }, () => Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform()));
}

interface CellResult {
  steps: number;
  seconds: number;
  /** Stream 0's audio of the first PARITY_STEPS steps, when the cell ran them. */
  firstAudio: Float32Array | null;
}

/** Streams of one backend: `step(n)` decodes one frame for every stream and returns stream 0's audio. */
interface BatchRunner {
  step(stepIndex: number): Promise<Float32Array>;
  close(): void;
}

async function measure(runner: BatchRunner): Promise<CellResult> {
  const parity: Float32Array[] = [];
  let step = 0;
  for (; step < warmupSteps; step++) parity.push(await runner.step(step));
  const start = performance.now();
  let timed = 0;
  while (timed < timedSteps && (timed < 2 || performance.now() - start < cellSeconds * 1000)) {
    const audio = await runner.step(step++);
    if (parity.length < PARITY_STEPS) parity.push(audio);
    timed++;
  }
  const seconds = (performance.now() - start) / 1000;
  runner.close();
  return { steps: timed, seconds, firstAudio: parity.length >= PARITY_STEPS ? concatFloat32(parity.slice(0, PARITY_STEPS)) : null };
}

function wgslRunner(decoder: MimiGpuDecoder, batch: number): BatchRunner {
  let states: MimiGpuState[] = Array.from({ length: batch }, () => decoder.emptyState());
  return {
    async step(stepIndex) {
      const results = await decoder.decodeBatch(states.map((state, stream) => ({ state, latents: latentFor(stream, stepIndex) })));
      states = results.map((result) => result.state);
      return results[0]!.audio;
    },
    close: () => states.forEach((state) => decoder.release(state)),
  };
}

function onnxRunner(decoder: MimiDecoder, batch: number): BatchRunner {
  let states: MimiState[] = Array.from({ length: batch }, () => decoder.emptyState());
  return {
    async step(stepIndex) {
      let first: Float32Array | null = null;
      // One graph per stream: the exported decoder's states have batch 1.
      for (let stream = 0; stream < batch; stream++) {
        const { state, audio } = await decoder.decode(states[stream]!, latentFor(stream, stepIndex));
        states[stream] = state;
        first ??= audio;
      }
      return first!;
    },
    close: () => undefined,
  };
}

/** onnxruntime-web's WebGPU EP on our device, as the server opens it (src/onnx/runtime.ts). */
async function ortWebGpuSession(device: GPUDevice): Promise<OnnxSession> {
  return (await loadOnnxRuntime({ gpuDevice: device })).createSession(modelPath);
}

function relativeRms(actual: Float32Array, reference: Float32Array): number {
  let difference = 0;
  let energy = 0;
  for (let i = 0; i < reference.length; i++) {
    difference += (actual[i]! - reference[i]!) ** 2;
    energy += reference[i]! ** 2;
  }
  return Math.sqrt(difference / energy);
}

const manifest = stateManifest(modelDir);
configureOnnxRuntime({ threads: Number(values.threads) });
const results = new Map<string, CellResult | string>();
const notes: string[] = [];
let adapter = "(no WebGPU backend run)";

for (const backend of backends) {
  let makeRunner: (batch: number) => BatchRunner;
  let release = async () => undefined as unknown;
  try {
    if (backend === "cpu") {
      const session = await createOnnxSession(modelPath, { provider: "onnxruntime-node" });
      const decoder = new MimiDecoder(session, manifest, { latentDim: LATENT_DIM, samplesPerFrame: SAMPLES_PER_FRAME });
      makeRunner = (batch) => onnxRunner(decoder, batch);
      release = () => session.release();
    } else {
      const gpu = await acquireGpu({ allowSoftware: true });
      adapter = `${gpu.adapterDescription} (${gpu.isSoftware ? "software" : "hardware"}, ${gpu.backend})`;
      if (backend === "wgsl") {
        // A bundle exported with its upstream-named weights beside the graph (generate.py --save-weights) is read
        // from those: newer torch exporters name the transformer's MatMul nodes in ways the ONNX reader does not map.
        const weightsPath = join(modelDir, "model.safetensors");
        const weights = existsSync(weightsPath) ? await readMimiWeightsFromSafetensors(weightsPath) : await readMimiWeightsFromOnnx(modelPath);
        const decoder = new MimiGpuDecoder(gpu.device, weights, { maxStreams: Math.max(...batches) });
        makeRunner = (batch) => wgslRunner(decoder, batch);
        release = async () => decoder.destroy();
      } else {
        const session = await ortWebGpuSession(gpu.device);
        const decoder = new MimiDecoder(session, manifest, { latentDim: LATENT_DIM, samplesPerFrame: SAMPLES_PER_FRAME });
        makeRunner = (batch) => onnxRunner(decoder, batch);
        release = () => session.release();
      }
    }
  } catch (error) {
    for (const batch of batches) results.set(`${backend}:${batch}`, `failed to start: ${(error as Error).message.split("\n")[0]}`);
    continue;
  }
  for (const batch of batches) {
    try {
      results.set(`${backend}:${batch}`, await measure(makeRunner(batch)));
    } catch (error) {
      results.set(`${backend}:${batch}`, `failed: ${(error as Error).message.split("\n")[0]}`);
    }
  }
  await release();
}

console.log(`Mimi decoder: ${modelPath}`);
console.log(`WebGPU adapter: ${adapter}; CPU threads: ${values.threads}; one latent frame (1920 samples, 80 ms of audio) per stream per step`);
console.log(`${warmupSteps} warm-up steps, then up to ${timedSteps} timed steps per cell (at least 2, at most ${cellSeconds} s once 2 are done)\n`);
console.log("| backend | streams | timed steps | frames/s | ms/frame | ms/step | × realtime per stream |");
console.log("|---|---:|---:|---:|---:|---:|---:|");
for (const backend of backends) {
  for (const batch of batches) {
    const result = results.get(`${backend}:${batch}`)!;
    if (typeof result === "string") {
      console.log(`| ${backend} | ${batch} | ${result} | | | | |`);
      continue;
    }
    const framesPerSecond = (result.steps * batch) / result.seconds;
    const msPerStep = (1000 * result.seconds) / result.steps;
    console.log(`| ${backend} | ${batch} | ${result.steps} | ${framesPerSecond.toFixed(1)} | ${(1000 / framesPerSecond).toFixed(2)} | ${msPerStep.toFixed(1)} | ${(80 / msPerStep).toFixed(2)} |`);
  }
}

const speedups: string[] = [];
for (const batch of batches) {
  const wgsl = results.get(`wgsl:${batch}`);
  const ortGpu = results.get(`ort-webgpu:${batch}`);
  if (wgsl && ortGpu && typeof wgsl !== "string" && typeof ortGpu !== "string") {
    speedups.push(`batch ${batch}: ${((wgsl.steps * ortGpu.seconds) / (ortGpu.steps * wgsl.seconds)).toFixed(2)}×`);
  }
}
if (speedups.length > 0) notes.push(`WGSL frames/s over onnxruntime-web WebGPU: ${speedups.join(", ")} (target on a real GPU: ≥ 2× at batch 1, ≥ 8× at batch 16)`);
const reference = results.get(`cpu:${batches[0]}`);
for (const backend of ["wgsl", "ort-webgpu"] as const) {
  const candidate = results.get(`${backend}:${batches[0]}`);
  if (reference && candidate && typeof reference !== "string" && typeof candidate !== "string" && reference.firstAudio && candidate.firstAudio) {
    notes.push(`parity, stream 0's first ${PARITY_STEPS} frames: ${backend} vs cpu relative RMS difference ${relativeRms(candidate.firstAudio, reference.firstAudio).toExponential(2)}`);
  }
}
if (notes.length > 0) console.log(`\n${notes.join("\n")}`);
process.exit(0);
