/**
 * The requests real clients send (../shared/docs/integrations.md), through a real port on the offline
 * classic model with an API key set and --public-listings (as an operator serving Open WebUI runs it), each
 * asserting what that client needs to work unchanged.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { createClassicModel } from "../../../src/models/classic/model.ts";
import { startTestServer, type TestServer } from "../../support/server.ts";
import { parseSse } from "../../support/sse.ts";
import { decodeWithFfmpeg } from "../../support/ffmpeg.ts";

const KEY = "sk-habits";
let server: TestServer;
beforeAll(async () => {
  server = await startTestServer(await createClassicModel(), { flags: { "api-key": KEY, "public-listings": "true" } });
});
afterAll(async () => {
  await server.stop();
  await server.host.close();
});

const speak = (body: Record<string, unknown>, headers: Record<string, string> = { authorization: `Bearer ${KEY}` }) =>
  fetch(`${server.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

/** Samples and rate of a 16-bit mono WAV. */
function wavInfo(bytes: Uint8Array): { sampleRateHz: number; samples: number } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return { sampleRateHz: view.getUint32(24, true), samples: view.getUint32(40, true) / 2 };
}

describe("Open WebUI (TTS engine openai)", () => {
  test("lists models and voices without credentials, then speaks with an OpenAI voice name and its Bearer key", async () => {
    const models = await fetch(`${server.url}/v1/audio/models`);
    expect(models.status).toBe(200);
    expect(((await models.json()) as { models: { id: string }[] }).models.map((model) => model.id)).toContain("tts-1");
    const voices = await fetch(`${server.url}/v1/audio/voices`);
    expect(voices.status).toBe(200);
    expect(((await voices.json()) as { voices: string[] }).voices.length).toBeGreaterThan(0);

    // It stores the whole body as .mp3 whatever the format; all it needs is audio bytes.
    const response = await speak({ input: "Open WebUI reads this aloud.", voice: "alloy", model: "tts-1" });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^audio\//);
    expect((await response.arrayBuffer()).byteLength).toBeGreaterThan(1000);
  });

  test("without the key, speech is refused with 401 and WWW-Authenticate", async () => {
    const response = await speak({ input: "No key.", voice: "alloy", model: "tts-1" }, {});
    expect(response.status).toBe(401);
    expect(response.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect(((await response.json()) as { error: { code: number } }).error.code).toBe(401);
  });
});

describe("Pipecat OpenAITTSService", () => {
  test("pcm with voice alloy is raw 16-bit pcm at 24 kHz, the rate it assumes", async () => {
    const input = "Pipecat plays this at twenty four kilohertz.";
    const pcm = await speak({ input, voice: "alloy", model: "gpt-4o-mini-tts", response_format: "pcm", instructions: "calm" });
    expect(pcm.status).toBe(200);
    expect(pcm.headers.get("content-type")).toBe("audio/pcm");
    const pcmBytes = (await pcm.arrayBuffer()).byteLength;
    // The same speech as a WAV says its own rate (the model's 16 kHz): pcm holds 1.5× its samples.
    const wav = wavInfo(new Uint8Array(await (await speak({ input, voice: "alloy", model: "gpt-4o-mini-tts", response_format: "wav" })).arrayBuffer()));
    expect(wav.sampleRateHz).toBe(16000);
    expect(Math.abs(pcmBytes / 2 - wav.samples * 1.5)).toBeLessThan(48);
  });
});

describe("LiveKit Agents openai.TTS", () => {
  test("one request per sentence, SSE for other models: speech.audio.delta events carry base64 audio, then done with usage", async () => {
    const response = await speak({ input: "LiveKit sends one sentence.", voice: "alloy", model: "gpt-4o-mini-tts", response_format: "pcm", stream_format: "sse" });
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const events = parseSse(await response.text());
    const deltas = events.filter((event) => event.event === "speech.audio.delta");
    expect(deltas.length).toBeGreaterThan(0);
    for (const delta of deltas) expect(typeof delta.data.audio).toBe("string");
    expect(events.at(-1)!.event).toBe("speech.audio.done");
    expect(events.at(-1)!.data.usage.output_tokens).toBeGreaterThan(0);
  });
});

describe("LiveKit Agents ≥ 1.5 openai.TTS with its defaults (mp3)", () => {
  // As its plugin builds the request: response_format mp3, speed 1, stream_format sse unless tts-1/tts-1-hd,
  // for which it reads the raw body; it decodes the bytes by Content-Type as they arrive.
  test("gpt-4o-mini-tts: SSE deltas of mp3 frames that join into one mp3 ffmpeg decodes", async () => {
    const response = await speak({ input: "LiveKit streams mp3 by default.", voice: "ash", model: "gpt-4o-mini-tts", response_format: "mp3", speed: 1.0, stream_format: "sse" });
    expect(response.status).toBe(200);
    const deltas = parseSse(await response.text()).filter((event) => event.event === "speech.audio.delta");
    expect(deltas.length).toBeGreaterThan(1);
    const mp3 = Buffer.concat(deltas.map((event) => Buffer.from(event.data.audio, "base64")));
    expect(mp3[0]).toBe(0xff);
    const decoded = decodeWithFfmpeg(new Uint8Array(mp3));
    expect(decoded.codec).toBe("mp3");
    expect(decoded.samples.length).toBeGreaterThan(decoded.sampleRateHz * 0.5);
  });

  test("tts-1: the raw mp3 body streams as it is made, audio/mpeg", async () => {
    const response = await speak({ input: "Raw mp3 for tts one.", voice: "alloy", model: "tts-1", response_format: "mp3", speed: 1.0, stream_format: "audio" });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("audio/mpeg");
    const decoded = decodeWithFfmpeg(new Uint8Array(await response.arrayBuffer()));
    expect(decoded.codec).toBe("mp3");
  });
});

describe("a vLLM client's sampling fields and references", () => {
  test("vLLM SamplingParams at the top level are accepted and named in X-Ignored-Fields; a misspelt field is still a 400", async () => {
    const response = await speak({ input: "Sampling fields from vLLM.", voice: "slt", temperature: 0.7, top_p: 0.8, top_k: 20, repetition_penalty: 1.05, min_p: 0, presence_penalty: 0, frequency_penalty: 0 });
    expect(response.status).toBe(200);
    // The offline model reads no sampling values at all.
    expect(response.headers.get("x-ignored-fields")!.split(",").sort()).toEqual(["frequency_penalty", "min_p", "presence_penalty", "repetition_penalty", "temperature", "top_k", "top_p"]);
    await response.arrayBuffer();
    const misspelt = await speak({ input: "Hello.", voise: "slt" });
    expect(misspelt.status).toBe(400);
  });
});

describe("a vLLM-Omni client (pydantic model dump)", () => {
  test("nulls for every unset field, Qwen3 fields and speaker: 200, the chosen voice, usage under vLLM-Omni's names", async () => {
    const body = {
      input: "A client written for vLLM-Omni.",
      model: null,
      voice: null,
      speaker: "slt",
      instructions: null,
      response_format: "wav",
      speed: null,
      stream: false,
      stream_format: null,
      task_type: "CustomVoice",
      language: "Auto",
      x_vector_only_mode: null,
      ref_audio: null,
      ref_text: null,
      max_new_tokens: null,
      seed: null,
    };
    const response = await speak(body);
    expect(response.status).toBe(200);
    const bytes = new Uint8Array(await response.arrayBuffer());
    for (const name of ["INPUT", "OUTPUT", "TOTAL", "INPUT-TEXT", "INPUT-AUDIO"]) {
      expect(response.headers.get(`x-vllm-omni-${name.toLowerCase()}-tokens`)).toBe(response.headers.get(`x-${name.toLowerCase()}-tokens`));
    }
    const asSlt = new Uint8Array(await (await speak({ input: body.input, voice: "slt", response_format: "wav" })).arrayBuffer());
    expect(bytes).toEqual(asSlt);
  });
});

test("the openai npm client's dated model name is served", async () => {
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
  const file = await client.audio.speech.create({ model: "gpt-4o-mini-tts-2025-12-15", voice: "coral", input: "A dated snapshot.", response_format: "wav" });
  expect(file.headers.get("content-type")).toBe("audio/wav");
  expect((await file.arrayBuffer()).byteLength).toBeGreaterThan(1000);
  const streamed = await client.audio.speech.create({ model: "gpt-4o-mini-tts", voice: "coral", input: "Streamed opus.", response_format: "opus", stream_format: "audio" });
  expect(decodeWithFfmpeg(new Uint8Array(await streamed.arrayBuffer())).codec).toBe("opus");
});

test("the openai npm client with a key: a file and an SSE stream", async () => {
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
  const file = await client.audio.speech.create({ model: "tts-1", voice: "nova", input: "From the SDK.", response_format: "mp3" });
  expect(file.headers.get("content-type")).toBe("audio/mpeg");
  expect((await file.arrayBuffer()).byteLength).toBeGreaterThan(500);
  const sse = await client.audio.speech.create({ model: "tts-1", voice: "nova", input: "From the SDK.", stream_format: "sse" });
  expect(parseSse(await sse.text()).at(-1)!.event).toBe("speech.audio.done");
});

test("a sampling value that would disable EOS is a 400 naming it, even on the offline model that reads no extra_params", async () => {
  const single = await speak({ input: "Hello.", extra_params: { eos_threshold: 1e9 } });
  expect(single.status).toBe(400);
  expect(((await single.json()) as { error: { param: string } }).error.param).toBe("extra_params.eos_threshold");
  const batch = await fetch(`${server.url}/v1/audio/speech/batch`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ extra_params: { eos_threshold: 1e9 }, items: [{ input: "One." }, { input: "Two." }] }),
  });
  expect(batch.status).toBe(400);
  // A key no model reads is ignored and named, not refused.
  const ignored = await speak({ input: "Hello.", extra_params: { top_k: 5, eos_threshold: -4 } });
  expect(ignored.status).toBe(200);
  expect(ignored.headers.get("x-ignored-fields")).toBe("extra_params.top_k,extra_params.eos_threshold");
  await ignored.arrayBuffer();
});
