/**
 * Each stage against the pocket-tiny golden tensors (fixture README "Cases" 2–5). Tolerances: the README's
 * suggested atol (1e-5; 2e-5 for audio) and relRms ≤ 1e-4; onnxruntime-web lands near 1e-6.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { decodeSafetensorsWithInt64 } from "../../../src/formats/safetensors.ts";
import { loadPocketBundle } from "../../../src/models/pocket/bundle/load.ts";
import type { PocketBundle } from "../../../src/models/pocket/bundle/pocket-bundle.ts";
import { compareTensors } from "../../../src/conformance/report.ts";
import { closePocketSessions, openPocketSessions, type PocketSessions } from "../../../src/models/pocket/sessions.ts";
import { createOnnxSession } from "../../../src/onnx/runtime.ts";
import { createPocketStages, voiceStateFromAudio, type PocketStages } from "../../../src/models/pocket/pipeline.ts";
import { runEncoder, VoiceEncoder } from "../../../src/models/pocket/stages/voice-encoder.ts";
import { voiceStateFromSafetensors } from "../../../src/models/pocket/stages/flow-lm.ts";
import { type FlowLmState } from "../../../src/models/pocket/stages/state.ts";
import { encodeSafetensors } from "../../../src/formats/safetensors.ts";

const TINY_DIR = join(import.meta.dir, "../../../../shared/fixtures/pocket-tiny");
const golden = decodeSafetensorsWithInt64(readFileSync(join(TINY_DIR, "golden.safetensors")));
const LATENT_DIM = 32;
const D = 64;

function float(name: string): Float32Array {
  const tensor = golden[name];
  if (tensor?.dtype !== "F32") throw new Error(`no float golden tensor ${name}`);
  return tensor.data;
}

function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, maxAbs = 1e-5): void {
  const difference = compareTensors(actual, expected);
  expect(actual.length).toBe(expected.length);
  expect(difference.maxAbs).toBeLessThanOrEqual(maxAbs);
  expect(difference.relRms).toBeLessThanOrEqual(1e-4);
}

let bundle: PocketBundle;
let sessions: PocketSessions;
let stages: PocketStages;
let goldenVoice: FlowLmState;

beforeAll(async () => {
  bundle = await loadPocketBundle(TINY_DIR);
  sessions = await openPocketSessions(bundle);
  stages = await createPocketStages(bundle, sessions);
  goldenVoice = await stages.flowLm.prefill(stages.flowLm.emptyState(), { data: float("voice.conditioning_with_bos"), dims: [1, 30, D] });
});

afterAll(async () => {
  await closePocketSessions(sessions);
});

test("text conditioner: token ids → embedding rows, exactly", async () => {
  const ids = Array.from(golden["text_conditioner.token_ids"]!.data as BigInt64Array, Number);
  const embeddings = await stages.textConditioner.embed(ids);
  expect(embeddings.dims).toEqual([1, 12, D]);
  expect(embeddings.data).toEqual(float("text_conditioner.embeddings"));
});

describe("voice encoder", () => {
  test("a clip longer than one window encodes, window by window, to the whole-clip result; past 10 s it is cut to 10 s", async () => {
    const encoder = stages.voiceEncoder!;
    const clip = new Float32Array(113 * 1920);
    let seed = 7;
    for (let index = 0; index < clip.length; index++) {
      seed = (seed * 16807) % 2147483647;
      clip[index] = (seed / 2147483647 - 0.5) * 0.6;
    }
    const whole = await runEncoder(sessions.voiceEncoder!, clip, D);
    const windowed = await encoder.encode(clip);
    expect(windowed.dims).toEqual(whole.dims);
    let worst = 0;
    for (let index = 0; index < whole.data.length; index++) worst = Math.max(worst, Math.abs(windowed.data[index]! - whole.data[index]!) / (1e-3 + Math.abs(whole.data[index]!)));
    expect(worst).toBeLessThan(1e-3);

    const long = new Float32Array(20 * 24_000);
    for (let copy = 0; copy * clip.length < long.length; copy++) long.set(clip.subarray(0, Math.min(clip.length, long.length - copy * clip.length)), copy * clip.length);
    expect(encoder.keptFrames(long.length)).toBe(125);
    const cut = await encoder.encode(long);
    expect(cut.dims).toEqual([1, 126, D]);
    expect(cut.data).toEqual((await encoder.encode(long.subarray(0, 125 * 1920))).data);
  });

  test("detects the baked-in BOS and matches the golden voice conditioning, padded or not", async () => {
    const encoder = stages.voiceEncoder!;
    expect(encoder.bosBakedIn).toBe(true);
    const waveform = float("voice.waveform");
    const unpadded = await encoder.encode(waveform);
    expect(unpadded.dims).toEqual([1, 30, D]);
    expectClose(unpadded.data, float("voice.conditioning_with_bos"));
    const padded = new Float32Array(29 * 1920);
    padded.set(waveform);
    expectClose((await encoder.encode(padded)).data, float("voice.conditioning_with_bos"));
  });

  test("prepends bos_before_voice.npy for an encoder without it (the January wrapper)", async () => {
    const session = await createOnnxSession(join(TINY_DIR, "variants", "mimi_encoder_no_bos.onnx"));
    try {
      const encoder = await VoiceEncoder.create(session, { samplesPerFrame: 1920, conditioningDim: D, bosBeforeVoice: bundle.bosBeforeVoice });
      expect(encoder.bosBakedIn).toBe(false);
      const encoded = await encoder.encode(float("voice.waveform"));
      expect(encoded.dims).toEqual([1, 30, D]);
      expectClose(encoded.data, float("voice.conditioning_with_bos"));
      // A v1 bundle (no BOS vector) takes the rows as they are.
      const v1 = await VoiceEncoder.create(session, { samplesPerFrame: 1920, conditioningDim: D, bosBeforeVoice: null });
      expectClose((await v1.encode(float("voice.waveform"))).data, float("voice.conditioning"));
    } finally {
      await session.release();
    }
  });

  test("refuses an extra row that is not the BOS, and empty audio", async () => {
    await expect(VoiceEncoder.create(sessions.voiceEncoder!, { samplesPerFrame: 1920, conditioningDim: D, bosBeforeVoice: new Float32Array(D) })).rejects.toThrow("row 0 differs from bos_before_voice");
    await expect(VoiceEncoder.create(sessions.voiceEncoder!, { samplesPerFrame: 1920, conditioningDim: D, bosBeforeVoice: null })).rejects.toThrow("no bos_before_voice");
    await expect(stages.voiceEncoder!.encode(new Float32Array(0))).rejects.toThrow("empty");
  });
});

describe("FlowLM and flow head", () => {
  async function runSteps(voice: FlowLmState, lsdSteps: number, steps = 12) {
    let state = await stages.flowLm.prefill(voice, { data: float("flow_lm.text_embeddings"), dims: [1, 9, D] });
    const afterText = state.positions;
    const noise = float("flow_lm.noise");
    const conditioning: number[] = [];
    const eosLogits: number[] = [];
    const latents: number[] = [];
    const substeps: { xIn: number[]; direction: number[] } = { xIn: [], direction: [] };
    let input: Float32Array | null = null;
    for (let k = 0; k < steps; k++) {
      const result = await stages.flowLm.step(state, input);
      state = result.state;
      conditioning.push(...result.conditioning);
      eosLogits.push(result.eosLogit);
      input = await stages.flowHead.sample(result.conditioning, noise.subarray(k * LATENT_DIM, (k + 1) * LATENT_DIM), lsdSteps, ({ xIn, flowDirection }) => {
        substeps.xIn.push(...xIn);
        substeps.direction.push(...flowDirection);
      });
      latents.push(...input);
    }
    return { afterText, final: state.positions, conditioning, eosLogits, latents, substeps };
  }

  test("voice prefill, text prefill and 12 AR steps with 1 LSD step match the golden run", async () => {
    expect(goldenVoice.positions).toBe(30);
    const run = await runSteps(goldenVoice, 1);
    expect([run.afterText, run.final]).toEqual([39, 51]);
    expectClose(run.conditioning, float("flow_lm.lsd1.conditioning"));
    expectClose(run.eosLogits, float("flow_lm.lsd1.eos_logit"));
    expectClose(run.latents, float("flow_lm.lsd1.latent"));
    expect(run.eosLogits.map((logit) => logit > -4)).toEqual([false, false, true, false, false, false, true, true, false, false, false, true]);
  });

  test("4 LSD steps: every sub-step's x and flow_dir match", async () => {
    const run = await runSteps(goldenVoice, 4);
    expectClose(run.latents, float("flow_lm.lsd4.latent"));
    expectClose(run.substeps.xIn, float("flow_lm.lsd4.flow_x_in"));
    expectClose(run.substeps.direction, float("flow_lm.lsd4.flow_dir"));
  });

  test("the flow head batch", async () => {
    const direction = await stages.flowHead.velocity(float("flow_net.c"), float("flow_net.s"), float("flow_net.t"), float("flow_net.x"));
    expectClose(direction, float("flow_net.flow_dir"));
  });

  test("states are values: stepping the same state twice gives the same result and leaves it unchanged", async () => {
    const state = await stages.flowLm.prefill(goldenVoice, { data: float("flow_lm.text_embeddings"), dims: [1, 9, D] });
    // Bytes, not values: the unfilled cache rows are NaN.
    const bytesOf = (data: unknown) => {
      const view = data as Float32Array | BigInt64Array;
      return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
    };
    const snapshot = state.tensors.map((tensor) => bytesOf(tensor.data).slice());
    const first = await stages.flowLm.step(state, null);
    const second = await stages.flowLm.step(state, null);
    expect(second.conditioning).toEqual(first.conditioning);
    expect(second.eosLogit).toBe(first.eosLogit);
    state.tensors.forEach((tensor, index) => expect(Buffer.compare(bytesOf(tensor.data), snapshot[index]!)).toBe(0));
  });

  test("refuses to overflow the static 1000-position cache", async () => {
    await expect(stages.flowLm.prefill(goldenVoice, { data: new Float32Array(971 * D), dims: [1, 971, D] })).rejects.toThrow(RangeError);
    const full = await stages.flowLm.prefill(goldenVoice, { data: new Float32Array(970 * D), dims: [1, 970, D] });
    expect(full.positions).toBe(1000);
    await expect(stages.flowLm.step(full, null)).rejects.toThrow("cache overflow");
  });

  test("lsd_steps must be a positive integer", async () => {
    await expect(stages.flowHead.sample(new Float32Array(D), new Float32Array(LATENT_DIM), 0)).rejects.toThrow(RangeError);
  });
});

describe("voice states", () => {
  async function expectSameAsGoldenVoice(state: FlowLmState): Promise<void> {
    expect(state.positions).toBe(30);
    const expected = await stages.flowLm.step(await stages.flowLm.prefill(goldenVoice, { data: float("flow_lm.text_embeddings"), dims: [1, 9, D] }), null);
    const actual = await stages.flowLm.step(await stages.flowLm.prefill(state, { data: float("flow_lm.text_embeddings"), dims: [1, 9, D] }), null);
    expectClose(actual.conditioning, expected.conditioning);
    expectClose(actual.conditioning, float("flow_lm.lsd1.conditioning").subarray(0, D));
  }

  test("cloning from audio: encode + prefill", async () => {
    await expectSameAsGoldenVoice(await voiceStateFromAudio(stages, float("voice.waveform")));
  });

  test("the upstream …/cache + …/offset file (voice_state.safetensors)", async () => {
    await expectSameAsGoldenVoice(await voiceStateFromSafetensors(readFileSync(join(TINY_DIR, "voice_state.safetensors")), stages.flowLm));
  });

  test("the …/current_end format: the step is the length of current_end", async () => {
    const stored = decodeSafetensorsWithInt64(readFileSync(join(TINY_DIR, "voice_state.safetensors")));
    const file: Parameters<typeof encodeSafetensors>[0] = {};
    for (const [name, tensor] of Object.entries(stored)) {
      if (name.endsWith("/offset")) file[name.replace("/offset", "/current_end")] = { dtype: "F32", shape: [30], data: new Float32Array(30) };
      else if (tensor.dtype === "F32") file[name] = { dtype: "F32", shape: tensor.shape, data: tensor.data };
    }
    await expectSameAsGoldenVoice(await voiceStateFromSafetensors(encodeSafetensors(file, {}), stages.flowLm));
  });

  test("the old audio_prompt format runs a FlowLM prefill", async () => {
    const file = encodeSafetensors({ audio_prompt: { dtype: "F32", shape: [1, 30, D], data: float("voice.conditioning_with_bos") } }, {});
    await expectSameAsGoldenVoice(await voiceStateFromSafetensors(file, stages.flowLm));
  });

  test("a file missing a layer is refused", async () => {
    const stored = decodeSafetensorsWithInt64(readFileSync(join(TINY_DIR, "voice_state.safetensors")));
    const cache = stored["transformer.layers.0.self_attn/cache"]!;
    const file = encodeSafetensors({ "transformer.layers.0.self_attn/cache": { dtype: "F32", shape: cache.shape, data: cache.data as Float32Array } }, {});
    await expect(voiceStateFromSafetensors(file, stages.flowLm)).rejects.toThrow("offset");
  });
});

describe("Mimi decoder (ONNX)", () => {
  async function decode(calls: number[]): Promise<Float32Array> {
    const latents = float("mimi.latents");
    let state = stages.mimiDecoder.emptyState();
    const audio = new Float32Array(latents.length / LATENT_DIM * 1920);
    let frame = 0;
    for (const count of calls) {
      const result = await stages.mimiDecoder.decode(state, latents.subarray(frame * LATENT_DIM, (frame + count) * LATENT_DIM));
      expect(result.audio).toHaveLength(count * 1920);
      audio.set(result.audio, frame * 1920);
      state = result.state;
      frame += count;
    }
    expect(state.frames).toBe(12);
    return audio;
  }

  test("one latent per call and calls of [5, 7] match the golden audio", async () => {
    expectClose(await decode(Array(12).fill(1)), float("mimi.audio_single"), 2e-5);
    expectClose(await decode([5, 7]), float("mimi.audio_chunked"), 2e-5);
  });

  test("a state can be decoded from twice with the same result", async () => {
    const latent = float("mimi.latents").subarray(0, LATENT_DIM);
    const fresh = stages.mimiDecoder.emptyState();
    const first = await stages.mimiDecoder.decode(fresh, latent);
    const second = await stages.mimiDecoder.decode(fresh, latent);
    expect(second.audio).toEqual(first.audio);
  });
});
