/**
 * FlowLM's AR steps for many streams in one call (the batched step graph, batched/flow-lm-graph.ts), over
 * KV caches held in slots this class owns, like vLLM's KV blocks: one pool per layer for keys
 * [slots, H, Dh, T] (transposed, as attention reads them) and one for values [slots, H, T, Dh].
 *
 * - A stream takes a slot when its chunk's prefill is done (`admit` copies the prefilled rows in once)
 *   and gives it back when the chunk ends (`release`). Slots stay packed, [0, occupied): a released slot is
 *   filled by moving the last one into it, so every call feeds the pools' first rows as they are, without
 *   a copy, and rows not stepping this tick ride along (their outputs are dropped).
 * - A step returns only the new K/V rows, which are written into the slots at each stream's position:
 *   nothing proportional to cache length × streams is copied per step.
 * - T, the positions every call attends over, grows and shrinks in blocks of 64 with the longest stream,
 *   in place (`#allocate`); past a stream's own position its rows are masked.
 * - A stream never holds more than `cachePositions` (1000, docs/pocket-tts.md §3.1) positions, as with the published graph.
 */
import type * as ort from "onnxruntime-web";
import type { OnnxSession } from "../../../onnx/runtime.ts";
import type { StateEntry } from "../bundle/pocket-bundle.ts";
import { batchedKeysInput, batchedNewKeysOutput, batchedNewValuesOutput, batchedValuesInput, BATCHED_STEP_INPUTS } from "../batched/flow-lm-graph.ts";
import type { FlowLmDimensions } from "../batched/flow-lm-weights.ts";
import type { FlowLm } from "./flow-lm.ts";
import { FLOW_LM_POSITIONS_AXIS, float32Output, requiredOutput, type FlowLmState } from "./state.ts";

/** A stream's place in the pools; `positions` filled so far. */
export interface FlowLmSlot {
  readonly positions: number;
}

export interface FlowLmSlotsConfig extends FlowLmDimensions {
  cachePositions: number;
}

export interface SlotStepResult {
  conditioning: Float32Array;
  eosLogit: number;
}

/** What steps streams through slots: FlowLmSlots, or a wrapper of it (the conformance harness's crowd). */
export interface FlowLmStepper {
  admit(state: FlowLmState): FlowLmSlot;
  release(slot: FlowLmSlot): void;
  step(rows: ReadonlyArray<{ slot: FlowLmSlot; latent: Float32Array | null }>): Promise<SlotStepResult[]>;
}

/** T grows and shrinks in blocks of this many positions. */
const POSITION_BLOCK = 64;

class Slot implements FlowLmSlot {
  constructor(
    public index: number,
    public positions: number,
  ) {}
  released = false;
}

export class FlowLmSlots implements FlowLmStepper {
  readonly #slots: Slot[] = [];
  /** Per layer, in layer order. */
  #keys: Float32Array[] = [];
  #values: Float32Array[] = [];
  #slotCapacity = 0;
  #positionCapacity = POSITION_BLOCK;
  /** Manifest index of each layer's cache: the manifest's order is by module name, not layer (§3.1). */
  readonly #cacheIndexOfLayer: number[];
  readonly #rowValues: number;

  constructor(
    private readonly session: OnnxSession,
    readonly config: FlowLmSlotsConfig,
    manifest: readonly StateEntry[],
  ) {
    this.#rowValues = config.heads * config.headDim;
    this.#cacheIndexOfLayer = Array.from({ length: config.layers }, (_, layer) => {
      const index = manifest.findIndex((entry) => entry.key === "cache" && layerOfModule(entry.module) === layer);
      if (index < 0) throw new Error(`the FlowLM manifest has no cache for layer ${layer}`);
      return index;
    });
    this.#allocate(0, POSITION_BLOCK);
  }

  /** Streams holding a slot. */
  get occupied(): number {
    return this.#slots.length;
  }

  /** Bytes of the pools in use: the slots' capacity at the current T (none while no stream holds a slot). */
  get stateBytes(): number {
    return 2 * this.config.layers * this.#slotCapacity * this.#rowValues * this.#positionCapacity * Float32Array.BYTES_PER_ELEMENT;
  }

  /** A slot holding the prefilled `state`'s rows (published layout [2, 1, rows, H, Dh] per layer). */
  admit(state: FlowLmState): FlowLmSlot {
    if (state.positions > this.config.cachePositions) throw new RangeError(`FlowLM cache overflow: ${state.positions} positions exceed ${this.config.cachePositions}`);
    const slot = new Slot(this.#slots.length, state.positions);
    this.#ensure(this.#slots.length + 1, state.positions + 1);
    this.#slots.push(slot);
    for (let layer = 0; layer < this.config.layers; layer++) {
      const tensor = state.tensors[this.#cacheIndexOfLayer[layer]!]!;
      const rows = tensor.dims[FLOW_LM_POSITIONS_AXIS]!;
      const cache = tensor.data as Float32Array;
      // [2, 1, rows, H, Dh]: keys in the first plane, values in the second.
      for (let position = 0; position < state.positions; position++) this.#writeRow(layer, slot.index, position, cache, position * this.#rowValues, cache, (rows + position) * this.#rowValues);
    }
    return slot;
  }

  /** Gives the slot back; the last slot moves into its place. */
  release(handle: FlowLmSlot): void {
    const slot = handle as Slot;
    if (slot.released) return;
    slot.released = true;
    const last = this.#slots.pop()!;
    if (last !== slot) {
      this.#copySlot(last.index, slot.index);
      last.index = slot.index;
      this.#slots[slot.index] = last;
    }
    if (this.#slots.length === 0) return this.#allocate(0, POSITION_BLOCK);
    const longest = this.#slots.reduce((most, each) => Math.max(most, each.positions), 0);
    // Shrink only well below the capacity, so a stream ending does not make the next step grow it back.
    if (this.#positionCapacity > blocksFor(longest + 1) + POSITION_BLOCK) this.#allocate(this.#slotCapacity, blocksFor(longest + 1));
  }

  /**
   * One AR step of each row's slot (§2.2 steps 2–3): its input latent (normalised), or null for BOS. The
   * results come in the rows' order; each slot then holds one more position.
   */
  async step(rows: ReadonlyArray<{ slot: FlowLmSlot; latent: Float32Array | null }>): Promise<SlotStepResult[]> {
    if (rows.length === 0) return [];
    const { latentDim, layers, cachePositions } = this.config;
    if (new Set(rows.map(({ slot }) => slot)).size !== rows.length) throw new Error("a FlowLM slot was stepped twice in one call");
    for (const { slot, latent } of rows) {
      const own = slot as Slot;
      if (own.released) throw new Error("a released FlowLM slot was stepped");
      if (own.positions + 1 > cachePositions) throw new RangeError(`FlowLM cache overflow: ${own.positions} + 1 positions exceed ${cachePositions} (voice + text + frames must fit, §6.10)`);
      if (latent && latent.length !== latentDim) throw new Error(`AR input latent has ${latent.length} values, expected ${latentDim}`);
    }
    this.#ensure(this.#slots.length, Math.max(...rows.map(({ slot }) => slot.positions + 1)));
    const count = this.#slots.length;
    const T = this.#positionCapacity;
    const latents = new Float32Array(count * latentDim).fill(NaN);
    for (const { slot, latent } of rows) if (latent) latents.set(latent, (slot as Slot).index * latentDim);
    const positions = BigInt64Array.from(this.#slots, (slot) => BigInt(slot.positions));
    const { Tensor } = this.session;
    const feeds: Record<string, ort.Tensor> = {
      [BATCHED_STEP_INPUTS.latents]: new Tensor("float32", latents, [count, latentDim]),
      [BATCHED_STEP_INPUTS.positions]: new Tensor("int64", positions, [count]),
    };
    const { heads, headDim } = this.config;
    const slotValues = this.#rowValues * T;
    for (let layer = 0; layer < layers; layer++) {
      feeds[batchedKeysInput(layer)] = new Tensor("float32", this.#keys[layer]!.subarray(0, count * slotValues), [count, heads, headDim, T]);
      feeds[batchedValuesInput(layer)] = new Tensor("float32", this.#values[layer]!.subarray(0, count * slotValues), [count, heads, T, headDim]);
    }
    const outputs = await this.session.run(feeds);
    const conditioning = float32Output(outputs, "conditioning", "flow_lm_batched_step");
    const eos = float32Output(outputs, "eos_logit", "flow_lm_batched_step").data;
    const width = conditioning.dims[1]!;
    for (let layer = 0; layer < layers; layer++) {
      const newKeys = requiredOutput(outputs, batchedNewKeysOutput(layer), "flow_lm_batched_step").data as Float32Array;
      const newValues = requiredOutput(outputs, batchedNewValuesOutput(layer), "flow_lm_batched_step").data as Float32Array;
      for (const { slot } of rows) {
        const { index, positions } = slot as Slot;
        this.#writeRow(layer, index, positions, newKeys, index * this.#rowValues, newValues, index * this.#rowValues);
      }
    }
    return rows.map(({ slot }) => {
      const own = slot as Slot;
      own.positions++;
      return { conditioning: conditioning.data.slice(own.index * width, (own.index + 1) * width), eosLogit: eos[own.index]! };
    });
  }

  /**
   * Writes one position's K and V rows of `layer` (D values each, read from `keys`/`values` at their
   * offsets) into slot `index`: keys along the transposed layout's stride T, values per head in a run.
   */
  #writeRow(layer: number, index: number, position: number, keys: Float32Array, keyOffset: number, values: Float32Array, valueOffset: number): void {
    const { heads, headDim } = this.config;
    const T = this.#positionCapacity;
    const keyPool = this.#keys[layer]!;
    const valuePool = this.#values[layer]!;
    const keysBase = index * this.#rowValues * T + position;
    for (let value = 0; value < this.#rowValues; value++) keyPool[keysBase + value * T] = keys[keyOffset + value]!;
    for (let head = 0; head < heads; head++) valuePool.set(values.subarray(valueOffset + head * headDim, valueOffset + (head + 1) * headDim), ((index * heads + head) * T + position) * headDim);
  }

  /** Room for `slots` slots of `positions` positions each (growing by doubling / whole blocks). */
  #ensure(slots: number, positions: number): void {
    const slotCapacity = slots > this.#slotCapacity ? Math.max(slots, this.#slotCapacity * 2, 1) : this.#slotCapacity;
    const positionCapacity = positions > this.#positionCapacity ? blocksFor(positions) : this.#positionCapacity;
    if (slotCapacity !== this.#slotCapacity || positionCapacity !== this.#positionCapacity) this.#allocate(slotCapacity, positionCapacity);
  }

  /**
   * Pools of the given capacity, the occupied slots' rows kept. A pool buffer is made for `slotCapacity`
   * slots at the largest T a stream can need (`cachePositions`): pages never written are never resident,
   * so that costs address space, not memory, and T then grows and shrinks in place (each slot's rows
   * moved to the new stride) instead of through a new buffer per block, which would leave the old one
   * (hundreds of MB at 16 streams) as garbage every 64 steps. Only more slots make new buffers.
   */
  #allocate(slotCapacity: number, positionCapacity: number): void {
    const { heads, headDim, layers } = this.config;
    const oldT = this.#positionCapacity;
    const occupied = this.#slots.length;
    if (slotCapacity === 0) {
      this.#keys = [];
      this.#values = [];
    } else if (slotCapacity === this.#slotCapacity) {
      for (let layer = 0; layer < layers; layer++) {
        // Keys: a run of T per (slot, head, dim); values: a run of T × Dh per (slot, head).
        restride(this.#keys[layer]!, occupied * this.#rowValues, oldT, positionCapacity);
        restride(this.#values[layer]!, occupied * heads, oldT * headDim, positionCapacity * headDim);
      }
    } else {
      const size = slotCapacity * this.#rowValues * blocksFor(this.config.cachePositions + 1);
      const keep = Math.min(oldT, positionCapacity);
      const keys: Float32Array[] = [];
      const values: Float32Array[] = [];
      for (let layer = 0; layer < layers; layer++) {
        const [oldKeys, oldValues] = [this.#keys[layer], this.#values[layer]];
        const [newKeys, newValues] = [new Float32Array(size), new Float32Array(size)];
        if (oldKeys && oldValues) {
          for (let run = 0; run < occupied * this.#rowValues; run++) newKeys.set(oldKeys.subarray(run * oldT, run * oldT + keep), run * positionCapacity);
          for (let run = 0; run < occupied * heads; run++) newValues.set(oldValues.subarray(run * oldT * headDim, (run * oldT + keep) * headDim), run * positionCapacity * headDim);
        }
        keys.push(newKeys);
        values.push(newValues);
      }
      this.#keys = keys;
      this.#values = values;
    }
    this.#slotCapacity = slotCapacity;
    this.#positionCapacity = positionCapacity;
  }

  #copySlot(from: number, to: number): void {
    const slotValues = this.#rowValues * this.#positionCapacity;
    for (let layer = 0; layer < this.config.layers; layer++) {
      this.#keys[layer]!.copyWithin(to * slotValues, from * slotValues, (from + 1) * slotValues);
      this.#values[layer]!.copyWithin(to * slotValues, from * slotValues, (from + 1) * slotValues);
    }
  }
}

/**
 * Moves `runs` runs laid out every `oldStride` elements to every `newStride`, in place: the first
 * min(old, new) elements of each are kept, a run's new elements are zeros. Growing goes from the last run
 * down and shrinking from the first up, so no run is overwritten before it has moved.
 */
function restride(buffer: Float32Array, runs: number, oldStride: number, newStride: number): void {
  if (newStride === oldStride) return;
  const keep = Math.min(oldStride, newStride);
  if (newStride > oldStride) {
    for (let run = runs - 1; run >= 0; run--) {
      buffer.copyWithin(run * newStride, run * oldStride, run * oldStride + keep);
      buffer.fill(0, run * newStride + keep, (run + 1) * newStride);
    }
  } else {
    for (let run = 0; run < runs; run++) buffer.copyWithin(run * newStride, run * oldStride, run * oldStride + keep);
  }
}

function blocksFor(positions: number): number {
  return Math.max(POSITION_BLOCK, Math.ceil(positions / POSITION_BLOCK) * POSITION_BLOCK);
}

/** `transformer.layers.<i>.self_attn` → i. */
function layerOfModule(module: string): number | undefined {
  const match = /(?:^|\.)layers\.(\d+)\./.exec(module);
  return match ? Number(match[1]) : undefined;
}

/** Largest relative difference allowed between the batched step and the published graph at load (§5: ≤ 1e-5). */
export const BATCHED_STEP_TOLERANCE = 1e-5;

export type FlowLmSlotsOutcome = { slots: FlowLmSlots; check: BatchedStepCheck } | { slots: null; reason: string };

/** The batched step's session (sessions.ts), or why there is none. */
export type BatchedStepSession = { session: OnnxSession; config: FlowLmSlotsConfig } | { session: null; reason: string };

/** What the load-time check measured. */
export interface BatchedStepCheck {
  /** Largest difference from the published graph's step, relative to the largest magnitude of each output. */
  relativeDifference: number;
  /** A stream's outputs were bit-identical alone and beside others at other positions. */
  rowsIndependent: boolean;
}

/**
 * Slots over the batched step's session if it reproduces the published graph: a probe stream prefilled
 * by the published graph steps once through both, alone and beside two others at other positions; its
 * outputs must agree within BATCHED_STEP_TOLERANCE with the published step and be bit-identical alone and
 * batched. Otherwise null, with why, and FlowLM keeps one stream per call.
 */
export async function createFlowLmSlots(batched: BatchedStepSession, flowLm: FlowLm): Promise<FlowLmSlotsOutcome> {
  if (!batched.session) return { slots: null, reason: batched.reason };
  const slots = new FlowLmSlots(batched.session, batched.config, flowLm.manifest);
  try {
    const check = await checkAgainstPublished(slots, flowLm);
    if (check.relativeDifference > BATCHED_STEP_TOLERANCE || !check.rowsIndependent) {
      return { slots: null, reason: `the batched step differs from the published graph by ${check.relativeDifference.toExponential(2)} (relative)${check.rowsIndependent ? "" : " and its rows are not independent"}` };
    }
    return { slots, check };
  } catch (error) {
    return { slots: null, reason: `the batched step failed its check: ${(error as Error).message}` };
  }
}

async function checkAgainstPublished(slots: FlowLmSlots, flowLm: FlowLm): Promise<BatchedStepCheck> {
  const { conditioningDim, latentDim } = flowLm.config;
  const prefilled = async (rows: number, seed: number) => {
    const data = Float32Array.from({ length: rows * conditioningDim }, (_, index) => Math.sin(index * 0.37 + seed) * 0.8);
    return flowLm.prefill(flowLm.emptyState(), { data, dims: [1, rows, conditioningDim] });
  };
  const probe = await prefilled(7, 1);
  const latent = Float32Array.from({ length: latentDim }, (_, index) => Math.cos(index * 0.7));
  const published = await flowLm.step(probe, latent);

  const alone = slots.admit(probe);
  const [aloneResult] = await slots.step([{ slot: alone, latent }]);
  slots.release(alone);
  const neighbours = [slots.admit(await prefilled(70, 2)), slots.admit(await prefilled(3, 3))];
  const batched = slots.admit(probe);
  const results = await slots.step([{ slot: neighbours[0]!, latent: null }, { slot: batched, latent }, { slot: neighbours[1]!, latent: latent.map((value) => -value) }]);
  for (const slot of [...neighbours, batched]) slots.release(slot);
  const batchedResult = results[1]!;

  const relative = (actual: ArrayLike<number>, expected: ArrayLike<number>) => {
    let scale = 0;
    let difference = 0;
    for (let index = 0; index < expected.length; index++) {
      scale = Math.max(scale, Math.abs(expected[index]!));
      difference = Math.max(difference, Math.abs(actual[index]! - expected[index]!));
    }
    return scale === 0 ? difference : difference / scale;
  };
  return {
    relativeDifference: Math.max(relative(aloneResult!.conditioning, published.conditioning), relative([aloneResult!.eosLogit], [published.eosLogit])),
    rowsIndependent: aloneResult!.eosLogit === batchedResult.eosLogit && aloneResult!.conditioning.every((value, index) => Object.is(value, batchedResult.conditioning[index])),
  };
}
