/**
 * Pocket TTS behind the model contract: bundle → onnxruntime sessions (CPU provider picked in onnx/runtime.ts)
 * → stages, the tokenizer, predefined voices from the bundle's voices folder, cloning through the Mimi
 * encoder, and generation that streams each decoded 80 ms frame as soon as it exists.
 *
 * Requests are advanced by the engine, tick by tick, through the runner (runner.ts): one owner of every
 * session call, so runs never contend for the same cores and the wasm heap. The Mimi decoder runs in a
 * worker thread of its own where it can (decoder/worker-client.ts): both onnxruntime packages run a session
 * on the calling thread, so only there does decoding overlap sampling, one core each. Where the worker
 * cannot start, the decoder runs in-process, between the engine's sampling plans.
 */
import { collectGarbage } from "../../runtime/detect.ts";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { badRequest } from "../../api/errors.ts";
import type { Logger } from "../../log/logger.ts";
import type { ModelCapabilities, ReferenceAudio, SpeechModel, VoicePrompt } from "../contract.ts";
import { loadPocketBundle } from "./bundle/load.ts";
import { bundleLanguageTag, type PocketBundle } from "./bundle/pocket-bundle.ts";
import { closePocketSessions, openPocketSessions, type PocketSessions } from "./sessions.ts";
import { loadOnnxRuntime, type CpuProvider, type OnnxProviderOptions } from "../../onnx/runtime.ts";
import { createPocketStages, type PocketStages } from "./pipeline.ts";
import { OnDemandVoiceEncoderWorker } from "./encoder/worker-client.ts";
import { GraphCache } from "../../onnx/graph-cache.ts";
import { voiceStateFromSafetensors } from "./stages/flow-lm.ts";
import { stateBytes, type FlowLmState, type MimiState } from "./stages/state.ts";
import { MimiDecoder, openMimiDecoderSession, type LatentDecoder } from "./stages/mimi-decoder.ts";
import { SentencePieceTokenizer } from "../../text/sentencepiece.ts";
import { startDecoderWorkers, type PooledDecoderState, type SpawnDecoderWorker, type WorkerMimiDecoderPool } from "./decoder/worker-client.ts";
import { chooseLanguageModelGpu, chooseWgslDecoder, knownCpuPlacement, WGSL_DECODER_STREAMS, type DecoderChoice, type DevicePolicy } from "./decoder/choice.ts";
import type { MimiGpuDecoder, MimiGpuState } from "./mimi-wgsl/decoder.ts";
import { prepareTextPrompt } from "./text-prompt.ts";
import { pocketParamsSchema } from "./params.ts";
import { PocketRunner, type RunnerDecoder } from "./runner.ts";


/** Where the Mimi decoder runs (decoder/choice.ts, decoder/worker-client.ts). */
type MimiDecoderPlacement = { kind: "in-process" } | { kind: "worker"; decoder: WorkerMimiDecoderPool } | { kind: "wgsl"; decoder: MimiGpuDecoder; adapterDescription: string };

function describePlacement(placement: MimiDecoderPlacement): string {
  if (placement.kind === "wgsl") return `Mimi decoder on WGSL kernels (${placement.adapterDescription})`;
  if (placement.kind === "worker") return placement.decoder.size === 1 ? "Mimi decoder in a worker thread" : `Mimi decoder in ${placement.decoder.size} worker threads`;
  return "Mimi decoder in the main thread";
}

/**
 * The bundle's sessions on a WebGPU device where the policy picks one (fp32 graphs), else on the CPU (int8
 * where the bundle has them). Under `auto`, a GPU that fails to open the sessions falls back to the CPU.
 */
async function openOnDevice(bundleDir: string, providerOptions: OnnxProviderOptions, device: DevicePolicy, logger: Logger, graphCache: GraphCache): Promise<{ bundle: PocketBundle; sessions: PocketSessions }> {
  const gpuDevice = await chooseLanguageModelGpu(device);
  if (gpuDevice) {
    const bundle = await loadPocketBundle(bundleDir, { precision: "fp32" });
    try {
      return { bundle, sessions: await openPocketSessions(bundle, { ...providerOptions, gpuDevice }, graphCache) };
    } catch (error) {
      if (device === "gpu") throw error;
      logger.warn("running Pocket TTS on the CPU: its sessions failed on WebGPU", { error: (error as Error).message });
    }
  }
  const bundle = await loadPocketBundle(bundleDir, { precision: "int8" });
  return { bundle, sessions: await openPocketSessions(bundle, providerOptions, graphCache) };
}

/** The server's default count of decoder workers, read only when workers start: config.ts asks the host (its cores, its cgroup) as it loads, which a page cannot. */
async function defaultDecoderWorkers(): Promise<number> {
  return (await import("../../config.ts")).DEFAULT_DECODER_WORKERS;
}

/** The decoder workers of a CPU-only load, started from the int8 bundle before the main thread's sessions. */
async function startEarlyDecoderWorkers(bundleDir: string, providerOptions: OnnxProviderOptions, options: { logger: Logger; decoderWorkers?: number; spawnDecoderWorker?: SpawnDecoderWorker }): Promise<WorkerMimiDecoderPool | null> {
  const [bundle, runtime] = await Promise.all([loadPocketBundle(bundleDir, { precision: "int8" }), loadOnnxRuntime(providerOptions)]);
  return startDecoderWorkers(bundle, runtime.provider, options.logger, options.decoderWorkers ?? (await defaultDecoderWorkers()), options.spawnDecoderWorker);
}

/**
 * The worker's decoder until the worker stops, then an in-process one, opened then (`openInProcess`): the
 * chunk decoding at that moment fails, later ones decode in the main thread instead of failing too. While
 * the workers run, the main thread holds no decoder session (~25 MiB at real size).
 */
export function withInProcessFallback(worker: WorkerMimiDecoderPool, openInProcess: () => Promise<LatentDecoder<MimiState>>, logger: Logger): LatentDecoder<unknown> {
  let warned = false;
  let inProcess: Promise<LatentDecoder<MimiState>> | undefined;
  const workerAlive = () => {
    if (!worker.failed) return true;
    if (!warned) logger.warn("the Mimi decoder worker stopped; decoding in the main thread from now on");
    warned = true;
    return false;
  };
  const openOnce = () => {
    inProcess ??= openInProcess();
    inProcess.catch(() => (inProcess = undefined));
    return inProcess;
  };
  const isWorkerState = (state: unknown): state is PooledDecoderState => typeof state === "object" && state !== null && "fresh" in state;
  /** A fresh in-process state, made by the first decode once the session is open. */
  const FRESH_IN_PROCESS = Symbol("fresh in-process state");
  return {
    config: worker.config,
    get concurrent() {
      return !worker.failed;
    },
    emptyState: () => (workerAlive() ? worker.emptyState() : FRESH_IN_PROCESS),
    decode: async (state, latents, options) => {
      if (isWorkerState(state)) return worker.decode(state, latents, options);
      const decoder = await openOnce();
      return decoder.decode(state === FRESH_IN_PROCESS ? decoder.emptyState() : (state as MimiState), latents, options);
    },
    release: (state) => {
      if (isWorkerState(state)) worker.release(state);
    },
  };
}

/** The runner's view of the WGSL decoder: its device slots bound the streams, equal frame counts batch. */
function wgslRunnerDecoder(decoder: MimiGpuDecoder, config: LatentDecoder<unknown>["config"]): RunnerDecoder {
  return {
    config,
    // Device work leaves the JS thread: its readback overlaps the next tick's sampling.
    concurrent: true,
    maxStates: WGSL_DECODER_STREAMS,
    emptyState: () => decoder.emptyState(),
    decode: (state, latents) => decoder.decode(state as MimiGpuState, latents),
    decodeBatch: (requests) => decoder.decodeBatch(requests as ReadonlyArray<{ state: MimiGpuState; latents: Float32Array }>),
    release: (state) => decoder.release(state as MimiGpuState),
  };
}

export class PocketModel implements SpeechModel {
  readonly capabilities: ModelCapabilities;
  readonly paramsSchema = pocketParamsSchema;
  readonly runner: PocketRunner;
  readonly filesDirectory: string;
  readonly #decoder: MimiDecoderPlacement;
  readonly #voiceStates = new Map<string, Promise<FlowLmState>>();
  /** The Mimi encoder's worker thread, started by encodes (CPU sessions only). */
  #encoderWorker: OnDemandVoiceEncoderWorker | undefined;

  private constructor(
    private readonly bundle: PocketBundle,
    private readonly sessions: PocketSessions,
    private readonly stages: PocketStages,
    private readonly tokenizer: SentencePieceTokenizer,
    /** Voice name (lower-case) → its state file in the bundle's voices folder. */
    private readonly voiceFiles: ReadonlyMap<string, string>,
    decoder: MimiDecoderPlacement,
    private readonly logger: Logger,
  ) {
    this.#decoder = decoder;
    this.filesDirectory = bundle.directory;
    if (!stages.flowLmSlots) logger.warn("FlowLM runs one stream per call", { reason: stages.flowLmSlotsUnavailable });
    const voices = [...voiceFiles.keys()];
    this.capabilities = {
      modelId: "pocket-tts",
      kind: "neural",
      description: `Kyutai Pocket TTS (${bundle.name}, ${bundle.language}, ${bundle.layout} layout, ${bundle.graphs.flowLmMain.precision}) on ${sessions.provider} (${sessions.executionProvider === "webgpu" ? "WebGPU" : "CPU"}), ${stages.flowLmSlots ? "FlowLM steps batched across streams" : "FlowLM one stream per call"}, ${describePlacement(decoder)}`,
      voices,
      // A bundle whose language is neither a catalog name nor a tag (a test fixture's "pocket-tiny") is taken
      // for English, the language the v2 layout assumes when bundle.json names none.
      languages: [bundleLanguageTag(bundle.language) ?? "en"],
      defaultVoice: voices[0] ?? "",
      nativeSampleRateHz: bundle.dims.sampleRateHz,
      supportsCloning: bundle.graphs.voiceEncoder !== null,
      supportsInstructions: false,
      supportsWordTimestamps: false,
      framesPerSecond: bundle.dims.frameRateHz,
      speakerEmbeddingDims: [],
    };
    const runnerDecoder: RunnerDecoder =
      decoder.kind === "in-process" ? stages.mimiDecoder : decoder.kind === "worker" ? withInProcessFallback(decoder.decoder, () => this.#openInProcessDecoder(), logger) : wgslRunnerDecoder(decoder.decoder, stages.mimiDecoder.config);
    this.runner = new PocketRunner({
      textConditioner: stages.textConditioner,
      flowLm: stages.flowLm,
      flowLmSlots: stages.flowLmSlots,
      flowHead: stages.flowHead,
      decoder: runnerDecoder,
      sampleRateHz: bundle.dims.sampleRateHz,
      decoderStateBytes: stateBytes(stages.mimiDecoder.emptyState()),
      jobs: { tokenizer, flags: bundle.flags, builtInVoice: (name) => this.#predefinedVoice(name) },
      nativeOutputs: sessions.provider === "onnxruntime-node" && sessions.executionProvider === "cpu",
    });
  }

  /** Loads a bundle directory (any supported layout) and opens its sessions. */
  static async load(
    bundleDir: string,
    providerOptions: OnnxProviderOptions,
    options: {
      logger: Logger;
      decoderWorker?: boolean;
      decoderWorkers?: number;
      /** How a decoder worker starts; default: a worker thread (a page starts a Web Worker). */
      spawnDecoderWorker?: SpawnDecoderWorker;
      encoderWorker?: boolean;
      decoder?: DecoderChoice;
      device?: DevicePolicy;
      graphCacheDir?: string;
    },
  ): Promise<PocketModel> {
    // Where the CPU is known to run everything, the decoder workers start on the other core while this
    // thread rewrites graphs and makes its sessions (first start, real-size int8, 1 GiB cgroup, 2 cores:
    // ready 2.78 → 2.54 s median of 6, load peak 591 → 628 MiB).
    // A failed early start (an unreadable bundle) is the main load's to report: the workers then start after it.
    const earlyWorkers = options.decoderWorker !== false && knownCpuPlacement(options) ? startEarlyDecoderWorkers(bundleDir, providerOptions, options).catch(() => undefined) : undefined;
    let opened;
    try {
      // On the CPU the int8 graphs are preferred where the bundle has them (docs/pocket-tts.md §3.6); fp32 on WebGPU.
      const { bundle, sessions } = await openOnDevice(bundleDir, providerOptions, options.device ?? "auto", options.logger, new GraphCache(options.graphCacheDir));
      const stages = await createPocketStages(bundle, sessions);
      // The stages' checks (the batched step against the published graph) leave ~200 MB of states behind at
      // real size: collected now, they never add to the load's peak.
      collectGarbage();
      const tokenizer =
        bundle.tokenizer.format === "sentencepiece"
          ? await SentencePieceTokenizer.fromFile(bundle.tokenizer.modelPath)
          : SentencePieceTokenizer.fromSherpaJson(await readFile(bundle.tokenizer.vocabPath, "utf-8"), await readFile(bundle.tokenizer.scoresPath, "utf-8"));
      opened = { bundle, sessions, stages, tokenizer };
    } catch (error) {
      void earlyWorkers?.then((pool) => pool?.close());
      throw error;
    }
    const { bundle, sessions, stages, tokenizer } = opened;
    const wgsl = await chooseWgslDecoder(bundleDir, bundle, options);
    if ("decoder" in wgsl) return new PocketModel(bundle, sessions, stages, tokenizer, await findVoiceFiles(bundle), { kind: "wgsl", ...wgsl }, options.logger);
    const early = await earlyWorkers;
    const decoderWorker = early !== undefined ? early : options.decoderWorker === false ? null : await startDecoderWorkers(bundle, sessions.provider, options.logger, options.decoderWorkers ?? (await defaultDecoderWorkers()), options.spawnDecoderWorker);
    const model = new PocketModel(bundle, sessions, stages, tokenizer, await findVoiceFiles(bundle), decoderWorker ? { kind: "worker", decoder: decoderWorker } : { kind: "in-process" }, options.logger);
    // Decoding runs in the workers: the main thread's decoder session is opened again only if they stop.
    if (decoderWorker) await model.#releaseInProcessDecoder();
    if (options.encoderWorker !== false) await model.#useEncoderWorker();
    collectGarbage();
    return model;
  }

  /** Where the Mimi decoder runs: this thread, a worker of its own, or our WGSL kernels. */
  get decoderPlacement(): MimiDecoderPlacement["kind"] {
    return this.#decoder.kind;
  }

  /** Where the language-model graphs run: the CPU, or onnxruntime-web's WebGPU EP. */
  get executionProvider(): PocketSessions["executionProvider"] {
    return this.sessions.executionProvider;
  }

  /** The adapter the WGSL decoder runs on; undefined when it does not run. */
  get wgslAdapter(): string | undefined {
    return this.#decoder.kind === "wgsl" ? this.#decoder.adapterDescription : undefined;
  }

  countInputTokens(text: string): number {
    const options = { padWithSpacesForShortInputs: this.bundle.flags.padWithSpacesForShortInputs, removeSemicolons: this.bundle.flags.removeSemicolons };
    return this.tokenizer.encode(prepareTextPrompt(text, options).text).length;
  }

  /**
   * The voice prompt of reference audio (§2.1): the Mimi encoder, in its worker thread where it has one
   * (else between two engine ticks), then a FlowLM prefill between two ticks. Only the first
   * MAX_VOICE_SECONDS of the clip are encoded. An aborted request's encode never starts.
   */
  async encodeVoice(reference: ReferenceAudio, signal: AbortSignal, runModelWork: <T>(task: () => Promise<T>) => Promise<T>): Promise<VoicePrompt> {
    signal.throwIfAborted();
    const encoder = this.stages.voiceEncoder;
    if (!encoder) throw new Error("this bundle has no mimi_encoder.onnx, so it cannot clone voices");
    const conditioning = encoder.offThread ? await encoder.encode(reference.samples) : await runModelWork(() => encoder.encode(reference.samples));
    signal.throwIfAborted();
    const flowLm = this.stages.flowLm;
    const state = await runModelWork(() => flowLm.prefill(flowLm.emptyState(), conditioning));
    // ref_text is accepted by the API but Pocket TTS conditions on the audio alone.
    return { audioFrameCount: encoder.keptFrames(reference.samples.length), byteSize: stateBytes(state), state };
  }

  #predefinedVoice(name: string): Promise<FlowLmState> {
    const path = this.voiceFiles.get(name);
    if (!path) throw badRequest(`this Pocket TTS bundle has no built-in voice '${name}'; upload a voice or pass ref_audio`, "voice");
    let state = this.#voiceStates.get(name);
    if (!state) {
      state = readFile(path).then((bytes) => voiceStateFromSafetensors(new Uint8Array(bytes), this.stages.flowLm));
      this.#voiceStates.set(name, state);
      state.catch(() => this.#voiceStates.delete(name));
    }
    return state;
  }

  async #releaseInProcessDecoder(): Promise<void> {
    const session = this.sessions.mimiDecoder;
    this.sessions.mimiDecoder = null;
    await session?.release();
  }

  /** The main thread's Mimi decoder, opened again after its session was released for the workers'. */
  async #openInProcessDecoder(): Promise<LatentDecoder<MimiState>> {
    const graph = this.bundle.graphs.mimiDecoder;
    const runtime = await loadOnnxRuntime({ provider: this.sessions.provider });
    const { session, manifest } = await openMimiDecoderSession(runtime, graph.path, this.bundle.mimiStateManifest, this.stages.mimiDecoder.config);
    this.sessions.mimiDecoder = session;
    return new MimiDecoder(session, manifest, this.stages.mimiDecoder.config);
  }

  /**
   * Voice encodes leave the JS thread: the encoder runs in a worker thread started by the first encode and
   * closed when idle, and the main thread's session (opened for the load's probe) is released. It is opened
   * again only if a worker cannot start; encodes then run between engine ticks.
   */
  async #useEncoderWorker(): Promise<void> {
    const graph = this.bundle.graphs.voiceEncoder;
    const encoder = this.stages.voiceEncoder;
    if (!graph || !encoder || this.sessions.executionProvider !== "cpu") return;
    const provider = this.sessions.provider;
    const worker = new OnDemandVoiceEncoderWorker({ path: graph.path, provider });
    this.#encoderWorker = worker;
    let warned = false;
    await encoder.runOffThread({ run: (audio) => worker.run(audio), failed: () => worker.failed }, async () => {
      if (!warned) this.logger.warn("voice encodes run in the main thread, between engine ticks: the encoder worker could not start");
      warned = true;
      return (await loadOnnxRuntime({ provider })).createSession(graph.path);
    });
    this.sessions.voiceEncoder = null;
  }

  async close(): Promise<void> {
    if (this.#encoderWorker) {
      await this.#encoderWorker.close();
      // Its in-process session, if one was reopened, is the voice encoder's own (the bundle's was released).
      await this.stages.voiceEncoder?.close();
    }
    if (this.#decoder.kind === "worker") this.#decoder.decoder.close();
    if (this.#decoder.kind === "wgsl") this.#decoder.decoder.destroy();
    await closePocketSessions(this.sessions);
  }
}

/**
 * Predefined voices are the state files actually present in the bundle's voices folder (upstream's three
 * formats, §2.1), whether or not bundle.json lists them: a listed voice without its file cannot speak.
 */
async function findVoiceFiles(bundle: PocketBundle): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  if (!bundle.voicesDirectory) return files;
  for (const file of (await readdir(bundle.voicesDirectory)).sort()) {
    if (file.endsWith(".safetensors")) files.set(file.slice(0, -".safetensors".length).toLowerCase(), join(bundle.voicesDirectory, file));
  }
  return files;
}

