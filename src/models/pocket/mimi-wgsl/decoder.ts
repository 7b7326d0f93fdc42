/**
 * The Mimi codec decoder on our own WGSL kernels (docs/pocket-tts.md §1.3–1.6): normalised latents
 * [n, latentDim] → 1920·n float PCM samples per stream, for N streams at once, each with its streaming
 * state kept on the device. Per call (T = k latent frames, S = 16·k transformer steps):
 *
 *   latents [N, k, L] ─ latent-denorm ─▶ [N, L, k] ─ output_proj (1×1 conv) ─▶ [N, D, k]
 *   ─ upsample (depthwise ConvTranspose k32 s16) ─▶ [N, D, S]
 *   ─ decoder_transformer (mimi-transformer.ts) ─▶ [N, D, S]
 *   ─ SEANet decoder (convs, ELUs, ConvTransposes, ResBlocks) ─▶ [N, 1, 1920·k]
 *
 * All of it is one compute pass in one command submission. Streaming state (conv tails, ConvTranspose
 * partials, KV rings) lives in per-decoder buffers with one slot per stream; the stream table tells every
 * stateful kernel which slot each batch row uses and how many positions it has already run, so any mix of
 * streams decodes together without moving state.
 *
 * The architecture is read off the weights (channel counts, kernel sizes, layer counts); what the weights do
 * not say (attention heads, context, RoPE period) comes from the options, with the released model's values
 * as defaults.
 */
import { conv1dDispatches, conv1dTailLength, conv1dWindowFloats, type Conv1dShape } from "../../../gpu/conv1d.ts";
import { convTranspose1dDispatches, convTranspose1dPartialLength, type ConvTranspose1dShape } from "../../../gpu/conv-transpose1d.ts";
import { eluDispatch } from "../../../gpu/elu.ts";
import { encodeDispatches, storageBuffer, submitAndReadBack, type KernelDispatch } from "../../../gpu/kernel.ts";
import { latentDenormDispatch } from "../../../gpu/latent-denorm.ts";
import { MimiTransformer, uploadMimiTransformerWeights } from "./transformer.ts";
import { EMB_MEAN, EMB_STD, type MimiDecoderWeights, type WeightTensor } from "./weights.ts";
import { createStreamTable, writeStreamTable } from "../../../gpu/stream-table.ts";
import { SerialQueue } from "../../../async/serial-queue.ts";

export interface MimiGpuDecoderOptions {
  /** Attention heads of the decoder transformer (8 in the released model; the weights do not tell). */
  heads?: number;
  /** Attention context in transformer steps (250, §1.4). */
  context?: number;
  /** RoPE max period (10 000, §1.9). */
  ropeMaxPeriod?: number;
  /** Streams that can hold a state at once (state slots on the device). */
  maxStreams?: number;
}

const LAYER_NORM_EPS = 1e-5;
/** Prepared plans (buffers + dispatches per batch size and frame count) kept for reuse. */
const CACHED_PLANS = 6;

interface ConvLayer {
  kind: "conv";
  name: string;
  weight: GPUBuffer;
  bias: GPUBuffer;
  inChannels: number;
  outChannels: number;
  kernelSize: number;
  previous: GPUBuffer;
}

interface ConvTransposeLayer {
  kind: "convtr";
  name: string;
  weight: GPUBuffer;
  bias: GPUBuffer | null;
  inChannels: number;
  outChannels: number;
  kernelSize: number;
  stride: number;
  groups: number;
  partial: GPUBuffer;
}

type SeanetLayer = ConvLayer | ConvTransposeLayer | { kind: "elu"; name: string } | { kind: "resblock"; name: string; first: ConvLayer; second: ConvLayer };

interface Plan {
  key: string;
  batch: number;
  frames: number;
  latents: GPUBuffer;
  audio: GPUBuffer;
  /** Output buffer and [channels, length per stream] of each named stage (§1.3 names, as in the fixtures). */
  stages: Map<string, { buffer: GPUBuffer; channels: number; length: number }>;
  dispatches: KernelDispatch[];
  buffers: GPUBuffer[];
}

/**
 * A stream's decoder state: a slot on the device plus the frames decoded so far. `decode` consumes it and
 * returns its successor (the device state is updated in place, so an old value cannot be replayed).
 */
export class MimiGpuState {
  #consumed = false;

  /** @internal */
  constructor(
    readonly slot: number,
    readonly frames: number,
    /** Shared by a stream's successive states; the slot is free again once no state references it. */
    readonly lease: SlotLease,
  ) {}

  get consumed(): boolean {
    return this.#consumed;
  }

  /** @internal */
  consume(): void {
    if (this.#consumed) throw new Error("this Mimi decoder state was already used by decode(); pass the state that call returned");
    if (this.lease.released) throw new Error("this Mimi decoder state was released");
    this.#consumed = true;
  }
}

class SlotLease {
  released = false;
  constructor(readonly slot: number) {}
}

function requireWeight(weights: MimiDecoderWeights, name: string, dims?: readonly number[]): WeightTensor {
  const tensor = weights.get(name);
  if (!tensor) throw new Error(`Mimi decoder weights lack ${name}`);
  if (dims && (tensor.dims.length !== dims.length || tensor.dims.some((dim, index) => dims[index]! >= 0 && dim !== dims[index]))) {
    throw new Error(`${name} is [${tensor.dims.join(", ")}], expected [${dims.map((dim) => (dim < 0 ? "?" : dim)).join(", ")}]`);
  }
  return tensor;
}

export class MimiGpuDecoder {
  readonly config: { latentDim: number; samplesPerFrame: number };
  /** The GPU works while the JS thread waits on the readback, so decodes overlap sampling (runner.ts `decodesOverlap`). */
  readonly concurrent = true;
  readonly model: { width: number; heads: number; headDim: number; context: number; layers: number; feedForward: number; upsampleStride: number };
  private readonly embStd: GPUBuffer;
  private readonly embMean: GPUBuffer;
  private readonly outputProj: GPUBuffer;
  private readonly upsample: ConvTransposeLayer;
  private readonly transformer: MimiTransformer;
  private readonly seanet: SeanetLayer[];
  private readonly streamTable: GPUBuffer;
  private readonly slots: number;
  private readonly freeSlots: number[];
  private readonly slotRegistry = new FinalizationRegistry<number>((slot) => this.freeSlots.push(slot));
  private readonly plans = new Map<string, Plan>();
  // Plans and buffers are shared between calls, so calls run one after another.
  private readonly calls = new SerialQueue();
  private readonly persistent: GPUBuffer[] = [];

  constructor(
    readonly device: GPUDevice,
    weights: MimiDecoderWeights,
    options: MimiGpuDecoderOptions = {},
  ) {
    const upload = (values: Float32Array, label: string): GPUBuffer => {
      const buffer = storageBuffer(device, values, label);
      this.persistent.push(buffer);
      return buffer;
    };
    const zeroed = (floats: number, label: string): GPUBuffer => {
      const buffer = storageBuffer(device, floats * 4, label);
      this.persistent.push(buffer);
      return buffer;
    };
    this.slots = options.maxStreams ?? 16;
    this.freeSlots = Array.from({ length: this.slots }, (_, index) => this.slots - 1 - index);

    const embStd = requireWeight(weights, EMB_STD);
    const latentDim = embStd.values.length;
    requireWeight(weights, EMB_MEAN, [latentDim]);
    const outputProj = requireWeight(weights, "mimi.quantizer.output_proj.weight", [-1, latentDim, 1]);
    const width = outputProj.dims[0]!;
    const upsampleWeight = requireWeight(weights, "mimi.upsample.convtr.convtr.weight", [width, 1, -1]);
    const upsampleKernel = upsampleWeight.dims[2]!;
    this.embStd = upload(embStd.values, EMB_STD);
    this.embMean = upload(weights.get(EMB_MEAN)!.values, EMB_MEAN);
    this.outputProj = upload(outputProj.values, "output_proj");
    // Resampling kernels are twice their stride (upstream ConvTrUpsample1d: kernel_size = 2·stride).
    this.upsample = {
      kind: "convtr",
      name: "upsample",
      weight: upload(upsampleWeight.values, "upsample"),
      bias: null,
      inChannels: width,
      outChannels: width,
      kernelSize: upsampleKernel,
      stride: upsampleKernel / 2,
      groups: width,
      partial: zeroed(this.slots * width * (upsampleKernel / 2), "upsample partial"),
    };

    const heads = options.heads ?? 8;
    const context = options.context ?? 250;
    const transformerPrefix = "mimi.decoder_transformer.transformer.";
    let layers = 0;
    while (weights.has(`${transformerPrefix}layers.${layers}.norm1.weight`)) layers++;
    const feedForward = requireWeight(weights, `${transformerPrefix}layers.0.linear1.weight`, [-1, width]).dims[0]!;
    const transformerConfig = { dModel: width, heads, layers, dimFeedforward: feedForward, context, maxPeriod: options.ropeMaxPeriod ?? 10_000, eps: LAYER_NORM_EPS };
    const transformerWeights = uploadMimiTransformerWeights(device, transformerConfig, (name) => requireWeight(weights, transformerPrefix + name).values, "out-in");
    this.persistent.push(...transformerWeights.values());
    this.transformer = new MimiTransformer(device, transformerConfig, transformerWeights, this.slots);
    this.persistent.push(...this.transformer.caches);
    this.streamTable = createStreamTable(device, this.slots);
    this.persistent.push(this.streamTable);

    const conv = (name: string): ConvLayer => {
      const weight = requireWeight(weights, `${name}.conv.weight`);
      const [outChannels, inChannels, kernelSize] = weight.dims as [number, number, number];
      const bias = requireWeight(weights, `${name}.conv.bias`, [outChannels]);
      const tail = conv1dTailLength({ kernelSize, dilation: 1, stride: 1 });
      return { kind: "conv", name, weight: upload(weight.values, name), bias: upload(bias.values, `${name} bias`), inChannels, outChannels, kernelSize, previous: zeroed(this.slots * inChannels * tail, `${name} previous`) };
    };
    // decoder.model.<i>: a Conv, a ConvTranspose, a ResBlock, or (no weights) an ELU.
    const lastIndex = Math.max(...[...weights.keys()].map((name) => /^mimi\.decoder\.model\.(\d+)\./.exec(name)?.[1]).filter((index) => index !== undefined).map(Number));
    if (!Number.isFinite(lastIndex)) throw new Error("Mimi decoder weights lack mimi.decoder.model.*");
    this.seanet = [];
    let hop = this.upsample.stride;
    for (let index = 0; index <= lastIndex; index++) {
      const name = `mimi.decoder.model.${index}`;
      if (weights.has(`${name}.conv.weight`)) this.seanet.push(conv(name));
      else if (weights.has(`${name}.block.1.conv.weight`)) this.seanet.push({ kind: "resblock", name, first: conv(`${name}.block.1`), second: conv(`${name}.block.3`) });
      else if (weights.has(`${name}.convtr.weight`)) {
        const weight = requireWeight(weights, `${name}.convtr.weight`);
        const [inChannels, outChannels, kernelSize] = weight.dims as [number, number, number];
        const stride = kernelSize / 2;
        hop *= stride;
        this.seanet.push({
          kind: "convtr",
          name,
          weight: upload(weight.values, name),
          bias: upload(requireWeight(weights, `${name}.convtr.bias`, [outChannels]).values, `${name} bias`),
          inChannels,
          outChannels,
          kernelSize,
          stride,
          groups: 1,
          partial: zeroed(this.slots * outChannels * (kernelSize - stride), `${name} partial`),
        });
      } else this.seanet.push({ kind: "elu", name });
    }
    this.config = { latentDim, samplesPerFrame: hop };
    this.model = { width, heads, headDim: width / heads, context, layers, feedForward, upsampleStride: this.upsample.stride };
  }

  /** A fresh state in a free slot (its conv tails and partials zeroed; KV rings need no clearing). */
  emptyState(): MimiGpuState {
    const slot = this.freeSlots.pop();
    if (slot === undefined) throw new Error(`all ${this.slots} Mimi decoder state slots are in use; release finished streams' states or raise maxStreams`);
    for (const { buffer, floatsPerSlot } of this.slotStates()) {
      if (floatsPerSlot > 0) this.device.queue.writeBuffer(buffer, slot * floatsPerSlot * 4, new Float32Array(floatsPerSlot));
    }
    const lease = new SlotLease(slot);
    this.slotRegistry.register(lease, slot, lease);
    return new MimiGpuState(slot, 0, lease);
  }

  /** Frees a stream's slot now rather than when its state is garbage-collected. */
  release(state: MimiGpuState): void {
    if (state.lease.released) return;
    state.lease.released = true;
    this.slotRegistry.unregister(state.lease);
    this.freeSlots.push(state.slot);
  }

  private slotStates(): Array<{ buffer: GPUBuffer; floatsPerSlot: number }> {
    const states = [{ buffer: this.upsample.partial, floatsPerSlot: this.upsample.outChannels * convTranspose1dPartialLength(this.upsample) }];
    const convState = (layer: ConvLayer) => ({ buffer: layer.previous, floatsPerSlot: layer.inChannels * conv1dTailLength({ kernelSize: layer.kernelSize, dilation: 1, stride: 1 }) });
    for (const layer of this.seanet) {
      if (layer.kind === "conv") states.push(convState(layer));
      if (layer.kind === "resblock") states.push(convState(layer.first), convState(layer.second));
      if (layer.kind === "convtr") states.push({ buffer: layer.partial, floatsPerSlot: layer.outChannels * convTranspose1dPartialLength(layer) });
    }
    return states;
  }

  /** One stream: normalised latents [n, latentDim] → 1920·n samples (same contract as the ONNX MimiDecoder). */
  async decode(state: MimiGpuState, latents: Float32Array): Promise<{ state: MimiGpuState; audio: Float32Array }> {
    const [result] = await this.decodeBatch([{ state, latents }]);
    return result!;
  }

  /**
   * N streams, each with the same number k of new latent frames, in one submission. Returns each stream's
   * successor state and its 1920·k samples, in request order. A batch too large for one storage binding
   * (N·k beyond `maxFramesPerSubmission`) is split along time into several submissions, which streaming
   * makes exact.
   */
  decodeBatch(requests: ReadonlyArray<{ state: MimiGpuState; latents: Float32Array }>): Promise<Array<{ state: MimiGpuState; audio: Float32Array }>> {
    return this.calls.run(async () => {
      const frames = requests.length === 0 ? 0 : requests[0]!.latents.length / this.config.latentDim;
      const perCall = Math.max(1, Math.floor(this.maxFramesPerSubmission() / Math.max(1, requests.length)));
      if (frames <= perCall) return (await this.run(requests, false)).results;
      const { latentDim, samplesPerFrame } = this.config;
      let states = requests.map(({ state }) => state);
      const audio = requests.map(() => new Float32Array(frames * samplesPerFrame));
      for (let first = 0; first < frames; first += perCall) {
        const last = Math.min(frames, first + perCall);
        const results = (await this.run(requests.map(({ latents }, index) => ({ state: states[index]!, latents: latents.subarray(first * latentDim, last * latentDim) })), false)).results;
        results.forEach((result, index) => audio[index]!.set(result.audio, first * samplesPerFrame));
        states = results.map((result) => result.state);
      }
      return states.map((state, index) => ({ state, audio: audio[index]! }));
    });
  }

  /** Stream-frames (streams × latent frames) whose largest activation still fits one storage binding. */
  maxFramesPerSubmission(): number {
    const perStreamFrame = this.largestActivationFloatsPerFrame() * 4;
    return Math.max(1, Math.floor(this.device.limits.maxStorageBufferBindingSize / perStreamFrame));
  }

  private largestActivationFloatsPerFrame(): number {
    const steps = this.upsample.stride;
    let largest = Math.max(this.model.width, this.model.feedForward, 3 * this.model.width) * steps;
    let length = steps;
    // A conv's window holds its tail as well as its input: per frame at worst (one-frame calls).
    const window = (layer: ConvLayer) => layer.inChannels * (length + conv1dTailLength({ kernelSize: layer.kernelSize, dilation: 1, stride: 1 }));
    for (const layer of this.seanet) {
      if (layer.kind === "convtr") {
        length *= layer.stride;
        largest = Math.max(largest, layer.outChannels * length);
      } else if (layer.kind === "conv") largest = Math.max(largest, window(layer), layer.outChannels * length);
      else if (layer.kind === "resblock") largest = Math.max(largest, window(layer.first), window(layer.second), layer.second.outChannels * length);
    }
    return largest;
  }

  /**
   * One stream, also returning every stage's output for this call ([channels, frames] channel-major, under
   * the fixture's names: quantizer, upsample, decoder_transformer, decoder.model.<i>), for locating errors.
   */
  decodeWithStages(state: MimiGpuState, latents: Float32Array): Promise<{ state: MimiGpuState; audio: Float32Array; stages: Map<string, { channels: number; values: Float32Array }> }> {
    return this.calls.run(async () => {
      const { results, stages } = await this.run([{ state, latents }], true);
      return { ...results[0]!, stages };
    });
  }

  /** Frees every device buffer of this decoder; its states become unusable. */
  destroy(): void {
    for (const plan of this.plans.values()) for (const buffer of plan.buffers) buffer.destroy();
    this.plans.clear();
    for (const buffer of this.persistent) buffer.destroy();
  }

  private async run(
    requests: ReadonlyArray<{ state: MimiGpuState; latents: Float32Array }>,
    captureStages: boolean,
  ): Promise<{ results: Array<{ state: MimiGpuState; audio: Float32Array }>; stages: Map<string, { channels: number; values: Float32Array }> }> {
    const { latentDim, samplesPerFrame } = this.config;
    if (requests.length === 0) return { results: [], stages: new Map() };
    if (requests.length > this.slots) throw new Error(`${requests.length} streams exceed the decoder's ${this.slots} state slots`);
    const frames = requests[0]!.latents.length / latentDim;
    for (const [index, { state, latents }] of requests.entries()) {
      const count = latents.length / latentDim;
      if (!Number.isInteger(count) || count < 1) throw new Error(`stream ${index}: ${latents.length} latent values are not a positive multiple of ${latentDim}`);
      if (count !== frames) throw new Error(`stream ${index} has ${count} latent frames and stream 0 has ${frames}; one batch decodes the same number for every stream`);
      if (requests.findIndex((other) => other.state.slot === state.slot) !== index) throw new Error(`stream ${index} repeats another stream's state`);
    }
    for (const { state } of requests) state.consume();

    const plan = this.plan(requests.length, frames);
    const packed = new Float32Array(requests.length * frames * latentDim);
    requests.forEach(({ latents }, index) => packed.set(latents, index * frames * latentDim));
    this.device.queue.writeBuffer(plan.latents, 0, packed);
    writeStreamTable(
      this.device,
      this.streamTable,
      requests.map(({ state }) => ({ slot: state.slot, offset: state.frames * this.upsample.stride })),
      this.slots,
    );

    const encoder = this.device.createCommandEncoder({ label: `mimi decode ${plan.key}` });
    const pass = encoder.beginComputePass();
    encodeDispatches(pass, plan.dispatches);
    pass.end();
    const captured = captureStages ? [...plan.stages] : [];
    const [audio, ...stageValues] = await submitAndReadBack(this.device, encoder, [
      { buffer: plan.audio, floats: requests.length * frames * samplesPerFrame },
      ...captured.map(([, stage]) => ({ buffer: stage.buffer, floats: stage.channels * stage.length })),
    ]);
    const stages = new Map(captured.map(([name, stage], index) => [name, { channels: stage.channels, values: stageValues[index]! }]));
    const perStream = frames * samplesPerFrame;
    return {
      results: requests.map(({ state }, index) => ({ state: new MimiGpuState(state.slot, state.frames + frames, state.lease), audio: audio!.slice(index * perStream, (index + 1) * perStream) })),
      stages,
    };
  }

  private plan(batch: number, frames: number): Plan {
    const key = `${batch}x${frames}`;
    const cached = this.plans.get(key);
    if (cached) {
      // Most recently used last, so eviction drops the oldest.
      this.plans.delete(key);
      this.plans.set(key, cached);
      return cached;
    }
    if (this.plans.size >= CACHED_PLANS) {
      const [oldestKey, oldest] = this.plans.entries().next().value as [string, Plan];
      for (const buffer of oldest.buffers) buffer.destroy();
      this.plans.delete(oldestKey);
    }
    const plan = this.buildPlan(batch, frames);
    this.plans.set(key, plan);
    return plan;
  }

  private buildPlan(batch: number, frames: number): Plan {
    const device = this.device;
    const { latentDim } = this.config;
    const { width } = this.model;
    const steps = frames * this.upsample.stride;
    const buffers: GPUBuffer[] = [];
    const scratchFloats = this.scratchFloats(batch, steps);
    const buffer = (floats: number, label: string): GPUBuffer => {
      const created = storageBuffer(device, floats * 4, label);
      buffers.push(created);
      return created;
    };
    const scratch = buffer(scratchFloats, "state scratch");
    const stages = new Map<string, { buffer: GPUBuffer; channels: number; length: number }>();
    const dispatches: KernelDispatch[] = [];
    const streamTable = this.streamTable;
    const slots = this.slots;

    const latents = buffer(batch * frames * latentDim, "latents");
    const denormalised = buffer(batch * latentDim * frames, "denormalised latents");
    dispatches.push(latentDenormDispatch(device, { batch, latentDim, frames }, { latents, embStd: this.embStd, embMean: this.embMean, output: denormalised }));
    const projected = buffer(batch * width * frames, "quantizer");
    const projection: Conv1dShape = { batch, slots, inChannels: latentDim, outChannels: width, inLength: frames, kernelSize: 1, stride: 1, dilation: 1, groups: 1, hasBias: false, hasResidual: false, padMode: "constant" };
    dispatches.push(...conv1dDispatches(device, projection, { input: denormalised, streamTable, previous: scratch, window: scratch, weight: this.outputProj, output: projected }));
    stages.set("quantizer", { buffer: projected, channels: width, length: frames });

    const upsampled = buffer(batch * width * steps, "upsample");
    dispatches.push(...this.convTransposeDispatches(this.upsample, batch, frames, projected, upsampled, scratch));
    stages.set("upsample", { buffer: upsampled, channels: width, length: steps });

    const transformed = buffer(batch * width * steps, "decoder_transformer");
    dispatches.push(...this.transformer.dispatches(batch, steps, { streamTable, input: upsampled, output: transformed }));
    stages.set("decoder_transformer", { buffer: transformed, channels: width, length: steps });

    // SEANet on channel-major [N, C, T].
    let current = transformed;
    let channels = width;
    let length = steps;
    for (const layer of this.seanet) {
      const stageName = layer.name.replace(/^mimi\./, "");
      if (layer.kind === "elu") {
        const output = buffer(batch * channels * length, stageName);
        dispatches.push(eluDispatch(device, batch * channels * length, current, output));
        current = output;
      } else if (layer.kind === "conv") {
        const output = buffer(batch * layer.outChannels * length, stageName);
        dispatches.push(...this.convDispatches(layer, batch, length, current, output, scratch));
        current = output;
        channels = layer.outChannels;
      } else if (layer.kind === "convtr") {
        length *= layer.stride;
        const output = buffer(batch * layer.outChannels * length, stageName);
        dispatches.push(...this.convTransposeDispatches(layer, batch, length / layer.stride, current, output, scratch));
        current = output;
        channels = layer.outChannels;
      } else {
        // ResBlock: x + conv_k1(ELU(conv_k3(ELU(x)))) (SEANetResnetBlock with an identity shortcut).
        const activated = buffer(batch * channels * length, `${stageName} elu 1`);
        const inner = buffer(batch * layer.first.outChannels * length, `${stageName} block.1`);
        const innerActivated = buffer(batch * layer.first.outChannels * length, `${stageName} elu 2`);
        const output = buffer(batch * channels * length, stageName);
        dispatches.push(
          eluDispatch(device, batch * channels * length, current, activated),
          ...this.convDispatches(layer.first, batch, length, activated, inner, scratch),
          eluDispatch(device, batch * layer.first.outChannels * length, inner, innerActivated),
          ...this.convDispatches(layer.second, batch, length, innerActivated, output, scratch, current),
        );
        current = output;
      }
      stages.set(stageName, { buffer: current, channels, length });
    }
    if (channels !== 1 || length !== frames * this.config.samplesPerFrame) throw new Error(`the SEANet decoder ends in [${channels}, ${length}] per stream, not mono audio of ${frames * this.config.samplesPerFrame} samples`);
    return { key: `${batch}x${frames}`, batch, frames, latents, audio: current, stages, dispatches, buffers };
  }

  /** Floats of the scratch shared by the stateful layers: ConvTranspose partials and conv windows. */
  private scratchFloats(batch: number, steps: number): number {
    let floats = Math.max(...this.slotStates().map(({ floatsPerSlot }) => floatsPerSlot)) * batch;
    let length = steps;
    const window = (layer: ConvLayer) => conv1dWindowFloats({ batch, inChannels: layer.inChannels, inLength: length, kernelSize: layer.kernelSize, dilation: 1, stride: 1 });
    for (const layer of this.seanet) {
      if (layer.kind === "convtr") length *= layer.stride;
      if (layer.kind === "conv") floats = Math.max(floats, window(layer));
      if (layer.kind === "resblock") floats = Math.max(floats, window(layer.first), window(layer.second));
    }
    return floats;
  }

  private convDispatches(layer: ConvLayer, batch: number, inLength: number, input: GPUBuffer, output: GPUBuffer, scratch: GPUBuffer, residual?: GPUBuffer): KernelDispatch[] {
    const shape: Conv1dShape = {
      batch,
      slots: this.slots,
      inChannels: layer.inChannels,
      outChannels: layer.outChannels,
      inLength,
      kernelSize: layer.kernelSize,
      stride: 1,
      dilation: 1,
      groups: 1,
      hasBias: true,
      hasResidual: residual !== undefined,
      padMode: "constant",
    };
    return conv1dDispatches(this.device, shape, { input, streamTable: this.streamTable, previous: layer.previous, window: scratch, weight: layer.weight, bias: layer.bias, ...(residual ? { residual } : {}), output });
  }

  private convTransposeDispatches(layer: ConvTransposeLayer, batch: number, inLength: number, input: GPUBuffer, output: GPUBuffer, scratch: GPUBuffer): KernelDispatch[] {
    const shape: ConvTranspose1dShape = {
      batch,
      slots: this.slots,
      inChannels: layer.inChannels,
      outChannels: layer.outChannels,
      inLength,
      kernelSize: layer.kernelSize,
      stride: layer.stride,
      groups: layer.groups,
      hasBias: layer.bias !== null,
    };
    return convTranspose1dDispatches(this.device, shape, { input, streamTable: this.streamTable, partial: layer.partial, scratch, weight: layer.weight, ...(layer.bias ? { bias: layer.bias } : {}), output });
  }
}
