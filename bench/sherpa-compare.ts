/**
 * Our Pocket TTS pipeline and sherpa-onnx's (npm sherpa-onnx-node, prebuilt C++ over its own onnxruntime)
 * side by side in one run, on the same graphs, sentence and reference voice: wall time, RTF and time to first
 * audio, min / median over N runs, and ours ÷ sherpa.
 *   bun bench/sherpa-compare.ts [--model <bundle-dir>] [--precision fp32|int8] [--runs 3] [--warmup 1]
 *     [--voice-seconds 5.04] [--threads 1] [--voice cached|per-run] [--sherpa-runtime node|bun] [--node node]
 *     [--no-relax] [--sherpa-timeout-s 1800] [--json <path>] [--keep] [--decoder-worker on|off]
 * Without --model it runs the tiny golden fixture, whose numbers only show the harness works.
 *
 * Method (as bench/pocket.ts and docs/anchors.md): the 30-word sentence, a 5.04 s synthetic voice,
 * EOS disabled so every run reaches its frame cap ceil((tokens/3 + 2)·12.5). The two halves run one after the
 * other, never together: ours in this process, sherpa in a child process (by default under Node, see below)
 * that reports JSON. sherpa is configured to upstream semantics as far as its knobs go
 * (offline-tts-pocket-impl.h): num_steps = 1 LSD step (its default is 5), temperature 0.7, max_frames = our
 * frame cap and frames_after_eos = 10^6, so its EOS rule can never stop a run before the cap. What stays
 * sherpa's own: decoding in chunks of 15 frames only after the whole sentence is generated (its progress
 * callback fires per decoded chunk, so its first audio comes after all frames), the voice prefill re-run on
 * every request (it caches the encoder output, not the prefilled state), no BOS row before the voice (v1
 * semantics) unless the encoder graph emits one itself, and its own tokenizer (no NFKC).
 *
 * `--voice cached` (default, as bench/pocket.ts): ours encodes and prefills the voice once, outside the timed
 * runs; sherpa's warm-up run fills its encoder cache, so timed runs skip its encoder too. `--voice per-run`
 * (as the anchors): both pay for the encoder in every run (sherpa gets sample 0 of the voice nudged by (call + 1)·2^-20
 * per call, far below one 16-bit step, which defeats its encoder cache keyed by an audio hash).
 *
 * sherpa-onnx-node 1.13.8 under Bun 1.4.5: it loads and the synchronous `generate` works, but `generateAsync`
 * (the only entry point with a streaming callback) crashes Bun with a segfault. Hence the Node child by default;
 * `--sherpa-runtime bun` uses `generate`, so its first audio equals its total.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { BENCH_SENTENCE } from "./pocket-timing.ts";
import type { GraphPrecision } from "../src/models/pocket/bundle/pocket-bundle.ts";
import { generate } from "../src/engine/generate.ts";
import { maxFramesForTokens, planTextChunks } from "../src/models/pocket/text-chunks.ts";
import { generationJob, PocketRunner } from "../src/models/pocket/runner.ts";
import { closePocketSessions, openPocketSessions } from "../src/models/pocket/sessions.ts";
import { configureOnnxRuntime } from "../src/onnx/runtime.ts";
import { createPocketStages, voiceStateFromAudio } from "../src/models/pocket/pipeline.ts";
import { type FlowLmState } from "../src/models/pocket/stages/state.ts";
import { SentencePieceTokenizer } from "../src/text/sentencepiece.ts";
import { startDecoderWorker } from "../src/models/pocket/decoder/worker-client.ts";
import { createLogger } from "../src/log/logger.ts";
import { fixtureBundle } from "../test/models/pocket/bundle-fixture.ts";
import { SHERPA_HARD_CODED_CONDITIONING_DIM, writeSherpaLayout } from "./sherpa-layout.ts";

/** bench/pocket.ts's sentence (30 words, 44 tokens with the released tokenizer). */
const SENTENCE = BENCH_SENTENCE;
/** sherpa's EOS rule stops `frames_after_eos` steps after the first EOS; this many never comes before the cap. */
const SHERPA_FRAMES_AFTER_EOS_NEVER = 1_000_000;
const RESULT_PREFIX = "SHERPA_RESULT ";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    precision: { type: "string", default: "fp32" },
    runs: { type: "string", default: "3" },
    warmup: { type: "string", default: "1" },
    "voice-seconds": { type: "string", default: "5.04" },
    threads: { type: "string", default: "1" },
    voice: { type: "string", default: "cached" },
    "sherpa-runtime": { type: "string", default: "node" },
    node: { type: "string", default: "node" },
    "no-relax": { type: "boolean", default: false },
    "sherpa-timeout-s": { type: "string", default: "1800" },
    json: { type: "string" },
    keep: { type: "boolean", default: false },
    "decoder-worker": { type: "string", default: "on" },
  },
});
const isFixture = values.model === undefined;
const precision = values.precision as GraphPrecision;
if (precision !== "fp32" && precision !== "int8") throw new Error("--precision is fp32 or int8");
const runs = Number(values.runs);
const warmup = Number(values.warmup);
const threads = Number(values.threads);
const voiceMode = values.voice;
if (voiceMode !== "cached" && voiceMode !== "per-run") throw new Error("--voice is cached or per-run");
const sherpaRuntime = values["sherpa-runtime"];
if (sherpaRuntime !== "node" && sherpaRuntime !== "bun") throw new Error("--sherpa-runtime is node or bun");
const thisRuntime = typeof (globalThis as { Bun?: unknown }).Bun === "object" ? "bun" : "deno";

interface RunFigures {
  firstAudioMs: number;
  totalMs: number;
  audioSeconds: number;
}
interface SideResult {
  label: string;
  runs: RunFigures[];
  frames: number;
  peakRssMiB: number;
  loadMs: number;
  /** Voice encoder (+ prefill, for ours) outside the timed runs in `cached` mode. */
  voiceMs?: number;
  error?: string;
  notes: string[];
}

const layout = await writeSherpaLayout(values.model ?? fixtureBundle(), { precision, voiceSeconds: Number(values["voice-seconds"]), relaxTextEmbeddingDim: values["no-relax"] ? false : "auto" });
const { bundle } = layout;
if (bundle.tokenizer.format !== "sentencepiece") throw new Error("unreachable: writeSherpaLayout requires tokenizer.model");
const tokenizer = SentencePieceTokenizer.fromModelProto(new Uint8Array(await readFile(bundle.tokenizer.modelPath)));
const chunks = planTextChunks(SENTENCE, tokenizer, bundle.flags);
const tokens = chunks.reduce((sum, chunk) => sum + chunk.tokenIds.length, 0);
const frameCap = chunks.reduce((sum, chunk) => sum + maxFramesForTokens(chunk.tokenIds.length), 0);
const audioSecondsOf = (samples: number) => samples / bundle.dims.sampleRateHz;

// ---------------------------------------------------------------------------------------------------
// (a) ours, in this process

/** Peak resident set of this process (VmHWM on Linux, like the child's). */
function peakRssKiB(): number {
  const match = existsSync("/proc/self/status") ? /^VmHWM:\s+(\d+) kB/m.exec(readFileSync("/proc/self/status", "utf8")) : null;
  return match ? Number(match[1]) : process.resourceUsage().maxRSS;
}

async function runOurs(): Promise<SideResult> {
  configureOnnxRuntime({ threads });
  const loadStart = performance.now();
  const sessions = await openPocketSessions(bundle);
  const stages = await createPocketStages(bundle, sessions);
  // The decoder as the server runs it: in a worker thread, overlapping sampling (worker-decoder.ts).
  const decoderWorker = values["decoder-worker"] === "off" ? null : await startDecoderWorker(bundle, sessions.provider, createLogger("warn"));
  // The server's runner, as the engine drives it (one request).
  const runner = PocketRunner.forStages(stages, bundle.dims.sampleRateHz, decoderWorker ?? stages.mimiDecoder);
  const timing = { nativeSampleRateHz: bundle.dims.sampleRateHz, framesPerSecond: bundle.dims.frameRateHz };
  const loadMs = performance.now() - loadStart;
  const notes: string[] = [];
  if (bundle.flags.insertBosBeforeVoice && stages.voiceEncoder?.bosBakedIn === false) notes.push("ours inserts bos_before_voice before the voice rows; sherpa does not (v1 semantics), so its prefill is one row shorter");
  let voiceMs: number | undefined;
  let cachedVoice: FlowLmState | undefined;
  if (voiceMode === "cached") {
    const start = performance.now();
    cachedVoice = await voiceStateFromAudio(stages, layout.voiceSamples);
    voiceMs = performance.now() - start;
  }
  const figures: RunFigures[] = [];
  let frames = 0;
  for (let run = 0; run < warmup + runs; run++) {
    const start = performance.now();
    const voice = cachedVoice ?? (await voiceStateFromAudio(stages, layout.voiceSamples));
    let firstAudioMs = Number.NaN;
    let samples = 0;
    frames = 0;
    // EOS disabled: an unreachable threshold, so every chunk runs to its frame cap.
    for await (const frame of generate(runner, timing, generationJob({ voice, chunks, seed: run, params: { eosThreshold: Number.POSITIVE_INFINITY } }))) {
      if (frames++ === 0) firstAudioMs = performance.now() - start;
      samples += frame.samples.length;
    }
    if (run >= warmup) figures.push({ firstAudioMs, totalMs: performance.now() - start, audioSeconds: audioSecondsOf(samples) });
  }
  decoderWorker?.close();
  await closePocketSessions(sessions);
  return { label: `ours (${sessions.provider}, ${thisRuntime}, decoder ${decoderWorker ? "in a worker thread" : "in-process"})`, runs: figures, frames, peakRssMiB: peakRssKiB() / 1024, loadMs, voiceMs, notes };
}

// ---------------------------------------------------------------------------------------------------
// (b) sherpa-onnx-node, in a child process

/** The child: plain CommonJS, so it runs under Node 20 (no TypeScript) as well as under Bun. */
const SHERPA_CHILD = String.raw`"use strict";
const fs = require("node:fs");
const job = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const sherpa = require(job.sherpaModule);
function readWav16(path) {
  const data = fs.readFileSync(path);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const tag = (offset) => data.toString("latin1", offset, offset + 4);
  let rate = 0;
  for (let offset = 12; offset + 8 <= data.length; ) {
    const size = view.getUint32(offset + 4, true);
    if (tag(offset) === "fmt ") rate = view.getUint32(offset + 12, true);
    else if (tag(offset) === "data") {
      const samples = new Float32Array(size / 2);
      for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(offset + 8 + i * 2, true) / 32768;
      return { samples, rate };
    }
    offset += 8 + size + (size % 2);
  }
  throw new Error("no data chunk in " + path);
}
/** VmHWM: getrusage's maxRSS of an exec'd child can carry the forking parent's peak. */
function peakRssKiB() {
  try {
    const match = /^VmHWM:\s+(\d+) kB/m.exec(fs.readFileSync("/proc/self/status", "utf8"));
    if (match) return Number(match[1]);
  } catch {}
  return process.resourceUsage().maxRSS;
}
async function main() {
  const loadStart = performance.now();
  const tts = new sherpa.OfflineTts({ model: { pocket: job.pocket, numThreads: job.threads, debug: 0, provider: "cpu" } });
  const loadMs = performance.now() - loadStart;
  const voice = readWav16(job.voiceWav);
  const runs = [];
  for (let run = 0; run < job.warmup + job.runs; run++) {
    let referenceAudio = voice.samples;
    if (job.nudgeVoicePerCall) {
      referenceAudio = voice.samples.slice();
      referenceAudio[0] += (run + 1) / 2 ** 20;
    }
    const generationConfig = new sherpa.GenerationConfig({ numSteps: job.numSteps, silenceScale: 1, referenceAudio, referenceSampleRate: voice.rate, extra: { ...job.extra, seed: run } });
    const request = { text: job.text, sid: 0, speed: 1, generationConfig };
    const start = performance.now();
    let firstAudioMs = NaN;
    let audio;
    // Warm-up calls go through the synchronous generate(): an onnxruntime error there aborts the child with
    // its message, whereas inside generateAsync it leaves the promise pending forever.
    const streaming = job.streaming && run >= job.warmup;
    if (streaming) {
      audio = await tts.generateAsync({ ...request, onProgress: () => { if (Number.isNaN(firstAudioMs)) firstAudioMs = performance.now() - start; return 1; } });
    } else {
      audio = tts.generate(request);
    }
    const totalMs = performance.now() - start;
    if (!streaming) firstAudioMs = totalMs;
    if (run >= job.warmup) runs.push({ firstAudioMs, totalMs, samples: audio.samples.length, sampleRate: audio.sampleRate });
  }
  const runtime = typeof Bun === "object" ? "bun " + Bun.version : "node " + process.versions.node;
  process.stdout.write(${JSON.stringify(RESULT_PREFIX)} + JSON.stringify({ version: sherpa.version, onnxruntime: sherpa.onnxruntimeVersion, runtime, loadMs, runs, peakRssKiB: peakRssKiB() }) + "\n");
}
main().catch((error) => { console.error("sherpa child failed: " + (error && error.stack || error)); process.exit(1); });
`;

function runSherpa(): SideResult {
  const streaming = sherpaRuntime === "node";
  const label = `sherpa-onnx-node (C++, ${sherpaRuntime})`;
  const notes: string[] = [];
  if (!streaming) notes.push("sherpa under Bun: generate() without callback (generateAsync segfaults Bun), so its first audio = its total");
  const job = {
    sherpaModule: createRequire(import.meta.url).resolve("sherpa-onnx-node"),
    pocket: layout.pocket,
    threads,
    voiceWav: layout.voiceWav,
    text: SENTENCE,
    numSteps: 1,
    extra: { temperature: 0.7, max_frames: frameCap, frames_after_eos: SHERPA_FRAMES_AFTER_EOS_NEVER },
    // At least one: it fills the encoder cache in `cached` mode and fails fast on a graph sherpa cannot run.
    warmup: Math.max(warmup, 1),
    runs,
    streaming,
    nudgeVoicePerCall: voiceMode === "per-run",
  };
  const jobPath = join(layout.directory, "sherpa-job.json");
  const childPath = join(layout.directory, "sherpa-child.cjs");
  writeFileSync(jobPath, JSON.stringify(job));
  writeFileSync(childPath, SHERPA_CHILD);
  const command = sherpaRuntime === "node" ? values.node! : process.execPath;
  const child = spawnSync(command, [childPath, jobPath], { encoding: "utf8", timeout: Number(values["sherpa-timeout-s"]) * 1000, maxBuffer: 64 * 1024 * 1024 });
  const resultLine = child.stdout?.split("\n").find((line) => line.startsWith(RESULT_PREFIX));
  if (!resultLine) {
    const stderr = (child.stderr ?? "").trim();
    const ortError = /what\(\):\s*([\s\S]*?)(?:\n\s*Please fix|$)/.exec(stderr)?.[1]?.replace(/\s+/g, " ").trim();
    let error = child.error ? `${child.error.message}` : child.signal ? `killed by ${child.signal}` : `exit ${child.status}`;
    if (ortError) error += `: ${ortError}`;
    else if (stderr) error += `: ${stderr.split("\n").slice(-3).join(" | ")}`;
    if (/text_embeddings/.test(ortError ?? "") && bundle.dims.conditioningDim !== SHERPA_HARD_CODED_CONDITIONING_DIM) {
      notes.push(`sherpa feeds every AR step an empty [1, 0, ${SHERPA_HARD_CODED_CONDITIONING_DIM}] text_embeddings (hard-coded d_model); this graph is ${bundle.dims.conditioningDim} wide (drop --no-relax to declare that axis symbolic in the sherpa copy)`);
    }
    return { label, runs: [], frames: 0, peakRssMiB: Number.NaN, loadMs: Number.NaN, error, notes };
  }
  const result = JSON.parse(resultLine.slice(RESULT_PREFIX.length)) as { version: string; onnxruntime: string; runtime: string; loadMs: number; peakRssKiB: number; runs: { firstAudioMs: number; totalMs: number; samples: number; sampleRate: number }[] };
  notes.push(`sherpa-onnx ${result.version} (onnxruntime ${result.onnxruntime}) under ${result.runtime}, ${job.warmup} warm-up call(s)`);
  return {
    label: `sherpa-onnx-node ${result.version} (C++, ${result.runtime.split(" ")[0]})`,
    runs: result.runs.map((run) => ({ firstAudioMs: run.firstAudioMs, totalMs: run.totalMs, audioSeconds: run.samples / run.sampleRate })),
    frames: Math.round(result.runs[0]!.samples / bundle.dims.samplesPerFrame),
    peakRssMiB: result.peakRssKiB / 1024,
    loadMs: result.loadMs,
    notes,
  };
}

// ---------------------------------------------------------------------------------------------------

const ours = await runOurs();
const sherpa = runSherpa();

const sorted = (list: number[]) => [...list].sort((a, b) => a - b);
const median = (list: number[]) => sorted(list)[Math.floor(list.length / 2)]!;
const rtfs = (side: SideResult) => side.runs.map((run) => run.totalMs / 1000 / run.audioSeconds);
const pair = (list: number[], digits: number) => (list.length ? `${sorted(list)[0]!.toFixed(digits)} / ${median(list).toFixed(digits)}` : "–");
const row = (side: SideResult) =>
  side.error
    ? `| ${side.label} | failed: ${side.error} | | | | | |`
    : `| ${side.label} | ${side.frames} | ${pair(rtfs(side), 3)} | ${pair(side.runs.map((run) => run.firstAudioMs), 0)} | ${pair(side.runs.map((run) => run.totalMs), 0)} | ${side.loadMs.toFixed(0)} | ${side.peakRssMiB.toFixed(0)} |`;
const ratio = (of: (side: SideResult) => number[]) => (sherpa.error || !sherpa.runs.length ? "–" : `${(median(of(ours)) / median(of(sherpa))).toFixed(2)}×`);

console.log(`bundle: ${bundle.name} (${bundle.layout}; lm_main ${layout.precision.lmMain}, lm_flow ${layout.precision.lmFlow}, decoder ${layout.precision.decoder}; d_model ${bundle.dims.conditioningDim}, ${bundle.dims.flowLmLayers} layers)${isFixture ? " — the tiny golden fixture: these figures only show that the harness works, not how fast either runtime is" : ""}`);
console.log(`sherpa layout: ${values.keep ? layout.directory : "a temp dir (--keep keeps it)"}${layout.relaxedTextEmbeddingDim ? ` (lm_main.onnx copied with a symbolic text_embeddings width: sherpa hard-codes ${SHERPA_HARD_CODED_CONDITIONING_DIM})` : ""}`);
console.log(`sentence: ${SENTENCE.split(/\s+/).length} words, ${tokens} tokens (ours), EOS disabled, frame cap ${frameCap}; voice ${values["voice-seconds"]} s (${voiceMode}${ours.voiceMs !== undefined ? `, ours encoded + prefilled it in ${ours.voiceMs.toFixed(0)} ms` : ""}); ${threads} intra-op thread(s) each; ${warmup} warm-up + ${runs} timed runs each, one side after the other`);
console.log(`sherpa config: num_steps 1, temperature 0.7, max_frames ${frameCap}, frames_after_eos ${SHERPA_FRAMES_AFTER_EOS_NEVER} (EOS never stops a run), silence_scale 1 (its default 0.2 shortens silences), chunk_size 15 (its default: it decodes after generating the whole sentence)`);
console.log("");
console.log("| runtime | frames | RTF (min / median) | first audio ms (min / median) | total ms (min / median) | load ms | peak RSS MiB |");
console.log("|---|---|---|---|---|---|---|");
console.log(row(ours));
console.log(row(sherpa));
console.log(`| ours ÷ sherpa (medians) | | ${ratio(rtfs)} | ${ratio((side) => side.runs.map((run) => run.firstAudioMs))} | ${ratio((side) => side.runs.map((run) => run.totalMs))} | | |`);
const notes = [...ours.notes, ...sherpa.notes];
if (voiceMode === "cached") notes.push("timed runs exclude the voice encoder on both sides; sherpa still re-runs the voice prefill in every request, ours reuses the prefilled state");
if (!sherpa.error && ours.frames !== sherpa.frames) notes.push(`frame counts differ (ours ${ours.frames}, sherpa ${sherpa.frames}): RTF is per audio second, totals are not comparable one to one`);
if (notes.length) console.log(`\n${notes.map((note) => `- ${note}`).join("\n")}`);
if (values.json) writeFileSync(values.json, JSON.stringify({ bundle: bundle.name, fixture: isFixture, precision: layout.precision, tokens, frameCap, voiceMode, threads, warmup, runs, ours, sherpa }, null, 2));
if (!values.keep) rmSync(layout.directory, { recursive: true, force: true });
