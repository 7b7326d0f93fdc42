/**
 * `conformance --batch N` for the stage cases (flow_lm, mimi_decoder; end-to-end requests run beside others
 * in the runner itself, harness.ts): the golden streams run inside batches of N. Around each golden stream,
 * N − 1 companion streams of seeded random conditioning and latents, each prefilled to its own length and
 * stepped for its own number of steps, share every model call; one that ends is replaced by a new one at
 * another position. A golden stream passes only if being batched changed nothing the thresholds can see.
 */
import { concatFloat32 } from "../lib/concat.ts";
import type { FlowLm } from "../models/pocket/stages/flow-lm.ts";
import type { FlowLmSlot, FlowLmSlots, FlowLmStepper, SlotStepResult } from "../models/pocket/stages/flow-lm-slots.ts";
import type { LatentDecoder } from "../models/pocket/stages/mimi-decoder.ts";
import { seededRandom } from "../lib/seeded-random.ts";

interface Companion {
  slot: FlowLmSlot;
  stepsLeft: number;
}

/** FlowLM steps of the caller's streams, each call shared with N − 1 companions at other positions. */
export class CrowdedFlowLm implements FlowLmStepper {
  readonly #companions: Companion[] = [];
  readonly #random: () => number;
  /** Batch sizes of the calls made, for the report. */
  readonly sizes: number[] = [];

  constructor(
    private readonly slots: FlowLmSlots,
    private readonly flowLm: FlowLm,
    private readonly batch: number,
    seed = 1,
  ) {
    this.#random = seededRandom(seed);
  }

  admit(state: Parameters<FlowLmSlots["admit"]>[0]): FlowLmSlot {
    return this.slots.admit(state);
  }

  release(slot: FlowLmSlot): void {
    this.slots.release(slot);
  }

  async step(rows: ReadonlyArray<{ slot: FlowLmSlot; latent: Float32Array | null }>): Promise<SlotStepResult[]> {
    await this.#fill(this.batch - rows.length);
    const { latentDim } = this.flowLm.config;
    const companionRows = this.#companions.map(({ slot }) => ({ slot, latent: this.#random() < 0.1 ? null : this.#values(latentDim, 1) }));
    // The caller's rows go anywhere in the call.
    const all = [...companionRows, ...rows].map((row) => ({ row, key: this.#random() })).sort((a, b) => a.key - b.key).map(({ row }) => row);
    this.sizes.push(all.length);
    const results = await this.slots.step(all);
    for (const companion of this.#companions) companion.stepsLeft--;
    for (const ended of this.#companions.filter((companion) => companion.stepsLeft <= 0 || companion.slot.positions >= this.flowLm.config.cachePositions - 1)) {
      this.slots.release(ended.slot);
      this.#companions.splice(this.#companions.indexOf(ended), 1);
    }
    return rows.map((row) => results[all.indexOf(row)]!);
  }

  /** Gives back every companion's slot. */
  close(): void {
    for (const companion of this.#companions.splice(0)) this.slots.release(companion.slot);
  }

  async #fill(count: number): Promise<void> {
    const { conditioningDim } = this.flowLm.config;
    while (this.#companions.length < count) {
      const rows = 1 + Math.floor(this.#random() * 150);
      const state = await this.flowLm.prefill(this.flowLm.emptyState(), { data: this.#values(rows * conditioningDim, 0.8), dims: [1, rows, conditioningDim] });
      this.#companions.push({ slot: this.slots.admit(state), stepsLeft: 3 + Math.floor(this.#random() * 60) });
    }
  }

  #values(count: number, scale: number): Float32Array {
    return Float32Array.from({ length: count }, () => (this.#random() * 2 - 1) * scale);
  }
}

/**
 * Decodes `latents` in `calls` as decodeInCalls does, each call beside N − 1 companion streams (their
 * own states, random latents, the same frame count): in one `decodeBatch` call where the decoder has one
 * (WGSL), else one call after another on their own states (the ONNX graph is batch 1).
 */
export async function decodeInCrowdedCalls<State>(
  decoder: LatentDecoder<State> & { decodeBatch?(requests: ReadonlyArray<{ state: State; latents: Float32Array }>): Promise<Array<{ state: State; audio: Float32Array }>> },
  latents: Float32Array,
  calls: readonly number[],
  batch: number,
  seed = 1,
): Promise<Float32Array> {
  const random = seededRandom(seed);
  const { latentDim } = decoder.config;
  let state = decoder.emptyState();
  let companions = Array.from({ length: batch - 1 }, () => decoder.emptyState());
  const pieces: Float32Array[] = [];
  let offset = 0;
  for (const frames of calls) {
    const own = latents.subarray(offset * latentDim, (offset + frames) * latentDim);
    offset += frames;
    const others = companions.map((companionState) => ({ state: companionState, latents: Float32Array.from({ length: frames * latentDim }, () => random() * 2 - 1) }));
    if (decoder.decodeBatch) {
      const position = Math.floor(random() * (others.length + 1));
      const requests = [...others.slice(0, position), { state, latents: own }, ...others.slice(position)];
      const decoded = await decoder.decodeBatch(requests);
      state = decoded[position]!.state;
      pieces.push(Float32Array.from(decoded[position]!.audio));
      companions = decoded.filter((_, index) => index !== position).map((entry) => entry.state);
    } else {
      const decoded = await decoder.decode(state, own);
      state = decoded.state;
      pieces.push(Float32Array.from(decoded.audio));
      companions = [];
      for (const other of others) companions.push((await decoder.decode(other.state, other.latents)).state);
    }
  }
  decoder.release?.(state);
  for (const companion of companions) decoder.release?.(companion);
  return concatFloat32(pieces);
}
