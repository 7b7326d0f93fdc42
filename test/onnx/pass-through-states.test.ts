/**
 * Dropping the states a graph only hands back (src/onnx/pass-through-states.ts), on the tiny fixture's
 * Mimi decoder: the encoder's KV caches go, and only states decoding never changes; the audio and the kept
 * states are bit-identical to the published graph's, call after call.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { dropPassThroughStates } from "../../src/onnx/pass-through-states.ts";
import { loadOnnxRuntime } from "../../src/onnx/runtime.ts";
import { loadPocketBundle } from "../../src/models/pocket/bundle/load.ts";
import { MimiDecoder } from "../../src/models/pocket/stages/mimi-decoder.ts";
import { stateBytes } from "../../src/models/pocket/stages/state.ts";
import { randomArray, seededRandom } from "../gpu/support.ts";
import { POCKET_TINY_FIXTURE, requirePocketTinyFixture } from "../models/pocket/bundle-fixture.ts";

describe("dropPassThroughStates", () => {
  test("the Mimi decoder loses the encoder's caches, and only states decoding never changes", async () => {
    const bundle = await loadPocketBundle(requirePocketTinyFixture());
    const path = join(POCKET_TINY_FIXTURE, "mimi_decoder.onnx");
    const rewritten = dropPassThroughStates(new Uint8Array(readFileSync(path)), bundle.mimiStateManifest);
    expect(rewritten).not.toBeNull();
    const runtime = await loadOnnxRuntime({ provider: "onnxruntime-node" });
    const published = new MimiDecoder(await runtime.createSession(path), bundle.mimiStateManifest, { latentDim: bundle.dims.latentDim, samplesPerFrame: bundle.dims.samplesPerFrame });
    const initial = published.emptyState();
    let state = initial;
    const random = seededRandom(5);
    for (const frames of [1, 3, 2]) state = (await published.decode(state, randomArray(random, frames * bundle.dims.latentDim, 2))).state;
    bundle.mimiStateManifest.forEach((entry, index) => {
      const unchanged = Bun.deepEquals(state.tensors[index]!.data, initial.tensors[index]!.data);
      if (rewritten!.removed.has(entry.inputName)) expect({ state: `${entry.module}/${entry.key}`, unchanged }).toEqual({ state: `${entry.module}/${entry.key}`, unchanged: true });
    });
    // The big ones: the encoder transformer's KV caches (its offset counters still advance, so they stay).
    const encoderCaches = bundle.mimiStateManifest.filter((entry) => entry.module.startsWith("encoder_transformer") && entry.key === "cache");
    expect(encoderCaches.length).toBeGreaterThan(0);
    for (const entry of encoderCaches) expect(rewritten!.removed.has(entry.inputName)).toBe(true);
    const decoderCaches = bundle.mimiStateManifest.filter((entry) => entry.module.startsWith("decoder_transformer") && entry.key === "cache");
    expect(decoderCaches.length).toBeGreaterThan(0);
    for (const entry of decoderCaches) expect(rewritten!.removed.has(entry.inputName)).toBe(false);
  });

  test("decoding is bit-identical with a smaller state", async () => {
    const bundle = await loadPocketBundle(requirePocketTinyFixture());
    const runtime = await loadOnnxRuntime({ provider: "onnxruntime-node" });
    const path = join(POCKET_TINY_FIXTURE, "mimi_decoder.onnx");
    const config = { latentDim: bundle.dims.latentDim, samplesPerFrame: bundle.dims.samplesPerFrame };
    const published = new MimiDecoder(await runtime.createSession(path), bundle.mimiStateManifest, config);
    const dropped = dropPassThroughStates(new Uint8Array(readFileSync(path)), bundle.mimiStateManifest)!;
    const opened = { session: await runtime.createSession(path, dropped.model), manifest: bundle.mimiStateManifest.filter((entry) => !dropped.removed.has(entry.inputName)) };
    const lean = new MimiDecoder(opened.session, opened.manifest, config);
    let [full, small] = [published.emptyState(), lean.emptyState()];
    expect(stateBytes(small)).toBeLessThan(stateBytes(full));
    const random = seededRandom(3);
    for (const frames of [1, 2, 3, 1, 4]) {
      const latents = randomArray(random, frames * config.latentDim, 2);
      const [a, b] = [await published.decode(full, latents), await lean.decode(small, latents)];
      expect(b.audio).toEqual(a.audio);
      [full, small] = [a.state, b.state];
    }
    // Every state the lean graph keeps matches the published graph's.
    opened.manifest.forEach((entry, index) => expect(small.tensors[index]!.data).toEqual(full.tensors[bundle.mimiStateManifest.indexOf(bundle.mimiStateManifest.find((each) => each.inputName === entry.inputName)!)]!.data));
  });
});
