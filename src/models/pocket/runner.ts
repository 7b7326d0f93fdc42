/**
 * Pocket TTS's runner: executes the engine's plans over many requests. A prefill unit loads the request's
 * voice (once) and prefills its next text chunk with the published graph, then moves its caches into a
 * slot of the batched step (stages/flow-lm-slots.ts); a tick's steps run FlowLM for every stepping
 * request in one call (or one request after another where the batched step is not usable), then the flow
 * head for all of them in one call where its rows are independent (stages/flow-head.ts); a decode sends a request's due latents to the Mimi decoder, and on WGSL
 * kernels puts every request with the same frame count into one `decodeBatch` call (a row's audio does not
 * depend on the others: test/models/pocket/mimi-wgsl/decoder.test.ts). States are freed when the engine
 * says a request ended (`finishedRequestIds`), or, if a decode still uses them, when it settles.
 *
 * The engine runs every request through it: the server's jobs, planned from their text and voice name, and
 * jobs whose generation a caller made (GenerationJob: conformance, benches, tests), so the loop the golden
 * cases check is the one the server runs.
 */
import type { AudioChunk, ModelRunner, RequestId, RequestResult, RequestWork, StepOutput, StepPlan, SynthesisJob } from "../contract.ts";
import { chunkTokenBudget, planTextChunks } from "./text-chunks.ts";
import { generationParams } from "./params.ts";
import { PocketRequest, type DecodingChunk, type Generation, type SamplingChunk } from "./request-state.ts";
import type { PocketStages } from "./pipeline.ts";
import type { FlowHead } from "./stages/flow-head.ts";
import type { FlowLm } from "./stages/flow-lm.ts";
import type { FlowLmSlot, FlowLmSlots } from "./stages/flow-lm-slots.ts";
import type { LatentDecoder } from "./stages/mimi-decoder.ts";
import { stateBytes, type FlowLmState } from "./stages/state.ts";
import type { TextConditioner } from "./stages/text-conditioner.ts";
import type { PocketModelFlags } from "./bundle/pocket-bundle.ts";
import type { SentencePieceTokenizer } from "../../text/sentencepiece.ts";
import { concatFloat32 } from "../../lib/concat.ts";
import { OutputGarbage } from "../../onnx/output-garbage.ts";

/** How the runner reaches the Mimi decoder, wherever it runs (decoder/choice.ts). */
export interface RunnerDecoder extends LatentDecoder<unknown> {
  /** Several streams' decodes of the same frame count in one call, where the decoder can (WGSL); else absent. */
  decodeBatch?(requests: ReadonlyArray<{ state: unknown; latents: Float32Array }>): Promise<Array<{ state: unknown; audio: Float32Array }>>;
  /** Most states the decoder can hold at once (device slots); undefined: no limit. */
  readonly maxStates?: number;
}

/** How the engine's jobs become generations: their text planned into chunks, a voice name loaded. */
export interface JobPlanning {
  tokenizer: SentencePieceTokenizer;
  flags: PocketModelFlags;
  /** The FlowLM state of a built-in voice (loaded once, shared read-only). */
  builtInVoice(name: string): Promise<FlowLmState>;
}

export interface PocketRunnerParts {
  textConditioner: TextConditioner;
  flowLm: FlowLm;
  /** FlowLM's AR steps for many requests in one call; null: one request per call on `flowLm`. */
  flowLmSlots: FlowLmSlots | null;
  flowHead: FlowHead;
  decoder: RunnerDecoder;
  sampleRateHz: number;
  /** Bytes one Mimi decoder state holds (the decoder's streaming buffers), for the state gauge. */
  decoderStateBytes: number;
  /** Present on the model's runner; a runner without it takes only GenerationJobs, and any other job fails. */
  jobs?: JobPlanning;
  /**
   * Whether the sessions' outputs hold native memory that only a full collection frees (onnxruntime-node on
   * the CPU): then the prefill caches the runner drops are collected every 64 MB. Elsewhere (onnxruntime-web,
   * WebGPU) their memory is the JS heap's or the device's, and a forced collection only stalls the tick.
   */
  nativeOutputs?: boolean;
}

/**
 * A job whose generation the caller made (conformance, benches, tests): its voice state, text chunks, noise
 * and step hook are taken as given rather than planned from a text and a voice name.
 */
export interface GenerationJob extends SynthesisJob {
  readonly generation: Generation;
}

/** The job that runs `generation` on the engine: its frame cap is the generation's, its text and voice name unused. */
export function generationJob(generation: Generation, signal: AbortSignal = new AbortController().signal): GenerationJob {
  return {
    text: "",
    voice: "",
    language: "",
    extraParams: {},
    signal,
    ...(generation.maxTotalFrames === undefined ? {} : { maxNewTokens: generation.maxTotalFrames }),
    generation,
  };
}

/** One decoded frame, with where it belongs in its request's chunk plan. */
export interface PocketAudioChunk extends AudioChunk {
  chunkIndex: number;
  /** Index of this frame within its chunk. */
  frameIndex: number;
}

export interface PocketRequestResult extends RequestResult {
  audio: PocketAudioChunk[];
}

export interface PocketStepOutput extends StepOutput {
  results: PocketRequestResult[];
}

export class PocketRunner implements ModelRunner {
  readonly #requests = new Map<RequestId, PocketRequest>();
  /** Decoder states alive (requests' chunks not yet released), for the state gauge. */
  #liveDecoderStates = 0;

  /**
   * Prefill caches dropped once admitted to a slot, collected every 64 MB: 16 streams starting at once
   * left ~300 MB of them before the collector came round (bench/load.ts at 16 streams); a collection on this
   * thread holds up a tick, so not after every prefill.
   */
  readonly #garbage: OutputGarbage;

  constructor(private readonly parts: PocketRunnerParts) {
    // undefined: the runtime's own full collection; null: never collect.
    this.#garbage = new OutputGarbage(64 * 1024 * 1024, parts.nativeOutputs ? undefined : null);
  }

  /** A runner of a bundle's stages for GenerationJobs, decoding in-process unless given another decoder. */
  static forStages(stages: PocketStages, sampleRateHz: number, decoder: RunnerDecoder = stages.mimiDecoder, nativeOutputs = false): PocketRunner {
    const { textConditioner, flowLm, flowLmSlots, flowHead, mimiDecoder } = stages;
    return new PocketRunner({ textConditioner, flowLm, flowLmSlots, flowHead, decoder, sampleRateHz, decoderStateBytes: stateBytes(mimiDecoder.emptyState()), nativeOutputs });
  }

  /** Each AR step makes one 80 ms frame. */
  readonly framesPerStep = 1;

  get maxRequests(): number | undefined {
    return this.parts.decoder.maxStates;
  }

  /** A worker or GPU decode leaves the JS thread and may overlap the next tick's sampling; an in-process one may not. */
  get decodesOverlap(): boolean {
    return this.parts.decoder.concurrent;
  }

  /** The WGSL decoder decodes equal-sized decodes of several streams in one call. */
  get decodesShareCalls(): boolean {
    return this.parts.decoder.decodeBatch !== undefined;
  }

  nextWork(requestId: RequestId): RequestWork | undefined {
    return this.#requests.get(requestId)?.work();
  }

  stateBytes(): number {
    let bytes = this.#liveDecoderStates * this.parts.decoderStateBytes + (this.parts.flowLmSlots?.stateBytes ?? 0);
    for (const request of this.#requests.values()) if (request.sampling && "state" in request.sampling.cache) bytes += stateBytes(request.sampling.cache.state);
    return bytes;
  }

  async execute(plan: StepPlan): Promise<PocketStepOutput> {
    for (const id of plan.finishedRequestIds) this.#free(id);
    const running = plan.newRequests.find(({ requestId }) => this.#requests.has(requestId));
    if (running) throw new Error(`request ${running.requestId} is already running`);
    for (const entry of plan.newRequests) this.#requests.set(entry.requestId, new PocketRequest(this.generationOf(entry.job)));
    const stageSeconds: Record<string, number> = {};
    const batchSizes: Record<string, number[]> = {};
    const timed = async <T>(stage: string, work: () => Promise<T>): Promise<T> => {
      const started = performance.now();
      try {
        return await work();
      } finally {
        stageSeconds[stage] = (stageSeconds[stage] ?? 0) + (performance.now() - started) / 1000;
      }
    };
    const results = new Map<RequestId, PocketRequestResult>();
    const resultOf = (requestId: RequestId) => {
      let result = results.get(requestId);
      if (!result) results.set(requestId, (result = { requestId, audio: [] }));
      return result;
    };
    const failed = (requestId: RequestId, error: unknown) => {
      resultOf(requestId).error = error instanceof Error ? error : new Error(String(error));
    };

    for (const id of plan.prefills) {
      const request = this.#requests.get(id);
      if (!request) continue;
      try {
        await timed("prefill", () => this.#prefill(request));
        resultOf(id);
      } catch (error) {
        failed(id, error);
      }
    }
    if (plan.steps.length > 0) await this.#steps(plan.steps, timed, batchSizes, resultOf, failed);
    if (plan.decodes.length > 0) {
      const decoded = await timed("decode", () => this.#decode(plan.decodes, batchSizes));
      for (const [id, outcome] of decoded) {
        if ("error" in outcome) failed(id, outcome.error);
        else resultOf(id).audio.push(...outcome.chunks);
      }
    }
    for (const result of results.values()) {
      const request = this.#requests.get(result.requestId);
      if (!result.error && request?.finished) result.finishReason = request.truncated ? "length" : "stop";
    }
    return { results: [...results.values()], stageSeconds, batchSizes };
  }

  /**
   * A job's generation: the one a GenerationJob carries; else its voice prompt or built-in voice, its text
   * planned within what that voice leaves of the cache.
   */
  generationOf(job: SynthesisJob): Generation {
    if ("generation" in job) return (job as GenerationJob).generation;
    const { jobs, flowLm } = this.parts;
    if (!jobs) throw new Error("this Pocket TTS runner takes generations made by the caller (GenerationJob), not jobs: it was made without job planning");
    const { tokenizer, flags } = jobs;
    return {
      voice: job.voicePrompt ? (job.voicePrompt.state as FlowLmState) : () => jobs.builtInVoice(job.voice),
      chunks: (voice) => planTextChunks(job.text, tokenizer, flags, chunkTokenBudget(flags.maxTokensPerChunk, flowLm.config.cachePositions, voice.positions)),
      params: generationParams(job.extraParams),
      seed: job.seed,
      maxTotalFrames: job.maxNewTokens,
    };
  }

  /** Voice (once), the chunk plan (once the voice says how much room is left), then the next chunk's prefill. */
  async #prefill(request: PocketRequest): Promise<void> {
    const { flowLm, textConditioner } = this.parts;
    const { generation } = request;
    if (!request.voice) request.voice = typeof generation.voice === "function" ? await generation.voice() : generation.voice;
    if (!request.chunks) request.chunks = typeof generation.chunks === "function" ? generation.chunks(request.voice) : generation.chunks;
    if (request.nextChunk === 0 && request.chunks.length === 0) {
      request.samplingDone = true;
      return;
    }
    const chunk = request.chunks[request.nextChunk]!;
    if (chunk.tokenIds.length === 0) throw new RangeError(`text chunk ${request.nextChunk} has no tokens`);
    const conditioning = await textConditioner.embed(chunk.tokenIds);
    const state = await flowLm.prefill(request.voice, conditioning);
    const { flowLmSlots } = this.parts;
    const cache = flowLmSlots ? { slot: flowLmSlots.admit(state) } : { state };
    // Admitted: the prefill's caches were copied into the slot and are garbage now (10–50 MB at full size).
    if (flowLmSlots) this.#garbage.dropped(stateBytes(state));
    request.startChunk(cache, state.positions, chunk, flowLm.config.cachePositions, this.#newDecoderState());
    // A chunk with no room left in the cache ends as it starts.
    if (request.sampling?.cache !== cache) this.#releaseSlot(cache);
    this.#releaseDecoded(request);
  }

  /**
   * The tick's AR steps: FlowLM for all of them in one call (or one after another without the batched
   * step), then the flow head for all of them, one call per Euler sub-step for the rows that share their
   * LSD steps where its rows are independent (stages/flow-head.ts); then each request's loop rule.
   */
  async #steps(
    ids: readonly RequestId[],
    timed: <T>(stage: string, work: () => Promise<T>) => Promise<T>,
    batchSizes: Record<string, number[]>,
    resultOf: (id: RequestId) => PocketRequestResult,
    failed: (id: RequestId, error: unknown) => void,
  ): Promise<void> {
    const { flowLm, flowLmSlots, flowHead } = this.parts;
    const stepping: Array<{ id: RequestId; request: PocketRequest; chunk: NonNullable<PocketRequest["sampling"]> }> = [];
    for (const id of ids) {
      const request = this.#requests.get(id);
      if (request?.sampling) stepping.push({ id, request, chunk: request.sampling });
    }
    const stepped: Array<{ id: RequestId; request: PocketRequest; chunk: SamplingChunk; conditioning: Float32Array; eosLogit: number; x0: Float32Array }> = [];
    const row = (entry: (typeof stepping)[number], result: { conditioning: Float32Array; eosLogit: number }) => ({ ...entry, ...result, x0: entry.request.noise.next(flowLm.config.latentDim) });
    batchSizes.flow_lm = [];
    const inSlots = stepping.filter((entry) => "slot" in entry.chunk.cache);
    if (flowLmSlots && inSlots.length > 0) {
      try {
        const results = await timed("flow_lm", () => flowLmSlots.step(inSlots.map(({ chunk }) => ({ slot: (chunk.cache as { slot: FlowLmSlot }).slot, latent: chunk.input }))));
        batchSizes.flow_lm.push(inSlots.length);
        inSlots.forEach((entry, index) => stepped.push(row(entry, results[index]!)));
      } catch (error) {
        for (const entry of inSlots) failed(entry.id, error);
      }
    }
    for (const entry of stepping) {
      const { cache } = entry.chunk;
      if (!("state" in cache)) continue;
      try {
        // The chunk's state is its own (the prefill copied the shared voice caches), so the step writes into it.
        const result = await timed("flow_lm", () => flowLm.step(cache.state, entry.chunk.input, { reuseState: true }));
        batchSizes.flow_lm.push(1);
        cache.state = result.state;
        stepped.push(row(entry, result));
      } catch (error) {
        failed(entry.id, error);
      }
    }
    const byLsdSteps = new Map<number, typeof stepped>();
    for (const row of stepped) byLsdSteps.set(row.request.params.lsdSteps, [...(byLsdSteps.get(row.request.params.lsdSteps) ?? []), row]);
    batchSizes.flow_head = [];
    for (const [lsdSteps, rows] of byLsdSteps) {
      try {
        const latents = await timed("flow_head", () => flowHead.sampleRows(rows, lsdSteps));
        batchSizes.flow_head.push(...(flowHead.batchesRows ? [rows.length] : rows.map(() => 1)));
        rows.forEach((row, index) => {
          row.request.applyStep(latents[index]!, row.eosLogit);
          if (row.request.sampling !== row.chunk) this.#releaseSlot(row.chunk.cache);
          this.#releaseDecoded(row.request);
          resultOf(row.id);
        });
      } catch (error) {
        for (const row of rows) failed(row.id, error);
      }
    }
  }

  /** Each request's due latents through the decoder; on WGSL, equal frame counts share one call. */
  async #decode(
    decodes: StepPlan["decodes"],
    batchSizes: Record<string, number[]>,
  ): Promise<Map<RequestId, { chunks: PocketAudioChunk[] } | { error: unknown }>> {
    const { decoder, sampleRateHz } = this.parts;
    const calls: Array<{ id: RequestId; request: PocketRequest; chunk: DecodingChunk; latents: Float32Array; firstFrame: number; frames: number }> = [];
    for (const { requestId, frames } of decodes) {
      const request = this.#requests.get(requestId);
      const due = request?.dueDecode();
      if (!request || !due || request.decodeInFlight) continue;
      const take = Math.min(frames, due.frames);
      const latents = concatFloat32(due.chunk.pending.splice(0, take));
      const firstFrame = due.chunk.sentFrames;
      due.chunk.sentFrames += take;
      request.decodeInFlight = true;
      calls.push({ id: requestId, request, chunk: due.chunk, latents, firstFrame, frames: take });
    }
    const outcomes = new Map<RequestId, { chunks: PocketAudioChunk[] } | { error: unknown }>();
    const { samplesPerFrame } = decoder.config;
    const settle = (call: (typeof calls)[number], outcome: { state: unknown; audio: Float32Array } | { error: unknown }) => {
      call.request.decodeInFlight = false;
      if ("error" in outcome) {
        outcomes.set(call.id, outcome);
      } else {
        call.chunk.decoderState = outcome.state;
        // Frame by frame, as a stream's consumer takes it (one SSE delta, one WebSocket message per 80 ms).
        const { chunkIndex } = call.chunk;
        const chunks = Array.from({ length: call.frames }, (_, frame) => ({ samples: outcome.audio.subarray(frame * samplesPerFrame, (frame + 1) * samplesPerFrame), sampleRateHz, frameCount: 1, chunkIndex, frameIndex: call.firstFrame + frame }));
        outcomes.set(call.id, { chunks });
      }
      if (call.request.freed) this.#releaseAll(call.request);
      else this.#releaseDecoded(call.request);
    };
    const groups = new Map<number, typeof calls>();
    for (const call of calls) {
      const key = decoder.decodeBatch ? call.frames : -groups.size - 1;
      groups.set(key, [...(groups.get(key) ?? []), call]);
    }
    batchSizes.decode = [...groups.values()].map((group) => group.length);
    const decodeGroup = async (group: typeof calls) => {
      try {
        if (decoder.decodeBatch && group.length > 1) {
          const decoded = await decoder.decodeBatch(group.map((call) => ({ state: call.chunk.decoderState, latents: call.latents })));
          group.forEach((call, index) => settle(call, decoded[index]!));
        } else {
          for (const call of group) settle(call, await decoder.decode(call.chunk.decoderState, call.latents, { reuseState: true }));
        }
      } catch (error) {
        for (const call of group) if (call.request.decodeInFlight) settle(call, { error });
      }
    };
    // A decoder off the JS thread (workers) takes the groups at once, one per core. An in-process one runs one
    // session call at a time: onnxruntime-web never settles a second run of a session while one is going.
    if (decoder.concurrent) await Promise.all([...groups.values()].map(decodeGroup));
    else for (const group of groups.values()) await decodeGroup(group);
    return outcomes;
  }

  #newDecoderState(): unknown {
    const state = this.parts.decoder.emptyState();
    this.#liveDecoderStates++;
    return state;
  }

  #releaseDecoderState(state: unknown): void {
    this.parts.decoder.release?.(state);
    this.#liveDecoderStates--;
  }

  /** Gives back the slot of a chunk's caches, if they are in one (a chunk that ended, a request freed). */
  #releaseSlot(cache: SamplingChunk["cache"]): void {
    if ("slot" in cache) this.parts.flowLmSlots?.release(cache.slot);
  }

  #releaseDecoded(request: PocketRequest): void {
    for (const chunk of request.takeDecodedChunks()) this.#releaseDecoderState(chunk.decoderState);
  }

  /** Frees everything the request holds: its FlowLM state now, its decoder states once no decode uses them. */
  #free(requestId: RequestId): void {
    const request = this.#requests.get(requestId);
    if (!request) return;
    this.#requests.delete(requestId);
    request.freed = true;
    if (request.sampling) this.#releaseSlot(request.sampling.cache);
    request.sampling = undefined;
    if (!request.decodeInFlight) this.#releaseAll(request);
  }

  #releaseAll(request: PocketRequest): void {
    for (const chunk of request.decoding.splice(0)) this.#releaseDecoderState(chunk.decoderState);
  }
}
