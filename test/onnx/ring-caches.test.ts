/**
 * The Mimi decoder's KV rings resized from the export's 1000 positions to MIMI_RING_POSITIONS
 * (src/onnx/ring-caches.ts, openMimiDecoderSession): on the tiny fixture's decoder (the exporter of the
 * published bundles) the audio stays within RING_RESIZE_TOLERANCE of the published graph's over a run long
 * enough to wrap the smaller ring several times, in calls of every size the runner sends and longer ones,
 * while a stream's state shrinks.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { dropPassThroughStates } from "../../src/onnx/pass-through-states.ts";
import { resizeRingCaches } from "../../src/onnx/ring-caches.ts";
import { operatorsOf } from "../../src/onnx/proto.ts";
import { loadOnnxRuntime } from "../../src/onnx/runtime.ts";
import { loadPocketBundle } from "../../src/models/pocket/bundle/load.ts";
import type { StateEntry } from "../../src/models/pocket/bundle/pocket-bundle.ts";
import { MIMI_CONTEXT_POSITIONS, MIMI_RING_POSITIONS, MimiDecoder, openMimiDecoderSession, RING_RESIZE_TOLERANCE } from "../../src/models/pocket/stages/mimi-decoder.ts";
import { stateBytes } from "../../src/models/pocket/stages/state.ts";
import { randomArray, seededRandom } from "../gpu/support.ts";
import { POCKET_TINY_FIXTURE, requirePocketTinyFixture } from "../models/pocket/bundle-fixture.ts";

const cachesOf = (manifest: readonly StateEntry[]) => manifest.filter((entry) => entry.key === "cache" && entry.shape.length === 5);

describe("resizeRingCaches", () => {
  test("rewrites the decoder's ring and leaves a graph without one alone", async () => {
    const bundle = await loadPocketBundle(requirePocketTinyFixture());
    const decoder = dropPassThroughStates(new Uint8Array(readFileSync(join(POCKET_TINY_FIXTURE, "mimi_decoder.onnx"))), bundle.mimiStateManifest)!;
    const caches = cachesOf(bundle.mimiStateManifest).filter((entry) => !decoder.removed.has(entry.inputName));
    expect(caches.length).toBe(2);
    const resize = { positionsAxis: 3, exportedPositions: 1000, positions: 384 };
    expect(resizeRingCaches(decoder.model, caches, resize)).not.toBeNull();
    // The flow head takes nothing modulo a ring.
    expect(resizeRingCaches(new Uint8Array(readFileSync(join(POCKET_TINY_FIXTURE, "flow_lm_flow.onnx"))), caches, resize)).toBeNull();
    // The fp32 decoder quantizes nothing at run time, so its resize is held to the fp32 tolerance.
    expect(operatorsOf(decoder.model).has("Mod")).toBe(true);
    expect(operatorsOf(decoder.model).has("DynamicQuantizeLinear")).toBe(false);
    // A capacity the graph does not have is not found.
    expect(resizeRingCaches(decoder.model, caches, { ...resize, exportedPositions: 999 })).toBeNull();
  });
});

describe("openMimiDecoderSession", () => {
  test("decodes within tolerance of the published graph with a smaller ring, calls of any size", async () => {
    const bundle = await loadPocketBundle(requirePocketTinyFixture());
    const runtime = await loadOnnxRuntime({ provider: "onnxruntime-node" });
    const path = join(POCKET_TINY_FIXTURE, "mimi_decoder.onnx");
    const config = { latentDim: bundle.dims.latentDim, samplesPerFrame: bundle.dims.samplesPerFrame };
    const published = new MimiDecoder(await runtime.createSession(path), bundle.mimiStateManifest, config);
    const opened = await openMimiDecoderSession(runtime, path, bundle.mimiStateManifest, config);
    expect(opened.ring).toMatchObject({ positions: MIMI_RING_POSITIONS });
    expect("relativeDifference" in opened.ring && opened.ring.relativeDifference).toBeLessThanOrEqual(RING_RESIZE_TOLERANCE);
    for (const entry of cachesOf(opened.manifest)) expect(entry.shape[3]).toBe(MIMI_RING_POSITIONS);
    const resized = new MimiDecoder(opened.session, opened.manifest, config);
    let [full, small] = [published.emptyState(), resized.emptyState()];
    expect(stateBytes(small)).toBeLessThan(stateBytes(full) / 2);
    const random = seededRandom(5);
    // 1, 2, 4, 8 as the runner sends them, then 8s to wrap the ring, then calls longer than one run.
    const calls = [1, 2, 4, 8, 8, 8, 8, 8, 8, 3, 20, 13, 1];
    let worst = 0;
    let scale = 0;
    for (const frames of calls) {
      const latents = randomArray(random, frames * config.latentDim, 2);
      const [a, b] = [await published.decode(full, latents), await resized.decode(small, latents)];
      expect(b.audio.length).toBe(a.audio.length);
      for (let sample = 0; sample < a.audio.length; sample++) {
        worst = Math.max(worst, Math.abs(a.audio[sample]! - b.audio[sample]!));
        scale = Math.max(scale, Math.abs(a.audio[sample]!));
      }
      [full, small] = [a.state, b.state];
    }
    expect(calls.reduce((sum, frames) => sum + frames, 0) * 16).toBeGreaterThan(2 * MIMI_RING_POSITIONS + MIMI_CONTEXT_POSITIONS);
    expect(worst / scale).toBeLessThanOrEqual(RING_RESIZE_TOLERANCE);
  });

  test("a call longer than the ring holds decodes as shorter calls do: it is split into runs", async () => {
    const bundle = await loadPocketBundle(requirePocketTinyFixture());
    const runtime = await loadOnnxRuntime({ provider: "onnxruntime-node" });
    const config = { latentDim: bundle.dims.latentDim, samplesPerFrame: bundle.dims.samplesPerFrame };
    // The export's own ring of 1000: 70 latents write 1120 positions, more than it holds in one run.
    const decoder = new MimiDecoder(await runtime.createSession(join(POCKET_TINY_FIXTURE, "mimi_decoder.onnx")), bundle.mimiStateManifest, config);
    const latents = randomArray(seededRandom(9), 70 * config.latentDim, 2);
    const whole = await decoder.decode(decoder.emptyState(), latents);
    let state = decoder.emptyState();
    const pieces: number[] = [];
    for (let first = 0; first < 70; first += 7) {
      const part = await decoder.decode(state, latents.subarray(first * config.latentDim, (first + 7) * config.latentDim));
      pieces.push(...part.audio);
      state = part.state;
    }
    let worst = 0;
    let scale = 0;
    pieces.forEach((sample, index) => {
      worst = Math.max(worst, Math.abs(sample - whole.audio[index]!));
      scale = Math.max(scale, Math.abs(sample));
    });
    expect(whole.audio.length).toBe(pieces.length);
    expect(worst / scale).toBeLessThanOrEqual(RING_RESIZE_TOLERANCE);
  });
});
