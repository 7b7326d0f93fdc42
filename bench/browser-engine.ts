/**
 * The in-browser engine as a visitor gets it: headless Chromium (Debian's chromium) opens the server's page,
 * loads the served model into the page's worker (/playground/engine.js) and speaks there, with no speech
 * request to the server. Per thread count: the model load with a cold cache (a fresh browser profile: every
 * file fetched) and a warm one (the same profile, a new page: files read from Cache Storage), then first
 * audio and RTF of `--runs` utterances, each listened to for `--seconds` of audio, as the worker measures them
 * (from the speak message to the first frame; wall time over audio time), and the resident memory of all the
 * bench's Chromium processes with no page open, and at its peak over both loads and the utterances (the page
 * holds the model: browser memory).
 *   bun bench/browser-engine.ts [--model <bundle>] [--threads 1,2] [--decoder-worker off,on] [--runs 3] [--seconds 6] [--webgpu] [--markdown]
 * --decoder-worker: the ONNX Mimi decoder in the engine's worker (off) or in a worker of its own (on), where
 * it overlaps sampling as the server's decoder threads do. Each row's threads are per onnxruntime instance.
 * Without --model it serves the Pocket fixture (../shared/fixtures/pocket-tiny). Threads beyond 1 need the
 * page to be cross-origin isolated (the server sends COOP/COEP on /). --webgpu offers Chromium's WebGPU and
 * asks the page for its WebGPU EP and the WGSL decoder (on a machine without a GPU: a software adapter).
 * The browser and the server share this machine's cores; the server only serves files here.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import type { BrowserContext } from "playwright-core";
import { launchChromium } from "../src/chromium/launch.ts";
import { BENCH_SENTENCE } from "./pocket-timing.ts";
import { startChildServer } from "./support/child-server.ts";
import { tablePrinter } from "./support/streams.ts";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    threads: { type: "string", default: "1,2" },
    "decoder-worker": { type: "string", default: "off,on" },
    runs: { type: "string", default: "3" },
    seconds: { type: "string", default: "6" },
    webgpu: { type: "boolean", default: false },
    markdown: { type: "boolean", default: false },
  },
});
const modelDir = resolve(values.model ?? "../shared/fixtures/pocket-tiny");
if (!existsSync(modelDir)) throw new Error(`no bundle at ${modelDir}: pass --model <bundle folder>`);
const threadCounts = values.threads!.split(",").map(Number);
const decoderWorkerChoices = values["decoder-worker"]!.split(",").map((choice) => choice === "on");
const runs = Number(values.runs);
const listenSeconds = Number(values.seconds);
const ep = values.webgpu ? "webgpu" : "wasm";

interface LoadOutcome {
  loadSeconds: number;
  fetchedBytes: number;
  cachedBytes: number;
  executionProvider: string;
  decoder: string;
  decoderWorker: boolean;
  threads: number;
  crossOriginIsolated: boolean;
}

interface SpeakOutcome {
  firstAudioMs: number;
  rtf: number;
  audioSeconds: number;
  wallSeconds: number;
  stageSeconds: Record<string, number>;
}

const server = await startChildServer(["--model", modelDir, "--cors", "false"], 120_000);
/** An extra flag on this bench's Chromium, so its processes are told apart from any other Chromium's. */
const RSS_MARKER = `--voxedge-bench=${process.pid}`;
const browser = await launchChromium({ webgpu: values.webgpu, extraArgs: [RSS_MARKER] });
const mib = (bytes: number) => (bytes / 1024 ** 2).toFixed(1);

/**
 * Resident memory of this bench's Chromium (its browser process, found by the marker flag it was started
 * with, and every descendant: renderers, where the page's workers run, the GPU and utility processes), in MiB.
 */
function chromiumRssMiB(): number {
  const listed = spawnSync("ps", ["-e", "-o", "pid=,ppid=,rss=,args="], { encoding: "utf8" }).stdout.split("\n");
  const processes = listed.map((line) => /^\s*(\d+)\s+(\d+)\s+(\d+)\s+(.*)$/.exec(line)).filter((match) => match !== null).map((match) => ({ pid: match[1]!, ppid: match[2]!, rssKiB: Number(match[3]), args: match[4]! }));
  const ours = new Set(processes.filter((entry) => entry.args.includes(RSS_MARKER)).map((entry) => entry.pid));
  for (let grew = true; grew; ) {
    grew = false;
    for (const entry of processes) if (!ours.has(entry.pid) && ours.has(entry.ppid)) grew = Boolean(ours.add(entry.pid));
  }
  return processes.filter((entry) => ours.has(entry.pid)).reduce((sum, entry) => sum + entry.rssKiB, 0) / 1024;
}

/** Samples chromiumRssMiB every 200 ms until stopped; gives the first sample and the peak. */
function watchChromiumRss(): () => { startMiB: number; peakMiB: number } {
  const startMiB = chromiumRssMiB();
  let peakMiB = startMiB;
  const timer = setInterval(() => (peakMiB = Math.max(peakMiB, chromiumRssMiB())), 200);
  return () => {
    clearInterval(timer);
    return { startMiB, peakMiB: Math.max(peakMiB, chromiumRssMiB()) };
  };
}
const median = (numbers: number[]) => [...numbers].sort((a, b) => a - b)[Math.floor(numbers.length / 2)]!;

/** Each runner stage's wall milliseconds per second of audio, over every run: where the page's time goes. */
function stageShares(spoken: readonly SpeakOutcome[]): string {
  const audio = spoken.reduce((sum, outcome) => sum + outcome.audioSeconds, 0);
  const total = (stage: string) => spoken.reduce((sum, outcome) => sum + (outcome.stageSeconds[stage] ?? 0), 0);
  return ["flow_lm", "flow_head", "decode", "prefill"].map((stage) => ((1000 * total(stage)) / audio).toFixed(0)).join(" / ");
}

/** Opens the server's page in `context` and loads the model into a new engine there. */
async function openAndLoad(context: BrowserContext, threads: number, decoderWorker: boolean) {
  const page = await context.newPage();
  page.on("pageerror", (error) => console.error(`page error: ${error.message}`));
  await page.goto(`${server.base}/`);
  const load = await page.evaluate(
    async ({ threads, ep, decoderWorker }) => {
      const { BrowserEngine } = await import("/playground/browser-engine.js" as string);
      const engine = new BrowserEngine();
      (window as unknown as { benchEngine: unknown }).benchEngine = engine;
      return engine.load({ model: "pocket-tts", threads, ep, decoderWorker });
    },
    { threads, ep, decoderWorker },
  );
  return { page, load: load as LoadOutcome };
}

const row = tablePrinter(["threads", "EP / decoder", "isolated", "cold load s (MiB fetched)", "warm load s (MiB cached)", "first audio ms p50 (max)", "RTF p50 (max)", "audio s / run", "ms per audio s: flow_lm / flow_head / decode / prefill", "Chromium RSS MiB: idle → peak"], values.markdown);
try {
  for (const threads of threadCounts) for (const decoderWorker of decoderWorkerChoices) {
    // A fresh profile each: the cold load fetches every file.
    const context = await browser.newContext();
    const stopWatching = watchChromiumRss();
    const cold = await openAndLoad(context, threads, decoderWorker);
    await cold.page.close();
    const warm = await openAndLoad(context, threads, decoderWorker);
    // Built-in voice where the bundle has one, else a voice cloned in the page from a 3 s synthetic clip.
    const voice = (await warm.page.evaluate(async () => {
      const engine = (window as unknown as { benchEngine: { info: { voices: string[]; sampleRateHz: number }; clone(samples: Float32Array): Promise<{ voiceId: string }> } }).benchEngine;
      if (engine.info.voices.length > 0) return { voice: engine.info.voices[0] };
      const rate = engine.info.sampleRateHz;
      const clip = Float32Array.from({ length: 3 * rate }, (_, index) => 0.3 * Math.sin((2 * Math.PI * 180 * index) / rate) * Math.sin((Math.PI * index) / (3 * rate)));
      return { voiceId: (await engine.clone(clip)).voiceId };
    })) as { voice?: string; voiceId?: string };
    const spoken: SpeakOutcome[] = [];
    for (let run = 0; run < runs; run++) {
      spoken.push(
        (await warm.page.evaluate(
          async ({ text, seconds, seed, voice }) => {
            const engine = (window as unknown as { benchEngine: { info: { sampleRateHz: number }; speak(request: object, onAudio: (samples: Float32Array) => void): { id: number; done: Promise<SpeakOutcome> }; cancel(id: number): void } }).benchEngine;
            let samples = 0;
            const speaking = engine.speak({ text, seed, ...voice }, (frame) => {
              samples += frame.length;
              if (samples >= seconds * engine.info.sampleRateHz) engine.cancel(speaking.id);
            });
            return speaking.done;
          },
          { text: BENCH_SENTENCE, seconds: listenSeconds, seed: run + 1, voice },
        )) as SpeakOutcome,
      );
    }
    const rss = stopWatching();
    await context.close();
    const firstAudio = spoken.map((outcome) => outcome.firstAudioMs);
    const rtf = spoken.map((outcome) => outcome.rtf);
    row([
      warm.load.threads,
      `${warm.load.executionProvider} / ${warm.load.decoder}${warm.load.decoderWorker ? " in a worker" : ""}`,
      warm.load.crossOriginIsolated ? "yes" : "no",
      `${cold.load.loadSeconds.toFixed(2)} (${mib(cold.load.fetchedBytes)})`,
      `${warm.load.loadSeconds.toFixed(2)} (${mib(warm.load.cachedBytes)})`,
      `${median(firstAudio).toFixed(0)} (${Math.max(...firstAudio).toFixed(0)})`,
      `${median(rtf).toFixed(3)} (${Math.max(...rtf).toFixed(3)})`,
      median(spoken.map((outcome) => outcome.audioSeconds)).toFixed(2),
      stageShares(spoken),
      `${rss.startMiB.toFixed(0)} → ${rss.peakMiB.toFixed(0)}`,
    ]);
  }
} finally {
  await browser.close();
  server.stop();
}
console.log(`\nChromium ${browser.version()}, model ${modelDir}, ${runs} runs of ${listenSeconds} s each per row, this machine's ${navigator.hardwareConcurrency} cores shared by browser and server.`);
