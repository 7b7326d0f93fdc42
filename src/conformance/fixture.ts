/**
 * One fixture folder (../shared/fixtures/{pocket-tiny,mimi-full}) opened for a conformance run: golden.json and
 * golden.safetensors, and the project's own modules composed on the fixture's files (the bundle's stages and
 * sessions, the ONNX or WGSL Mimi decoder, extra variant sessions), each made on first use and released by
 * `close`.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { decodeSafetensorsWithInt64, type DecodedTensor } from "../formats/safetensors.ts";
import { loadPocketBundle } from "../models/pocket/bundle/load.ts";
import { parseStateManifest } from "../models/pocket/bundle/state-manifest.ts";
import type { PocketBundle, StateEntry } from "../models/pocket/bundle/pocket-bundle.ts";
import type { RunnerDecoder } from "../models/pocket/runner.ts";
import { closePocketSessions, openPocketSessions, type PocketSessions } from "../models/pocket/sessions.ts";
import { loadOnnxRuntime, type CpuProvider, type OnnxProviderOptions, type OnnxRuntime, type OnnxSession } from "../onnx/runtime.ts";
import { SentencePieceTokenizer } from "../text/sentencepiece.ts";
import { createPocketStages, type PocketStages } from "../models/pocket/pipeline.ts";
import { MimiDecoder, openMimiDecoderSession, type LatentDecoder } from "../models/pocket/stages/mimi-decoder.ts";
import type { MimiGpuDecoder } from "../models/pocket/mimi-wgsl/decoder.ts";
import type { FlowLmStepper } from "../models/pocket/stages/flow-lm-slots.ts";
import { concatFloat32 } from "../lib/concat.ts";
import { CrowdedFlowLm, decodeInCrowdedCalls } from "./crowd.ts";
import type { ConformanceDecoder } from "./report.ts";

interface GoldenJson {
  fixture: string;
  cases: Record<string, unknown>;
  mimi_state_manifest?: unknown;
  /** Mimi config of a decoder-only fixture (mimi-full). */
  model_config?: { sample_rate: number; frame_rate: number; quantizer: { dimension: number } };
  generation_parameters?: { eos_threshold?: number };
}

/** One conformance run's resources (sessions are released by `close`). */
export class Fixture {
  readonly golden: GoldenJson;
  private readonly tensors: Record<string, DecodedTensor>;
  private stagesPromise: Promise<{ bundle: PocketBundle; stages: PocketStages; sessions: PocketSessions }> | undefined;
  private readonly extraSessions: Promise<OnnxSession>[] = [];
  private runtimePromise: Promise<OnnxRuntime> | undefined;
  private gpuDecoderPromise: Promise<MimiGpuDecoder> | undefined;

  constructor(
    readonly directory: string,
    private readonly providerOptions: OnnxProviderOptions,
    readonly decoder: ConformanceDecoder,
    readonly batch?: number,
  ) {
    this.golden = JSON.parse(readFileSync(join(directory, "golden.json"), "utf8")) as GoldenJson;
    this.tensors = decodeSafetensorsWithInt64(readFileSync(join(directory, "golden.safetensors")));
  }

  float(name: string): Float32Array {
    const tensor = this.tensors[name];
    if (!tensor || tensor.dtype !== "F32") throw new Error(`golden.safetensors has no float tensor '${name}'`);
    return tensor.data;
  }

  dims(name: string): number[] {
    const tensor = this.tensors[name];
    if (!tensor) throw new Error(`golden.safetensors has no tensor '${name}'`);
    return tensor.shape;
  }

  ids(name: string): number[] {
    const tensor = this.tensors[name];
    if (!tensor || tensor.dtype !== "I64") throw new Error(`golden.safetensors has no int64 tensor '${name}'`);
    return Array.from(tensor.data, Number);
  }

  /** The fixture's bundle (pocket-tiny) and its stages. */
  async pipeline(): Promise<{ bundle: PocketBundle; stages: PocketStages }> {
    this.stagesPromise ??= (async () => {
      const bundle = await loadPocketBundle(this.directory);
      const sessions = await openPocketSessions(bundle, { ...this.providerOptions, provider: (await this.runtime()).provider });
      return { bundle, stages: await createPocketStages(bundle, sessions), sessions };
    })();
    return this.stagesPromise;
  }

  async stages(): Promise<PocketStages> {
    return (await this.pipeline()).stages;
  }

  /** Decodes in `calls` as decodeInCalls does; with `batch`, each call beside batch − 1 random streams. */
  decode<State>(decoder: LatentDecoder<State>, latents: Float32Array, calls: readonly number[]): Promise<Float32Array> {
    return this.batch === undefined ? decodeInCalls(decoder, latents, calls) : decodeInCrowdedCalls(decoder, latents, calls, this.batch);
  }

  /** How `decode` ran, for a case's detail. */
  get decodeDetail(): string {
    if (this.batch === undefined) return "";
    return this.decoder === "wgsl" ? `, in decodeBatch calls of ${this.batch} streams` : `, between the decodes of ${this.batch - 1} other streams (the ONNX graph is batch 1)`;
  }

  /** What the flow_lm case's AR steps go through: with `batch`, the batched step inside a crowd of `batch` streams; else the published graph. */
  async flowLmSteps(): Promise<{ stepper: FlowLmStepper | null; close(): void; detail?: string }> {
    const stages = await this.stages();
    if (this.batch === undefined) return { stepper: null, close: () => {} };
    if (!stages.flowLmSlots) throw new Error(`no batched FlowLM step: ${stages.flowLmSlotsUnavailable}`);
    const crowd = new CrowdedFlowLm(stages.flowLmSlots, stages.flowLm, this.batch);
    return { stepper: crowd, close: () => crowd.close(), detail: `in calls of ${this.batch} streams` };
  }

  /** The decoder under test: the ONNX one, or with `--decoder wgsl` our WGSL one on the same weights. */
  async mimiDecoder(): Promise<RunnerDecoder> {
    return this.decoder === "wgsl" ? this.gpuDecoder() : this.onnxMimiDecoder();
  }

  /** The ONNX decoder alone: from the bundle when there is one, else the graph with golden.json's manifest (mimi-full). */
  async onnxMimiDecoder(): Promise<MimiDecoder> {
    if (existsSync(join(this.directory, "bundle.json"))) return (await this.stages()).mimiDecoder;
    const config = this.golden.model_config;
    if (!config) throw new Error("golden.json has no model_config");
    const decoderConfig = { latentDim: config.quantizer.dimension, samplesPerFrame: config.sample_rate / config.frame_rate };
    const { session, manifest } = await openMimiDecoderSession(await this.runtime(), join(this.directory, "mimi_decoder.onnx"), await this.mimiManifest(), decoderConfig);
    this.extraSessions.push(Promise.resolve(session));
    return new MimiDecoder(session, manifest, decoderConfig);
  }

  /** The Mimi state manifest: the bundle's, or golden.json's for a decoder-only fixture (mimi-full). */
  private async mimiManifest(): Promise<readonly StateEntry[]> {
    if (existsSync(join(this.directory, "bundle.json"))) return (await this.pipeline()).bundle.mimiStateManifest;
    return parseStateManifest(this.golden.mimi_state_manifest, `${this.directory}/golden.json mimi_state_manifest`);
  }

  /** The WGSL decoder on the fixture's mimi_decoder.onnx weights (a software adapter is fine for a check). */
  gpuDecoder(): Promise<MimiGpuDecoder> {
    this.gpuDecoderPromise ??= (async () => {
      const [{ acquireGpu }, { MimiGpuDecoder }, { readMimiWeightsFromOnnx }] = await Promise.all([import("../gpu/device.ts"), import("../models/pocket/mimi-wgsl/decoder.ts"), import("../models/pocket/mimi-wgsl/weights.ts")]);
      const { device } = await acquireGpu({ allowSoftware: true });
      // Heads are not in the weights: the graph's KV cache state [2, 1, heads, positions, headDim] has them (docs/pocket-tts.md §3.1).
      const cache = (await this.mimiManifest()).find((entry) => entry.module.startsWith("decoder_transformer.") && entry.key === "cache");
      if (!cache || cache.shape.length !== 5) throw new Error("the Mimi state manifest has no decoder_transformer KV cache to read the head count from");
      // A request of an end-to-end run holds two states while one chunk's last latents decode and the next chunk starts.
      const decoder = new MimiGpuDecoder(device, await readMimiWeightsFromOnnx(join(this.directory, "mimi_decoder.onnx")), { heads: cache.shape[2]!, maxStreams: Math.max(16, 2 * (this.batch ?? 1)) });
      const expected = this.golden.model_config?.sample_rate !== undefined ? this.golden.model_config.sample_rate / this.golden.model_config.frame_rate : decoder.config.samplesPerFrame;
      if (decoder.config.samplesPerFrame !== expected) throw new Error(`the WGSL decoder makes ${decoder.config.samplesPerFrame} samples per latent, the fixture ${expected}`);
      return decoder;
    })();
    return this.gpuDecoderPromise;
  }

  /** The provider is resolved once, so every session of the run (bundle, variants, decoder) shares it. */
  private runtime(): Promise<OnnxRuntime> {
    this.runtimePromise ??= loadOnnxRuntime(this.providerOptions);
    return this.runtimePromise;
  }

  async executionProvider(): Promise<"cpu" | "webgpu" | undefined> {
    return (await this.stagesPromise?.catch(() => undefined))?.sessions.executionProvider;
  }

  async provider(): Promise<CpuProvider | undefined> {
    return (await this.runtimePromise?.catch(() => undefined))?.provider;
  }

  session(path: string): Promise<OnnxSession> {
    const session = this.runtime().then((runtime) => runtime.createSession(path));
    this.extraSessions.push(session);
    return session;
  }

  async close(): Promise<void> {
    const gpuDecoder = await this.gpuDecoderPromise?.catch(() => undefined);
    gpuDecoder?.destroy();
    const sessions = await Promise.allSettled(this.extraSessions);
    await Promise.all(sessions.map((result) => (result.status === "fulfilled" ? result.value.release() : undefined)));
    if (this.stagesPromise) {
      const settled = await this.stagesPromise.catch(() => undefined);
      if (settled) await closePocketSessions(settled.sessions);
    }
  }
}

/** The fixture's SentencePiece model. */
export function loadTokenizer(fixture: Fixture): Promise<SentencePieceTokenizer> {
  return SentencePieceTokenizer.fromFile(join(fixture.directory, "tokenizer.model"));
}

/** Rows [from, to) of a row-major tensor `width` values wide. */
export function rows(data: Float32Array, width: number, from: number, to: number): Float32Array {
  return data.subarray(from * width, to * width);
}

/** `latents` decoded from a fresh state in calls of the given latent counts, the calls' audio joined. */
export async function decodeInCalls<State>(decoder: LatentDecoder<State>, latents: Float32Array, calls: readonly number[]): Promise<Float32Array> {
  const { latentDim } = decoder.config;
  let state = decoder.emptyState();
  const pieces: Float32Array[] = [];
  let frame = 0;
  try {
    for (const count of calls) {
      const result = await decoder.decode(state, rows(latents, latentDim, frame, frame + count));
      state = result.state;
      pieces.push(result.audio);
      frame += count;
    }
  } finally {
    decoder.release?.(state);
  }
  if (frame * latentDim !== latents.length) throw new Error(`call pattern [${calls.join(", ")}] covers ${frame} of ${latents.length / latentDim} latents`);
  return concatFloat32(pieces);
}
