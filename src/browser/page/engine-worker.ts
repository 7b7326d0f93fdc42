/**
 * The page's speech engine: a module worker (`/playground/engine.js`, built by build.ts) that runs the server's
 * own Pocket TTS model, `PocketModel` with its runner, under the server's own engine (engine/core.ts: its plans,
 * its frame cap per request) on onnxruntime-web in the browser. Voice names mean what they mean on the server
 * (voices/catalog.ts).
 * The model's files come from the server's listing (model-files.ts) and are mounted at MODEL_ROOT, so the
 * bundle loaders read them by path as on the server.
 *
 * Placement is the server's own (`--device`, decoder/choice.ts): with an adapter from `navigator.gpu` that is a real GPU (or any
 * adapter when the page asks for "webgpu"), the language-model graphs run on onnxruntime-web's WebGPU EP
 * (fp32) and the Mimi decoder on our WGSL kernels; otherwise everything runs on the wasm EP (int8 where the
 * bundle has it), with threads when the page is cross-origin isolated.
 *
 * Page → worker (every request carries the page's `id`; requests run one after another, in order):
 *   {type: "load", id, model, apiKey?, source?: "server"|"hub", ep?: "auto"|"wasm"|"webgpu", threads?, decoderWorker?: boolean}
 *   {type: "speak", id, text, voice?, voiceId?, seed?, normalization?: "auto"|"on"|"off"}
 *   {type: "clone", id, samples: Float32Array (mono, 24 kHz)}
 *   {type: "cancel", id}                                            a speak, running or still waiting
 *   {type: "conformance", id, listing, decoder?: "onnx"|"wgsl", batch?, ep?}
 * Worker → page:
 *   {type: "progress", id, file, loadedBytes, totalBytes, from}    while a load's files load
 *   {type: "ready", id, info}                                       after a load (EngineInfo)
 *   {type: "audio", id, samples: Float32Array}                      one 80 ms frame, at info.sampleRateHz
 *   {type: "done", id, stats: SpeakStats}                           after a speak's last frame
 *   {type: "voice", id, voiceId, seconds}                           after a clone
 *   {type: "report", id, report}                                    a conformance report
 *   {type: "error", id, message}                                    that request failed
 *   {type: "log", level, message}                                   the model's log (why a decoder worker did not start)
 */
import { DEFAULT_MARKDOWN_READING } from "../../text/markdown.ts";
import { mountFiles, unmountFiles } from "./platform/fs.ts";
import { ModelFiles, fetchListing, type FileSource, type ListedFile } from "./model-files.ts";
import { KERNEL_SOURCES } from "./kernel-sources.ts";
import { provideKernelSources } from "../../gpu/kernel.ts";
import { configureOnnxRuntime, configuredOnnxThreads } from "../../onnx/runtime.ts";
import { PocketModel } from "../../models/pocket/model.ts";
import type { VoicePrompt } from "../../models/contract.ts";
import { Engine } from "../../engine/core.ts";
import { SerialQueue } from "../../async/serial-queue.ts";
import type { TextNormalizationMode } from "../../api/speech.ts";
import { utteranceJob } from "../../speech/job.ts";
import { builtInVoiceNamed } from "../../voices/catalog.ts";
import { Worker as PageWorker } from "./platform/worker-threads.ts";
import type { SpawnDecoderWorker } from "../../models/pocket/decoder/worker-client.ts";
import type { DecoderWorkerMount } from "./decoder-worker.ts";
import type { DevicePolicy } from "../../models/pocket/decoder/choice.ts";
import type { Logger } from "../../log/logger.ts";

const MODEL_ROOT = "/models";
const FIXTURE_ROOT = "/fixture";

export type ExecutionProviderChoice = "auto" | "wasm" | "webgpu";

export interface EngineInfo {
  model: string;
  description: string;
  /** Where the language-model graphs run. */
  executionProvider: "wasm" | "webgpu";
  /** Which Mimi decoder runs: our WGSL kernels or the ONNX graph. */
  decoder: "wgsl" | "onnx";
  /** The ONNX decoder runs in a worker of its own, overlapping sampling (as the server's decoder threads). */
  decoderWorker: boolean;
  /** What the model warned of while it loaded. */
  warnings: string[];
  adapter?: string;
  threads: number;
  crossOriginIsolated: boolean;
  voices: string[];
  supportsCloning: boolean;
  sampleRateHz: number;
  loadSeconds: number;
  fetchedBytes: number;
  cachedBytes: number;
}

export interface SpeakStats {
  firstAudioMs: number;
  audioSeconds: number;
  wallSeconds: number;
  rtf: number;
  /** Wall seconds per runner stage (prefill, flow_lm, flow_head, decode), summed over the utterance. */
  stageSeconds: Record<string, number>;
}

type Message =
  | { type: "load"; id: number; model: string; apiKey?: string; source?: FileSource; ep?: ExecutionProviderChoice; threads?: number; decoderWorker?: boolean }
  | { type: "speak"; id: number; text: string; voice?: string; voiceId?: string; seed?: number | string; normalization?: TextNormalizationMode }
  | { type: "clone"; id: number; samples: Float32Array }
  | { type: "cancel"; id: number }
  | { type: "conformance"; id: number; listing: string; decoder?: "onnx" | "wgsl"; batch?: number; ep?: ExecutionProviderChoice };

const post = (message: object, transfer: Transferable[] = []) => (self as unknown as Worker).postMessage(message, transfer);

/** The model's log, to the console and to the page (a "log" message), which keeps the warnings (EngineInfo.warnings). */
const warnings: string[] = [];
const logTo = (level: "info" | "warn" | "error") => (message: string, fields?: Record<string, unknown>) => {
  const line = fields && Object.keys(fields).length > 0 ? `${message} ${JSON.stringify(fields)}` : message;
  console[level](line);
  if (level !== "info") warnings.push(line);
  post({ type: "log", level, message: line });
};
const logger: Logger = { debug: () => undefined, info: logTo("info"), warn: logTo("warn"), error: logTo("error") };

provideKernelSources(KERNEL_SOURCES);

let loaded: { model: PocketModel; engine: Engine; info: EngineInfo } | undefined;
const clonedVoices = new Map<string, VoicePrompt>();
const cancels = new Map<number, AbortController>();
/** The page's requests, one after another in the order sent: a load must not close a model a speak is using. */
const requests = new SerialQueue();

/**
 * Places of the page's engine: the page's requests run one after another, so one speak runs at a time; one
 * cancelled holds its place until the engine's next tick, so the next speak may wait that long.
 */
const PAGE_ENGINE_LIMITS = { maxStreams: 1, maxQueue: 1 };

/** The built-in voice a name means, by the server's rule (voices/catalog.ts); the page has no uploads and no --voice-aliases. */
function builtInVoice(asked: string | undefined, capabilities: PocketModel["capabilities"]): string {
  const voice = builtInVoiceNamed(asked, capabilities);
  if (voice !== undefined) return voice;
  const name = asked?.trim().toLowerCase() || "default";
  throw new Error(`this model has no voice '${name}'; it has ${capabilities.voices.join(", ") || "none (clone one)"}`);
}

/** Resolves after the messages already queued for this worker have been handled. */
function nextTask(): Promise<void> {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      channel.port1.close();
      resolve();
    };
    channel.port2.postMessage(null);
  });
}

/**
 * Threads onnxruntime-web may start: only where SharedArrayBuffer exists (a cross-origin isolated page). By
 * default one per core, at most 4 (FlowLM's small matmuls do not scale further, docs/pocket-tts.md §3.7): on
 * 2 cores in headless Chromium, the real-size int8 bundle ran at RTF 0.62–0.70 on 2 threads against
 * 0.79–0.84 on 1 (bench/browser-engine.ts), unlike onnxruntime-web under Bun (onnx/runtime.ts).
 */
function threadsFor(asked: number | undefined): number {
  if (!globalThis.crossOriginIsolated) return 1;
  return Math.max(1, Math.min(8, asked ?? Math.min(4, navigator.hardwareConcurrency || 1)));
}

/** The server's `--device` for the page's choice: "auto" takes a real GPU adapter only, "webgpu" any adapter. */
const DEVICE_POLICIES: Readonly<Record<ExecutionProviderChoice, DevicePolicy>> = { auto: "auto", wasm: "cpu", webgpu: "gpu" };

/** onnxruntime-web's files, beside this worker on the server (routes.ts). */
const wasmPaths = () => new URL("ort/", self.location.href).href;

function prepareRuntime(threads: number | undefined): number {
  const count = threadsFor(threads);
  configureOnnxRuntime({ threads: count, wasmPaths: wasmPaths() });
  return configuredOnnxThreads();
}

/**
 * Starts the Mimi decoder's worker (`decoder.js`, decoder-worker.ts) as the model's decoder client expects a
 * worker thread: it first learns where the model's files are, then takes the client's messages.
 */
function decoderWorkerSpawner(mount: Omit<DecoderWorkerMount, "kind">): SpawnDecoderWorker {
  return () => {
    const worker = new PageWorker(new URL("decoder.js", self.location.href));
    worker.postMessage({ kind: "mount", ...mount } satisfies DecoderWorkerMount);
    return worker as unknown as ReturnType<SpawnDecoderWorker>;
  };
}

async function load(message: Extract<Message, { type: "load" }>): Promise<EngineInfo> {
  const started = performance.now();
  const threads = prepareRuntime(message.threads);
  const headers: Record<string, string> = message.apiKey ? { Authorization: `Bearer ${message.apiKey}` } : {};
  // The app's root as the worker (…/playground/engine.js) sees it, so a server behind a path prefix works.
  const base = new URL("../", self.location.href).href;
  const listing = await fetchListing(new URL(`v1/models/${encodeURIComponent(message.model)}/files`, base).href, headers);
  const files = new ModelFiles(listing, { base, headers, source: message.source ?? "server", onProgress: (progress) => post({ type: "progress", id: message.id, ...progress }) });
  if (loaded) {
    await loaded.engine.close();
    await loaded.model.close();
    loaded = undefined;
    unmountFiles(MODEL_ROOT);
  }
  // A voice cloned by the previous model is its state, meaningless to another one.
  clonedVoices.clear();
  mountFiles(MODEL_ROOT, await files.mountable());
  warnings.length = 0;
  // Off unless asked for: on 2 cores in headless Chromium the decoder's own worker made decodes ~4× slower
  // and first audio ~7 s (real-size int8, bench/browser-engine.ts --decoder-worker off,on), unlike the
  // server's worker threads.
  const decoderWorker = message.decoderWorker ?? false;
  const spawnDecoderWorker = decoderWorkerSpawner({ root: MODEL_ROOT, base, headers, listing, wasmPaths: wasmPaths() });
  const model = await PocketModel.load(
    MODEL_ROOT,
    { provider: "onnxruntime-web" },
    { logger, decoderWorker, decoderWorkers: 1, spawnDecoderWorker, encoderWorker: false, device: DEVICE_POLICIES[message.ep ?? "auto"] },
  );
  // The default voice's state is read at the first speak: fetched now, it is in the cache by then, and its
  // bytes count in this load's totals and progress.
  const defaultVoice = model.capabilities.defaultVoice;
  const defaultVoiceFile = defaultVoice ? listing.find((file) => file.name.toLowerCase().endsWith(`/${defaultVoice}.safetensors`)) : undefined;
  if (defaultVoiceFile) await files.bytes(defaultVoiceFile);
  // The sessions hold their own copies; voices and later reads come from the cache.
  files.release();
  const info: EngineInfo = {
    model: message.model,
    description: model.capabilities.description,
    executionProvider: model.executionProvider === "webgpu" ? "webgpu" : "wasm",
    decoder: model.decoderPlacement === "wgsl" ? "wgsl" : "onnx",
    decoderWorker: model.decoderPlacement === "worker",
    warnings: [...warnings],
    ...(model.wgslAdapter ? { adapter: model.wgslAdapter } : {}),
    threads,
    crossOriginIsolated: Boolean(globalThis.crossOriginIsolated),
    voices: [...model.capabilities.voices],
    supportsCloning: model.capabilities.supportsCloning,
    sampleRateHz: model.capabilities.nativeSampleRateHz,
    loadSeconds: (performance.now() - started) / 1000,
    fetchedBytes: files.totals.fetchedBytes,
    cachedBytes: files.totals.cachedBytes,
  };
  loaded = { model, engine: new Engine(model.runner, model.capabilities, PAGE_ENGINE_LIMITS), info };
  return info;
}

function requireModel(): { model: PocketModel; engine: Engine } {
  if (!loaded) throw new Error("no model is loaded: send {type: 'load'} first");
  return loaded;
}

async function speak(message: Extract<Message, { type: "speak" }>, abort: AbortController): Promise<SpeakStats> {
  // From its turn, not its arrival: a speak queued behind another is not charged for the wait.
  const started = performance.now();
  try {
    const { model, engine } = requireModel();
    const stageSeconds: Record<string, number> = {};
    // Speaks run one at a time, so every tick the engine runs meanwhile is this one's.
    engine.observer = {
      tick: (stages) => {
        for (const [stage, seconds] of Object.entries(stages)) stageSeconds[stage] = (stageSeconds[stage] ?? 0) + seconds;
      },
      finished: () => {},
      rejected: () => {},
    };
    const voicePrompt = message.voiceId ? clonedVoices.get(message.voiceId) : undefined;
    if (message.voiceId && !voicePrompt) throw new Error(`no cloned voice '${message.voiceId}' in this page`);
    const capabilities = model.capabilities;
    // The server's job builder: the same text, voice and seed make the server's job, and its samples.
    const { job } = utteranceJob(model, {
      text: message.text.trim(),
      normalization: message.normalization,
      // As the server reads it by default, so the same text gives the server's samples.
      markdown: DEFAULT_MARKDOWN_READING,
      builtInVoice: voicePrompt ? undefined : builtInVoice(message.voice, capabilities),
      ...(message.seed !== undefined ? { seed: BigInt(message.seed) } : {}),
      extraParams: {},
    });
    let firstAudioMs = -1;
    let samples = 0;
    // Cancelled before its turn: it ends with no audio, as one cancelled while it speaks ends early.
    const stream = abort.signal.aborted ? [] : await engine.submit({ ...job, voicePrompt, signal: abort.signal });
    for await (const frame of stream) {
      if (abort.signal.aborted) break;
      if (firstAudioMs < 0) firstAudioMs = performance.now() - started;
      samples += frame.samples.length;
      const copy = frame.samples.slice();
      post({ type: "audio", id: message.id, samples: copy }, [copy.buffer]);
      // onnxruntime-web's runs settle as microtasks: without a task boundary a "cancel" message would wait
      // for the whole utterance.
      await nextTask();
    }
    const wallSeconds = (performance.now() - started) / 1000;
    const audioSeconds = samples / capabilities.nativeSampleRateHz;
    return { firstAudioMs: Math.max(0, firstAudioMs), audioSeconds, wallSeconds, rtf: audioSeconds > 0 ? wallSeconds / audioSeconds : 0, stageSeconds };
  } finally {
    if (loaded) loaded.engine.observer = undefined;
    cancels.delete(message.id);
  }
}

async function clone(message: Extract<Message, { type: "clone" }>): Promise<{ voiceId: string; seconds: number }> {
  const { model, engine } = requireModel();
  if (!model.encodeVoice) throw new Error("this model cannot clone voices (its bundle has no Mimi encoder)");
  const signal = new AbortController().signal;
  // Between the engine's plans, as the server encodes an upload: a cancelled speak's last plan may still run.
  const prompt = await model.encodeVoice({ samples: message.samples, sampleRateHz: model.capabilities.nativeSampleRateHz }, signal, (task) => engine.runTask(task, signal));
  const voiceId = `page-voice-${clonedVoices.size + 1}`;
  clonedVoices.set(voiceId, prompt);
  return { voiceId, seconds: message.samples.length / model.capabilities.nativeSampleRateHz };
}

/** The golden cases of a fixture the page fetched (its listing's URL), through the same harness as the CLI. */
async function conformance(message: Extract<Message, { type: "conformance" }>): Promise<unknown> {
  prepareRuntime(undefined);
  const base = new URL("../", self.location.href).href;
  const listing: ListedFile[] = await fetchListing(new URL(message.listing, self.location.href).href, {});
  const files = new ModelFiles(listing, { base, headers: {}, source: "server" });
  unmountFiles(FIXTURE_ROOT);
  // The harness reads golden data synchronously: every file is in memory before it starts.
  mountFiles(FIXTURE_ROOT, await files.mountable(() => true));
  const { runConformance } = await import("../../conformance/harness.ts");
  const ep = message.ep ?? "wasm";
  const providerOptions = ep === "wasm" ? { provider: "onnxruntime-web" as const } : { gpuDevice: (await (await import("../../gpu/device.ts")).acquireGpu({ allowSoftware: true })).device };
  return runConformance(FIXTURE_ROOT, message.decoder ?? "onnx", providerOptions, message.batch);
}

self.onmessage = (event: MessageEvent<Message>) => {
  const message = event.data;
  const fail = (error: unknown, id: number) => post({ type: "error", id, message: error instanceof Error ? error.message : String(error) });
  switch (message.type) {
    case "load":
      void requests.run(() => load(message)).then((info) => post({ type: "ready", id: message.id, info }), (error) => fail(error, message.id));
      return;
    case "speak": {
      // Registered now, so a speak still waiting for the one before it can be cancelled too.
      const abort = new AbortController();
      cancels.set(message.id, abort);
      void requests.run(() => speak(message, abort)).then((stats) => post({ type: "done", id: message.id, stats }), (error) => fail(error, message.id));
      return;
    }
    case "clone":
      void requests.run(() => clone(message)).then((voice) => post({ type: "voice", id: message.id, ...voice }), (error) => fail(error, message.id));
      return;
    case "cancel":
      cancels.get(message.id)?.abort();
      return;
    case "conformance":
      void requests.run(() => conformance(message)).then((report) => post({ type: "report", id: message.id, report }), (error) => fail(error, message.id));
      return;
  }
};
