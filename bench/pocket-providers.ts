/**
 * Pocket TTS on each CPU provider (onnxruntime-node's CPU EP, onnxruntime-web's wasm EP) × graph precision
 * (fp32, int8) × JS runtime (Bun, and Deno where the provider loads): per-stage ms per frame, RTF and first
 * audio for a 30-word sentence with EOS disabled (the harness of bench/pocket.ts), plus one real-size data
 * point: the full Mimi decoder of fixtures/mimi-full, one latent per call.
 *   bun bench/pocket-providers.ts [--model <bundle-dir>] [--runs 3] [--voice-seconds 5.04] [--threads 1]
 * Every cell runs in a process of its own, so each measures one provider on a fresh heap and its peak RSS
 * is its own. int8 graphs that the bundle lacks are made into a temporary bundle with
 * ../shared/tools/quantize_int8.py (needs python3-onnx and python3-numpy); nothing is written to the bundle.
 */
import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, relative } from "node:path";
import { parseArgs } from "node:util";
import { loadPocketBundle } from "../src/models/pocket/bundle/load.ts";
import { parseStateManifest } from "../src/models/pocket/bundle/state-manifest.ts";
import { type GraphPrecision, type PocketBundle } from "../src/models/pocket/bundle/pocket-bundle.ts";
import { compareTensors } from "../src/conformance/report.ts";
import { generate } from "../src/engine/generate.ts";
import { planTextChunks } from "../src/models/pocket/text-chunks.ts";
import { generationJob, PocketRunner } from "../src/models/pocket/runner.ts";
import { closePocketSessions, openPocketSessions } from "../src/models/pocket/sessions.ts";
import { configureOnnxRuntime, createOnnxSession, loadOnnxRuntime, type CpuProvider } from "../src/onnx/runtime.ts";
import { createPocketStages, voiceStateFromAudio } from "../src/models/pocket/pipeline.ts";
import { MimiDecoder } from "../src/models/pocket/stages/mimi-decoder.ts";
import { SentencePieceTokenizer } from "../src/text/sentencepiece.ts";
import { startDecoderWorker } from "../src/models/pocket/decoder/worker-client.ts";
import { createLogger } from "../src/log/logger.ts";
import { BENCH_SENTENCE, StageClock, syntheticVoice } from "./pocket-timing.ts";
import { concatFloat32 } from "../src/lib/concat.ts";

const ROOT = join(import.meta.dirname, "..");
const SHARED = join(ROOT, "..", "shared");
const TINY_FIXTURE = join(SHARED, "fixtures", "pocket-tiny");
const MIMI_FULL_FIXTURE = join(SHARED, "fixtures", "mimi-full");
const QUANTIZE_SCRIPT = join(SHARED, "tools", "quantize_int8.py");
const PROVIDERS: readonly CpuProvider[] = ["onnxruntime-node", "onnxruntime-web"];
const PRECISIONS: readonly GraphPrecision[] = ["fp32", "int8"];
const SENTENCE = BENCH_SENTENCE;
const MIMI_FULL_CALLS = 16;
/** Native addons need --allow-ffi under Deno; the rest is what the benchmark reads. */
const DENO_PERMISSIONS = ["--allow-read", "--allow-write", "--allow-env", "--allow-sys", "--allow-ffi"];

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    runs: { type: "string", default: "3" },
    "voice-seconds": { type: "string", default: "5.04" },
    threads: { type: "string", default: "1" },
    // Internal: one measurement in this process, written as JSON to stdout.
    cell: { type: "string" },
  },
});

interface CellSpec {
  kind: "pipeline" | "mimi-full" | "probe";
  bundleDir: string;
  precision: GraphPrecision;
  provider: CpuProvider;
  runs: number;
  voiceSeconds: number;
  threads: number;
  /** Where the first run's audio goes (raw float32), for the parity column. */
  audioPath: string;
}

interface PipelineResult {
  kind: "pipeline";
  mainMsPerFrame: number;
  flowMsPerFrame: number;
  decoderMsPerFrame: number;
  /** Whether the decoder ran in a worker thread (its time then overlaps sampling). */
  decoderInWorker: boolean;
  rtf: number[];
  firstAudioMs: number[];
  frames: number;
  tokens: number;
  openMs: number;
  encodeMs: number;
  graphPrecisions: string;
  peakRssMiB: number;
}

interface MimiFullResult {
  kind: "mimi-full";
  msPerCall: number[];
  peakRssMiB: number;
}

interface ProbeResult {
  kind: "probe";
  loads: Record<CpuProvider, string | null>;
  auto: string;
}

type CellResult = PipelineResult | MimiFullResult | ProbeResult;

// ---------------------------------------------------------------------------------------------------
// Cells (run in a child process)

async function probeProviders(): Promise<ProbeResult> {
  const loads = {} as Record<CpuProvider, string | null>;
  for (const provider of PROVIDERS) loads[provider] = await loadOnnxRuntime({ provider }).then(() => null, (error: Error) => error.message.split("\n")[0]!.slice(0, 240));
  const auto = await loadOnnxRuntime().then((runtime) => runtime.provider, (error: Error) => `none (${error.message.slice(0, 160)})`);
  return { kind: "probe", loads, auto };
}

async function measurePipeline(spec: CellSpec): Promise<PipelineResult> {
  const bundle = await loadPocketBundle(spec.bundleDir, { precision: spec.precision });
  const openStart = performance.now();
  const sessions = await openPocketSessions(bundle, { provider: spec.provider });
  const stages = await createPocketStages(bundle, sessions);
  // The decoder as the server runs it: in a worker thread on the cell's provider (worker-decoder.ts).
  const decoderWorker = await startDecoderWorker(bundle, spec.provider, createLogger("warn"));
  const openMs = performance.now() - openStart;
  if (bundle.tokenizer.format !== "sentencepiece") throw new Error("the bench reads tokenizer.model bundles");
  const tokenizer = SentencePieceTokenizer.fromModelProto(new Uint8Array(readFileSync(bundle.tokenizer.modelPath)));

  // The server's runner, driven by the server's engine (one request).
  const runner = PocketRunner.forStages(stages, bundle.dims.sampleRateHz, decoderWorker ?? stages.mimiDecoder);
  const timing = { nativeSampleRateHz: bundle.dims.sampleRateHz, framesPerSecond: bundle.dims.frameRateHz };
  const clock = new StageClock();

  const voiceAudio = syntheticVoice(spec.voiceSeconds, bundle.dims.sampleRateHz);
    const encodeStart = performance.now();
  const voice = await voiceStateFromAudio(stages, voiceAudio);
  const encodeMs = performance.now() - encodeStart;
  const chunks = planTextChunks(SENTENCE, tokenizer, bundle.flags);

  const rtf: number[] = [];
  const firstAudioMs: number[] = [];
  let frames = 0;
  for (let run = 0; run < spec.runs; run++) {
    clock.reset();
    const audio: Float32Array[] = [];
    const start = performance.now();
    frames = 0;
    // EOS disabled: an unreachable threshold, so every chunk runs to its frame cap. Seed 0 every run, so
    // the first run's audio can be compared across cells.
    for await (const frame of generate(runner, timing, generationJob({ voice, chunks, seed: 0, params: { eosThreshold: Number.POSITIVE_INFINITY } }), clock.onTick)) {
      if (frames++ === 0) firstAudioMs.push(performance.now() - start);
      if (run === 0) audio.push(frame.samples);
    }
    const seconds = (performance.now() - start) / 1000;
    rtf.push(seconds / ((frames * bundle.dims.samplesPerFrame) / bundle.dims.sampleRateHz));
    if (run === 0) writeFileSync(spec.audioPath, concatFloat32(audio));
  }
  decoderWorker?.close();
  await closePocketSessions(sessions);
  // Stage times of the last (warmest) run.
  const graphs = bundle.graphs;
  return {
    kind: "pipeline",
    mainMsPerFrame: clock.perFrame("flow_lm", frames),
    flowMsPerFrame: clock.perFrame("flow_head", frames),
    decoderMsPerFrame: clock.perFrame("decode", frames),
    decoderInWorker: decoderWorker !== null,
    rtf,
    firstAudioMs,
    frames,
    tokens: chunks.reduce((sum, chunk) => sum + chunk.tokenIds.length, 0),
    openMs,
    encodeMs,
    graphPrecisions: `main ${graphs.flowLmMain.precision}, flow ${graphs.flowLmFlow.precision}, decoder ${graphs.mimiDecoder.precision}`,
    peakRssMiB: peakRssMiB(),
  };
}

/** The full-size Mimi decoder, one latent per call from a fresh state, as the generation loop calls it. */
async function measureMimiFull(spec: CellSpec): Promise<MimiFullResult> {
  const golden = JSON.parse(readFileSync(join(MIMI_FULL_FIXTURE, "golden.json"), "utf8")) as { mimi_state_manifest: unknown; model_config: { sample_rate: number; frame_rate: number; quantizer: { dimension: number } } };
  const manifest = parseStateManifest(golden.mimi_state_manifest, "mimi-full golden.json");
  const config = golden.model_config;
  const graph = join(spec.bundleDir, spec.precision === "fp32" ? "mimi_decoder.onnx" : "mimi_decoder_int8.onnx");
  const session = await createOnnxSession(graph, { provider: spec.provider });
  const decoder = new MimiDecoder(session, manifest, { latentDim: config.quantizer.dimension, samplesPerFrame: config.sample_rate / config.frame_rate });
  const latent = Float32Array.from({ length: config.quantizer.dimension }, (_, i) => Math.sin(i));
  const msPerCall: number[] = [];
  for (let run = 0; run < spec.runs; run++) {
    let state = decoder.emptyState();
    const start = performance.now();
    for (let call = 0; call < MIMI_FULL_CALLS; call++) state = (await decoder.decode(state, latent)).state;
    msPerCall.push((performance.now() - start) / MIMI_FULL_CALLS);
  }
  await session.release();
  return { kind: "mimi-full", msPerCall, peakRssMiB: peakRssMiB() };
}


/** The process's peak resident set (maxRSS is in KiB); Deno 2 refuses /proc/self reads without --allow-all. */
function peakRssMiB(): number {
  return process.resourceUsage().maxRSS / 1024;
}

// ---------------------------------------------------------------------------------------------------
// Orchestration (the parent process)

interface Runtime {
  name: "bun" | "deno";
  label: string;
  command: string[];
}

function runCell(runtime: Runtime, spec: CellSpec): CellResult | { error: string } {
  const child = spawnSync(runtime.command[0]!, [...runtime.command.slice(1), join(ROOT, "bench", "pocket-providers.ts"), "--cell", JSON.stringify(spec)], { encoding: "utf8", maxBuffer: 1 << 24, cwd: ROOT });
  const lastLine = child.stdout?.trim().split("\n").at(-1) ?? "";
  if (child.status === 0 && lastLine.startsWith("{")) return JSON.parse(lastLine) as CellResult;
  const stderr = (child.stderr ?? String(child.error ?? "")).trim().split("\n");
  return { error: (stderr.find((line) => /error/i.test(line)) ?? stderr.at(-1) ?? `exit ${child.status}`).slice(0, 200) };
}

/**
 * A bundle directory holding int8 graphs: the bundle itself when it ships them, else a temporary mirror
 * (symlinks) with main, flow head and decoder quantized, as the published int8 bundles are (docs/pocket-tts.md §3.2, §3.6).
 */
function int8Bundle(bundle: PocketBundle, bundleDir: string, scratch: string, log: string[]): string {
  if (bundle.graphs.flowLmMain.precision === "int8") return bundleDir;
  const mirror = join(scratch, "int8-bundle");
  mirrorWithSymlinks(bundleDir, mirror);
  const graphs = [bundle.graphs.flowLmMain, bundle.graphs.flowLmFlow, bundle.graphs.mimiDecoder];
  for (const graph of graphs) {
    const target = join(mirror, relative(bundleDir, dirname(graph.path)), int8Name(basename(graph.path), bundle.layout));
    // The flow head's linears are Gemm in some exports; the published int8 flow head has them quantized.
    const flags = graph === bundle.graphs.flowLmFlow ? ["--gemm2matmul"] : [];
    log.push(quantize(graph.path, target, flags));
  }
  return mirror;
}

function int8Name(fp32Name: string, layout: PocketBundle["layout"]): string {
  const stem = fp32Name.replace(/\.onnx$/, "");
  return layout === "sherpa-onnx" ? `${stem}.int8.onnx` : `${stem}_int8.onnx`;
}

function quantize(source: string, target: string, flags: readonly string[]): string {
  const child = spawnSync("/usr/bin/python3", [QUANTIZE_SCRIPT, source, target, ...flags], { encoding: "utf8" });
  if (child.status !== 0) throw new Error(`quantize_int8.py failed on ${source}: ${(child.stderr || String(child.error)).trim().split("\n").at(-1)}`);
  return child.stdout.trim();
}

function mirrorWithSymlinks(source: string, target: string): void {
  mkdirSync(target, { recursive: true });
  for (const entry of readdirSync(source)) {
    const from = join(source, entry);
    if (lstatSync(from).isDirectory()) mirrorWithSymlinks(from, join(target, entry));
    else symlinkSync(from, join(target, entry));
  }
}

const format = (value: number, digits = 2) => value.toFixed(digits);
const minMedian = (list: readonly number[], digits: number) => {
  const sorted = [...list].sort((a, b) => a - b);
  return `${format(sorted[0]!, digits)} / ${format(sorted[Math.floor(sorted.length / 2)]!, digits)}`;
};

async function orchestrate(): Promise<void> {
  const bundleDir = values.model ?? TINY_FIXTURE;
  const common = { runs: Number(values.runs), voiceSeconds: Number(values["voice-seconds"]), threads: Number(values.threads) };
  const scratch = mkdtempSync(join(tmpdir(), "voxedge-pocket-providers-"));
  const runtimes: Runtime[] = [
    { name: "bun", label: "bun", command: [join(ROOT, "node_modules", ".bin", "bun")] },
    { name: "deno", label: "deno", command: [join(ROOT, "node_modules", ".bin", "deno"), "run", ...DENO_PERMISSIONS] },
  ];
  try {
    const fp32 = await loadPocketBundle(bundleDir, { precision: "fp32" });
    const quantizeLog: string[] = [];
    const bundleDirs: Partial<Record<GraphPrecision, string>> = { fp32: bundleDir };
    try {
      bundleDirs.int8 = int8Bundle(fp32, bundleDir, scratch, quantizeLog);
    } catch (error) {
      quantizeLog.push(`int8 skipped: ${(error as Error).message}`);
    }

    console.log(`bundle: ${fp32.name} (${fp32.layout}) at ${bundleDir}; ${common.threads} thread(s); ${common.runs} runs per cell, min / median`);
    if (!values.model) console.log("NOTE: the tiny fixture (64-wide, 2-layer random weights) is dominated by per-call overhead; its numbers are not the real-size model's (see the mimi-full table below and docs/anchors.md).");
    for (const line of quantizeLog) console.log(`int8: ${line}`);

    console.log("\nWhich provider loads (auto = the one openPocketSessions picks):");
    const probeRuntimes: Runtime[] = [...runtimes, { name: "deno", label: "deno without --allow-ffi (as the deno.json serve task)", command: [join(ROOT, "node_modules", ".bin", "deno"), "run", ...DENO_PERMISSIONS.filter((flag) => flag !== "--allow-ffi")] }];
    const loadsIn = new Map<string, ProbeResult["loads"]>();
    for (const runtime of probeRuntimes) {
      const probe = runCell(runtime, { kind: "probe", bundleDir, precision: "fp32", provider: "onnxruntime-web", audioPath: "", ...common });
      if ("error" in probe || probe.kind !== "probe") {
        console.log(`- ${runtime.label}: probe failed: ${"error" in probe ? probe.error : probe.kind}`);
        continue;
      }
      loadsIn.set(runtime.label, probe.loads);
      const loads = PROVIDERS.map((provider) => `${provider} ${probe.loads[provider] === null ? "loads" : `does not load (${probe.loads[provider]})`}`);
      console.log(`- ${runtime.label}: ${loads.join("; ")}; auto → ${probe.auto}`);
    }

    console.log(`\nPipeline: "${SENTENCE.slice(0, 40)}…" (${SENTENCE.split(/\s+/).length} words), EOS disabled; audio Δ = relRms of the first run's audio (seed 0) against bun / onnxruntime-web / fp32`);
    console.log("| runtime | provider | precision | main ms/frame | flow ms/frame | decoder ms/frame | RTF | first audio ms | sessions ms | peak RSS MiB | audio Δ |");
    console.log("|---|---|---|---|---|---|---|---|---|---|---|");
    let reference: Float32Array | undefined;
    let shape = "";
    for (const runtime of runtimes) {
      for (const provider of PROVIDERS) {
        for (const precision of PRECISIONS) {
          const dir = bundleDirs[precision];
          const row = `| ${runtime.label} | ${provider} | ${precision} |`;
          const loadError = loadsIn.get(runtime.label)?.[provider];
          if (!dir || loadError) {
            console.log(`${row} ${!dir ? "no int8 graphs" : "provider does not load"} |||||||| |`);
            continue;
          }
          const audioPath = join(scratch, `${runtime.name}-${provider}-${precision}.f32`);
          const result = runCell(runtime, { kind: "pipeline", bundleDir: dir, precision, provider, audioPath, ...common });
          if ("error" in result || result.kind !== "pipeline") {
            console.log(`${row} failed: ${"error" in result ? result.error : result.kind} |||||||| |`);
            continue;
          }
          const audio = new Float32Array(readFileSync(audioPath).buffer.slice(0));
          reference ??= audio;
          shape = `${result.tokens} tokens, ${result.frames} frames; voice ${common.voiceSeconds} s encoded in ${format(result.encodeMs, 0)} ms`;
          const delta = compareTensors(audio, reference).relRms;
          console.log(
            `${row} ${format(result.mainMsPerFrame)} | ${format(result.flowMsPerFrame)} | ${format(result.decoderMsPerFrame)}${result.decoderInWorker ? " (worker)" : ""} | ${minMedian(result.rtf, 3)} | ${minMedian(result.firstAudioMs, 1)} | ${format(result.openMs, 0)} | ${format(result.peakRssMiB, 0)} | ${delta.toExponential(1)} |`,
          );
          if (!result.graphPrecisions.split(", ").every((graph) => graph.endsWith(precision))) console.log(`  (graphs used: ${result.graphPrecisions})`);
        }
      }
    }
    if (shape) console.log(`(${shape})`);

    if (existsSync(join(MIMI_FULL_FIXTURE, "mimi_decoder.onnx"))) await mimiFullTable(runtimes, loadsIn, scratch, common);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** The real-size data point: the full Mimi decoder (fp32 and its int8 quantization), one latent per call. */
async function mimiFullTable(runtimes: readonly Runtime[], loadsIn: ReadonlyMap<string, ProbeResult["loads"]>, scratch: string, common: Pick<CellSpec, "runs" | "voiceSeconds" | "threads">): Promise<void> {
  const dir = join(scratch, "mimi-full");
  mkdirSync(dir);
  symlinkSync(join(MIMI_FULL_FIXTURE, "mimi_decoder.onnx"), join(dir, "mimi_decoder.onnx"));
  let int8Note = "";
  try {
    int8Note = quantize(join(MIMI_FULL_FIXTURE, "mimi_decoder.onnx"), join(dir, "mimi_decoder_int8.onnx"), []);
  } catch (error) {
    int8Note = `int8 skipped: ${(error as Error).message}`;
  }
  console.log(`\nReal size: fixtures/mimi-full mimi_decoder.onnx (the released Mimi decoder's shape), ${MIMI_FULL_CALLS} one-latent calls from a fresh state; ms per call; int8: ${int8Note}`);
  console.log("| runtime | provider | precision | ms per call | peak RSS MiB |");
  console.log("|---|---|---|---|---|");
  for (const runtime of runtimes) {
    for (const provider of PROVIDERS) {
      for (const precision of PRECISIONS) {
        const row = `| ${runtime.label} | ${provider} | ${precision} |`;
        if (loadsIn.get(runtime.label)?.[provider]) {
          console.log(`${row} provider does not load | |`);
          continue;
        }
        if (precision === "int8" && !existsSync(join(dir, "mimi_decoder_int8.onnx"))) {
          console.log(`${row} no int8 graph | |`);
          continue;
        }
        const result = runCell(runtime, { kind: "mimi-full", bundleDir: dir, precision, provider, audioPath: "", ...common });
        if ("error" in result || result.kind !== "mimi-full") console.log(`${row} failed: ${"error" in result ? result.error : result.kind} | |`);
        else console.log(`${row} ${minMedian(result.msPerCall, 1)} | ${format(result.peakRssMiB, 0)} |`);
      }
    }
  }
}

if (values.cell) {
  const spec = JSON.parse(values.cell) as CellSpec;
  configureOnnxRuntime({ threads: spec.threads });
  const result = spec.kind === "pipeline" ? await measurePipeline(spec) : spec.kind === "mimi-full" ? await measureMimiFull(spec) : await probeProviders();
  console.log(JSON.stringify(result));
} else {
  await orchestrate();
}
