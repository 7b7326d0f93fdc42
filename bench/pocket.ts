/**
 * Pocket TTS on a bundle: per-stage milliseconds per frame, real-time factor and time to first audio for a
 * 30-word sentence with EOS disabled (every run reaches its frame cap, so cost per frame is what is
 * measured, as in docs/anchors.md).
 *   bun bench/pocket.ts [--model <bundle-dir>] [--precision int8|fp32] [--voice-seconds 5] [--runs 3] [--decoder-worker on|off]
 * The Mimi decoder runs as the server runs it: in a worker thread (overlapping sampling) unless
 * `--decoder-worker off`; its ms/frame is then the time each decode takes as seen from the main thread.
 * Without --model it runs the tiny golden fixture, whose numbers only show the harness works.
 */
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { loadPocketBundle } from "../src/models/pocket/bundle/load.ts";
import { generate } from "../src/engine/generate.ts";
import { planTextChunks } from "../src/models/pocket/text-chunks.ts";
import { generationJob, PocketRunner } from "../src/models/pocket/runner.ts";
import { closePocketSessions, openPocketSessions } from "../src/models/pocket/sessions.ts";
import { createPocketStages, voiceStateFromAudio } from "../src/models/pocket/pipeline.ts";
import { SentencePieceTokenizer } from "../src/text/sentencepiece.ts";
import { startDecoderWorker } from "../src/models/pocket/decoder/worker-client.ts";
import { createLogger } from "../src/log/logger.ts";
import { fixtureBundle } from "../test/models/pocket/bundle-fixture.ts";
import { BENCH_SENTENCE, StageClock, syntheticVoice } from "./pocket-timing.ts";

const { values } = parseArgs({ options: { model: { type: "string" }, "voice-seconds": { type: "string", default: "5.04" }, runs: { type: "string", default: "3" }, precision: { type: "string", default: "int8" }, "decoder-worker": { type: "string", default: "on" } } });
const bundleDir = values.model ?? fixtureBundle();
const runs = Number(values.runs);
const SENTENCE = BENCH_SENTENCE;

// int8 where the bundle has it, as the server runs on the CPU.
const bundle = await loadPocketBundle(bundleDir, { precision: values.precision === "fp32" ? "fp32" : "int8" });
const loadStart = performance.now();
const sessions = await openPocketSessions(bundle);
const stages = await createPocketStages(bundle, sessions);
const decoderWorker = values["decoder-worker"] === "off" ? null : await startDecoderWorker(bundle, sessions.provider, createLogger("warn"));
const loadMs = performance.now() - loadStart;
if (bundle.tokenizer.format !== "sentencepiece") throw new Error("the bench reads tokenizer.model bundles");
const tokenizer = SentencePieceTokenizer.fromModelProto(new Uint8Array(await readFile(bundle.tokenizer.modelPath)));

// The server's runner, driven by the server's engine (one request).
const runner = PocketRunner.forStages(stages, bundle.dims.sampleRateHz, decoderWorker ?? stages.mimiDecoder);
const timing = { nativeSampleRateHz: bundle.dims.sampleRateHz, framesPerSecond: bundle.dims.frameRateHz };
const clock = new StageClock();

const voiceAudio = syntheticVoice(Number(values["voice-seconds"]), bundle.dims.sampleRateHz);
const encodeStart = performance.now();
const voice = await voiceStateFromAudio(stages, voiceAudio);
const encodeMs = performance.now() - encodeStart;
const chunks = planTextChunks(SENTENCE, tokenizer, bundle.flags);

const results: { rtf: number; firstAudioMs: number; frames: number }[] = [];
for (let run = 0; run < runs; run++) {
  clock.reset();
  const start = performance.now();
  let firstAudioMs = Number.NaN;
  let frames = 0;
  // EOS disabled: an unreachable threshold, so every chunk runs to its frame cap.
  for await (const _frame of generate(runner, timing, generationJob({ voice, chunks, seed: run, params: { eosThreshold: Number.POSITIVE_INFINITY } }), clock.onTick)) {
    if (frames++ === 0) firstAudioMs = performance.now() - start;
  }
  const seconds = (performance.now() - start) / 1000;
  results.push({ rtf: seconds / ((frames * bundle.dims.samplesPerFrame) / bundle.dims.sampleRateHz), firstAudioMs, frames });
}

const perFrame = (stage: "flow_lm" | "flow_head" | "decode") => clock.perFrame(stage, results.at(-1)!.frames).toFixed(2);
const sorted = (list: number[]) => [...list].sort((a, b) => a - b);
const rtfs = sorted(results.map((result) => result.rtf));
const firsts = sorted(results.map((result) => result.firstAudioMs));
console.log(`bundle: ${bundle.name} (${bundle.layout}, ${bundle.graphs.flowLmMain.precision}); ${sessions.provider}; ${typeof (globalThis as { Bun?: unknown }).Bun === "object" ? "bun" : "deno"}; decoder ${decoderWorker ? "in a worker thread" : "in the main thread"}; FlowLM caches ${stages.flowLm.windowedCaches ? "windowed" : "1000 rows"}`);
console.log(`sentence: ${SENTENCE.split(/\s+/).length} words, ${chunks.reduce((sum, chunk) => sum + chunk.tokenIds.length, 0)} tokens, ${results[0]!.frames} frames; voice ${values["voice-seconds"]} s encoded in ${encodeMs.toFixed(0)} ms; sessions opened in ${loadMs.toFixed(0)} ms`);
console.log("| main ms/frame | flow ms/frame | decoder ms/frame | RTF (min / median) | first audio ms (min / median) |");
console.log("|---|---|---|---|---|");
console.log(`| ${perFrame("flow_lm")} | ${perFrame("flow_head")} | ${perFrame("decode")} | ${rtfs[0]!.toFixed(3)} / ${rtfs[Math.floor(rtfs.length / 2)]!.toFixed(3)} | ${firsts[0]!.toFixed(1)} / ${firsts[Math.floor(firsts.length / 2)]!.toFixed(1)} |`);
decoderWorker?.close();
await closePocketSessions(sessions);
