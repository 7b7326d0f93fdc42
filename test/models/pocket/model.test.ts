/** Pocket TTS served end to end on the tiny golden fixture (random weights: structured noise, not speech). */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { PocketModel } from "../../../src/models/pocket/model.ts";
import { silentLogger } from "../../../src/log/logger.ts";
import { fixtureBundle } from "./bundle-fixture.ts";
import { startTestServer, type TestServer } from "../../support/server.ts";
import { parseSse } from "../../support/sse.ts";
import { encodeWav } from "../../../src/audio/wav.ts";
import { multipartBody, sine } from "../../support/uploads.ts";
import { RecordingSocket } from "../../support/ws-client.ts";
import { scrapeMetrics } from "../../support/metrics.ts";
import { eventually } from "../../support/eventually.ts";

let server: TestServer;
let engine: PocketModel;
beforeAll(async () => {
  engine = await PocketModel.load(fixtureBundle(), {}, { logger: silentLogger });
  server = await startTestServer(engine);
});
afterAll(async () => {
  await server.stop();
  await engine.close();
});

const speak = (body: Record<string, unknown>, init: RequestInit = {}) =>
  fetch(`${server.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "Hello there, how are you?", response_format: "pcm", ...body }), ...init });

describe("Pocket TTS through the speech API", () => {
  test("models and voices name the neural model", async () => {
    const models = (await (await fetch(`${server.url}/v1/models`)).json()) as any;
    expect(models.data[0]).toMatchObject({ id: "pocket-tts", engine: "neural", sample_rate: 24000, supports_cloning: true });
    const voices = (await (await fetch(`${server.url}/v1/audio/voices`)).json()) as any;
    expect(voices.voices).toContain("alba");
  });

  test("a seed reproduces the audio; another seed changes it; frames are 1920 samples", async () => {
    const first = new Uint8Array(await (await speak({ seed: 11 })).arrayBuffer());
    const again = new Uint8Array(await (await speak({ seed: 11 })).arrayBuffer());
    const other = new Uint8Array(await (await speak({ seed: 12 })).arrayBuffer());
    expect(first.length).toBeGreaterThan(0);
    expect(first.length % (1920 * 2)).toBe(0);
    expect(again).toEqual(first);
    expect(other).not.toEqual(first);
  });

  test("same seed, same bytes: a stream that ran beside others (raw, SSE, file, other seeds) gives exactly what it gives alone", async () => {
    const body = { seed: 21, stream_format: "audio", input: "Hello there, how are you? I am fine, thank you." };
    const alone = new Uint8Array(await (await speak(body)).arrayBuffer());
    const crowd = await Promise.all([
      speak(body),
      speak({ ...body, seed: 22 }),
      speak({ ...body, seed: 23, stream_format: undefined, stream: true }),
      speak({ ...body, seed: 24, stream_format: undefined }),
      speak(body),
    ]);
    const bytes = await Promise.all(crowd.map(async (response) => new Uint8Array(await response.arrayBuffer())));
    expect(bytes[0]).toEqual(alone);
    expect(bytes[4]).toEqual(alone);
    expect(bytes[1]).not.toEqual(alone);
  });

  test("an abort frees the request's FlowLM caches and decoder states at once: the state gauge returns to 0", async () => {
    const engineOfServer = server.host.engine!;
    const controller = new AbortController();
    const response = await speak({ seed: 3, stream_format: "audio", input: "Hello there. ".repeat(40) }, { signal: controller.signal });
    const reader = response.body!.getReader();
    await reader.read();
    expect(engineOfServer.stateBytes).toBeGreaterThan(0);
    expect(engineOfServer.counts.running).toBe(1);
    controller.abort();
    await reader.cancel().catch(() => {});
    await eventually("the aborted stream's state freed", () => engineOfServer.stateBytes === 0, 2000).catch(() => {});
    expect(engineOfServer.stateBytes).toBe(0);
    expect(engineOfServer.counts).toEqual({ waiting: 0, running: 0, paused: 0 });
    const metrics = await scrapeMetrics(server.url);
    expect(metrics).toContain("voxedge_engine_state_bytes 0");
    expect(metrics).toContain('voxedge_engine_finished_total{finish_reason="abort"}');
  });

  test("int64 seeds reach the noise whole: seeds above 2^53 that a double cannot tell apart give different audio, each reproducibly", async () => {
    // Written as a pydantic client writes an int: JSON.stringify cannot write a bigint.
    const speakSeed = async (seed: string) => {
      const response = await fetch(`${server.url}/v1/audio/speech`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: `{"input":"Hello there, how are you?","response_format":"pcm","seed":${seed}}`,
      });
      expect({ seed, status: response.status }).toEqual({ seed, status: 200 });
      return new Uint8Array(await response.arrayBuffer());
    };
    const high = await speakSeed("9223372036854775807");
    expect(await speakSeed("9223372036854775807")).toEqual(high);
    expect(await speakSeed("9223372036854775806")).not.toEqual(high);
    expect(await speakSeed("9007199254740993")).not.toEqual(await speakSeed("9007199254740992"));
  });

  test("SSE streams frame by frame and the usage counts frames", async () => {
    const events = parseSse(await (await speak({ seed: 3, stream: true })).text());
    const deltas = events.filter((event) => event.event === "speech.audio.delta");
    expect(deltas.length).toBeGreaterThan(1);
    expect(Buffer.from(deltas[0]!.data.audio, "base64").length).toBe(1920 * 2);
    expect(events.at(-1)!.data.usage.output_tokens).toBe(deltas.length);
  });

  test("extra_params steer generation and are validated", async () => {
    const capped = new Uint8Array(await (await speak({ seed: 5, max_new_tokens: 3 })).arrayBuffer());
    expect(capped.length).toBe(3 * 1920 * 2);
    const bad = await speak({ extra_params: { lsd_steps: 0 } });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error.param).toBe("extra_params.lsd_steps");
    const hotter = new Uint8Array(await (await speak({ seed: 5, extra_params: { temperature: 0.1, lsd_steps: 2 } })).arrayBuffer());
    const base = new Uint8Array(await (await speak({ seed: 5 })).arrayBuffer());
    expect(hotter).not.toEqual(base);
  });

  test("extra_params past the model's ranges (an EOS that never fires) are 400s naming the key before any audio, on every route", async () => {
    const outOfRange = [["eos_threshold", 1e9], ["eos_threshold", 10], ["eos_threshold", 0.5], ["eos_threshold", -10.5], ["temperature", 2.5], ["lsd_steps", 17], ["frames_after_eos", 26]] as const;
    for (const [key, value] of outOfRange) {
      for (const streaming of [{ stream: false }, { stream: true }, { stream_format: "audio" }]) {
        const response = await speak({ ...streaming, extra_params: { [key]: value } });
        expect(response.status).toBe(400);
        expect(((await response.json()) as any).error.param).toBe(`extra_params.${key}`);
      }
    }
    const edges = await speak({ seed: 1, max_new_tokens: 2, extra_params: { eos_threshold: 0, temperature: 2, lsd_steps: 16, frames_after_eos: 25 } });
    expect(edges.status).toBe(200);

    const batch = (body: unknown) => fetch(`${server.url}/v1/audio/speech/batch`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const refused = await batch({ extra_params: { eos_threshold: 1e9 }, items: [{ input: "Hello." }] });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as any).error.param).toBe("extra_params.eos_threshold");
    const mixed = (await (await batch({ max_new_tokens: 2, items: [{ input: "Hello." }, { input: "Hello.", extra_params: { eos_threshold: 1e9 } }] })).json()) as any;
    expect(mixed.results[0].status).toBe("success");
    expect(mixed.results[1].error).toContain("extra_params.eos_threshold");

    const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/v1/audio/speech/stream`);
    await socket.opened;
    socket.send({ type: "session.config", extra_params: { eos_threshold: 1e9 } });
    expect(await socket.waitForClose()).toBe(1008);
    expect(socket.json().at(-1)).toMatchObject({ type: "error" });
    expect(socket.json().at(-1).message).toContain("extra_params.eos_threshold");
  });

  test("cloning from ref_audio: audio frames are counted as input audio tokens", async () => {
    const wav = encodeWav(sine(2, 220, 24000), 24000);
    const response = await speak({ seed: 1, ref_audio: `data:audio/wav;base64,${Buffer.from(wav).toString("base64")}`, ref_text: "ignored by this model" });
    expect(response.status).toBe(200);
    expect(response.headers.get("x-input-audio-tokens")).toBe(String(Math.ceil(48000 / 1920)));
  });

  // Each is one "sentence" longer than the 1000-position FlowLM cache, in tokens (a 500, or a reset stream, before).
  for (const [name, input] of Object.entries({ "9×1000": "9".repeat(1000), '"a "×2000': "a ".repeat(2000), "🙂×600": "🙂".repeat(600), "one 4096-char word": "x".repeat(4096) })) {
    test(`text longer than the model's cache (${name}) speaks to the end, whole or streamed`, async () => {
      const whole = await speak({ seed: 6, input });
      expect(whole.status).toBe(200);
      const pcm = new Uint8Array(await whole.arrayBuffer());
      expect(pcm.length).toBeGreaterThan(0);
      expect(pcm.length % (1920 * 2)).toBe(0);
      const events = parseSse(await (await speak({ seed: 6, input, stream: true })).text());
      expect(events.map((event) => event.event).filter((event) => event !== "speech.audio.delta")).toEqual(["speech.audio.done"]);
      const streamed = await speak({ seed: 6, input, stream_format: "audio" });
      expect(new Uint8Array(await streamed.arrayBuffer())).toEqual(pcm);
    });
  }

  test("a client that leaves mid-stream stops generation", async () => {
    const abort = new AbortController();
    const response = await speak({ seed: 2, stream_format: "audio", input: "This is a much longer sentence that takes many frames to finish speaking." }, { signal: abort.signal });
    const reader = response.body!.getReader();
    await reader.read();
    abort.abort();
    // The next request is served promptly: the aborted one no longer holds the sessions.
    const next = await speak({ seed: 2, max_new_tokens: 2 });
    expect(next.status).toBe(200);
  });

  test("an uploaded voice clones; its state is cached per (name, created_at) and replaced on re-upload", async () => {
    const uploadTone = async (frequencyHz: number) => {
      const audio = new File([encodeWav(sine(2, frequencyHz, 24000), 24000) as Uint8Array<ArrayBuffer>], "me.wav", { type: "audio/wav" });
      const { body, contentType } = await multipartBody({ name: "Me", consent: "c", audio_sample: audio });
      expect((await fetch(`${server.url}/v1/audio/voices`, { method: "POST", headers: { "content-type": contentType }, body })).status).toBe(200);
    };
    await uploadTone(200);
    const first = new Uint8Array(await (await speak({ voice: "me", seed: 4, max_new_tokens: 4 })).arrayBuffer());
    const cachedAfterFirst = server.service.cachedVoicePrompts;
    const again = new Uint8Array(await (await speak({ voice: "me", seed: 4, max_new_tokens: 4 })).arrayBuffer());
    expect(again).toEqual(first);
    expect(server.service.cachedVoicePrompts).toBe(cachedAfterFirst);
    await uploadTone(600);
    const replaced = new Uint8Array(await (await speak({ voice: "me", seed: 4, max_new_tokens: 4 })).arrayBuffer());
    expect(replaced).not.toEqual(first);
  });
});

describe("the voice encoder's worker thread", () => {
  test("runs at the lowest priority (nice 19), so an encode takes only the CPU the playing streams leave", () => {
    const { readdirSync, readFileSync } = require("node:fs") as typeof import("node:fs");
    const niceOf = (task: string) => {
      const stat = readFileSync(`/proc/self/task/${task}/stat`, "utf-8");
      return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
    };
    const nices = readdirSync("/proc/self/task").map(niceOf);
    expect(nices).toContain(19);
    // The main thread keeps its priority.
    expect(niceOf(String(process.pid))).toBe(0);
  });

  test("a cloned voice speaks through it, the same bytes for the same seed", async () => {
    const clip = new Float32Array(2 * 24_000).map((_, index) => 0.3 * Math.sin(index / 20));
    const { encodeWav } = await import("../../../src/audio/wav.ts");
    const refAudio = `data:audio/wav;base64,${Buffer.from(encodeWav(clip, 24_000)).toString("base64")}`;
    const first = await speak({ ref_audio: refAudio, seed: 3, max_new_tokens: 4 });
    const second = await speak({ ref_audio: refAudio, seed: 3, max_new_tokens: 4 });
    expect(first.status).toBe(200);
    expect(Buffer.from(await first.arrayBuffer()).equals(Buffer.from(await second.arrayBuffer()))).toBe(true);
  });
});

test("a bundle whose language is neither a catalog name nor a tag speaks English", () => {
  expect(engine.capabilities.languages).toEqual(["en"]);
});
