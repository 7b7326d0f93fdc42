import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ToneModel } from "../support/tone-model.ts";
import { startTestServer, testApp, type TestServer } from "../support/server.ts";
import { decodeWithFfmpeg } from "../support/ffmpeg.ts";
import { dominantFrequencyHz } from "../support/spectrum.ts";
import { parseSse } from "../support/sse.ts";

const TEXT = "hello world this is a test"; // 26 characters → 13 frames of 80 ms with the tone adapter
const FRAMES = 13;
const SECONDS = FRAMES * 0.08;

function post(url: string, body: unknown, init: RequestInit = {}) {
  return fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), ...init });
}

async function bytesOf(response: Response): Promise<Uint8Array> {
  return new Uint8Array(await response.arrayBuffer());
}

function int16ToFloat(bytes: Uint8Array): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(bytes.byteLength / 2);
  for (let i = 0; i < out.length; i++) out[i] = view.getInt16(i * 2, true) / 32768;
  return out;
}

describe("POST /v1/audio/speech on a real port", () => {
  let server: TestServer;
  const adapter = new ToneModel();
  beforeAll(async () => {
    server = await startTestServer(adapter);
  });
  afterAll(() => server.stop());
  const speech = () => `${server.url}/v1/audio/speech`;

  // One codec frame of slack (encoder padding is trimmed by ffmpeg where the container records it; from a
  // pipe ffmpeg cannot seek to mp3's Info tag, so up to a frame of padding stays). ADTS cannot declare
  // the AAC encoder's 1024 priming samples, so they are part of the expected aac length.
  const toleranceSeconds: Record<string, number> = { wav: 0, flac: 0, mp3: 1152 / 24000, aac: 1024 / 24000, opus: 0.02 };
  const primingSeconds: Record<string, number> = { aac: 1024 / 24000 };
  for (const format of ["wav", "flac", "mp3", "opus", "aac"] as const) {
    test(`${format} decodes independently to the expected duration and rate`, async () => {
      const response = await post(speech(), { input: TEXT, response_format: format, seed: 1 });
      expect(response.status).toBe(200);
      expect(response.headers.get("x-output-tokens")).toBe(String(FRAMES));
      const decoded = decodeWithFfmpeg(await bytesOf(response));
      // Ogg Opus always decodes at 48 kHz; the other codecs keep the source rate.
      expect(decoded.sampleRateHz).toBe(format === "opus" ? 48000 : 24000);
      const seconds = decoded.samples.length / decoded.sampleRateHz;
      expect(Math.abs(seconds - SECONDS - (primingSeconds[format] ?? 0))).toBeLessThanOrEqual(toleranceSeconds[format]! + 1e-9);
      expect(Math.abs(dominantFrequencyHz(decoded.samples, decoded.sampleRateHz) - 220)).toBeLessThan(15);
    });
  }

  for (const [format, demuxer, contentType] of [["ulaw", "mulaw", "audio/basic"], ["alaw", "alaw", "audio/x-alaw-basic"]] as const) {
    test(`${format} is raw G.711 at 8 kHz, one byte a sample, whole or streamed`, async () => {
      const file = await post(speech(), { input: TEXT, response_format: format, seed: 1 });
      expect(file.status).toBe(200);
      expect(file.headers.get("content-type")).toBe(contentType);
      const bytes = await bytesOf(file);
      expect(bytes.length).toBe(Math.round(SECONDS * 8000));
      const decoded = decodeWithFfmpeg(bytes, demuxer, 8000);
      expect(decoded.sampleRateHz).toBe(8000);
      expect(Math.abs(dominantFrequencyHz(decoded.samples, 8000) - 220)).toBeLessThan(15);
      const streamed = await post(speech(), { input: TEXT, response_format: format, seed: 1, stream_format: "audio" });
      expect(await bytesOf(streamed)).toEqual(bytes);
      const wrongRate = await post(speech(), { input: TEXT, response_format: format, sample_rate: 16000 });
      expect(wrongRate.status).toBe(400);
      expect(((await wrongRate.json()) as { error: { param: string } }).error.param).toBe("sample_rate");
    });
  }

  test("wav headers parse and pcm length matches", async () => {
    const wav = await bytesOf(await post(speech(), { input: TEXT, seed: 3 }));
    const view = new DataView(wav.buffer, wav.byteOffset);
    expect(new TextDecoder().decode(wav.slice(0, 4))).toBe("RIFF");
    expect(view.getUint32(24, true)).toBe(24000);
    expect(view.getUint16(22, true)).toBe(1);
    expect(view.getUint16(34, true)).toBe(16);
    expect(view.getUint32(40, true)).toBe(wav.length - 44);
    const pcmResponse = await post(speech(), { input: TEXT, seed: 3, response_format: "pcm" });
    expect(pcmResponse.headers.get("content-type")).toBe("audio/pcm");
    const pcm = await bytesOf(pcmResponse);
    expect(pcm.length).toBe(FRAMES * 1920 * 2);
    expect(pcm).toEqual(wav.slice(44));
  });

  test("raw wav stream: placeholder sizes, then the same pcm as the file", async () => {
    const response = await post(speech(), { input: TEXT, seed: 5, stream_format: "audio", response_format: "wav" });
    expect(response.headers.get("content-type")).toBe("audio/wav");
    const streamed = await bytesOf(response);
    const view = new DataView(streamed.buffer, streamed.byteOffset);
    expect(view.getUint32(4, true)).toBe(0xffffffff);
    expect(view.getUint32(40, true)).toBe(0xffffffff);
    const file = await bytesOf(await post(speech(), { input: TEXT, seed: 5, response_format: "pcm" }));
    expect(streamed.slice(44)).toEqual(file);
    const rawPcm = await bytesOf(await post(speech(), { input: TEXT, seed: 5, stream_format: "audio", response_format: "pcm" }));
    expect(rawPcm).toEqual(file);
  });

  test("SSE deltas concatenate to the non-streaming audio; done carries usage", async () => {
    const response = await post(speech(), { input: TEXT, seed: 9, stream: true });
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    const events = parseSse(await response.text());
    const deltas = events.filter((event) => event.event === "speech.audio.delta");
    expect(deltas.length).toBeGreaterThan(1);
    // wav, the default: the joined deltas are the streaming WAV header, then the pcm of the file.
    expect(deltas.every((event) => event.data.type === "speech.audio.delta" && event.data.response_format === "wav")).toBe(true);
    const joined = Buffer.concat(deltas.map((event) => Buffer.from(event.data.audio, "base64")));
    const file = await bytesOf(await post(speech(), { input: TEXT, seed: 9, response_format: "pcm" }));
    expect(new Uint8Array(joined.subarray(44))).toEqual(file);
    const done = events.at(-1)!;
    expect(done.event).toBe("speech.audio.done");
    expect(done.data.usage).toEqual({ input_tokens: 6, output_tokens: FRAMES, total_tokens: 6 + FRAMES, input_token_details: { text_tokens: 6, audio_tokens: 0 } });
  });

  test("same seed → identical audio, another seed → different audio", async () => {
    const first = await bytesOf(await post(speech(), { input: TEXT, seed: 42, response_format: "pcm" }));
    const again = await bytesOf(await post(speech(), { input: TEXT, seed: 42, response_format: "pcm" }));
    const other = await bytesOf(await post(speech(), { input: TEXT, seed: 43, response_format: "pcm" }));
    expect(again).toEqual(first);
    expect(other).not.toEqual(first);
  });

  test("sample_rate resamples, speed 2 halves the duration and keeps the pitch", async () => {
    const at16k = decodeWithFfmpeg(await bytesOf(await post(speech(), { input: TEXT, sample_rate: 16000 })));
    expect(at16k.sampleRateHz).toBe(16000);
    expect(Math.abs(at16k.samples.length - SECONDS * 16000)).toBeLessThanOrEqual(1);
    expect(Math.abs(dominantFrequencyHz(at16k.samples, 16000) - 220)).toBeLessThan(15);

    const fast = decodeWithFfmpeg(await bytesOf(await post(speech(), { input: TEXT, speed: 2 })));
    expect(Math.abs(fast.samples.length / 24000 - SECONDS / 2)).toBeLessThan(SECONDS * 0.03);
    expect(Math.abs(dominantFrequencyHz(fast.samples, 24000) - 220)).toBeLessThan(15);
  });

  test("extra_params, seed, voice and max_new_tokens reach the adapter", async () => {
    const response = await post(speech(), { input: TEXT, voice: { id: "HIGH" }, seed: 7, max_new_tokens: 4, extra_params: { temperature: 0.5 }, response_format: "pcm" });
    expect(response.status).toBe(200);
    const job = adapter.jobs.at(-1)!;
    expect(job.voice).toBe("high");
    expect(job.seed).toBe(7n);
    expect(job.extraParams).toEqual({ temperature: 0.5 });
    expect((await bytesOf(response)).length).toBe(4 * 1920 * 2);
  });
});

test("a generation whose end never comes stops at 10 s plus 1 s per input character", async () => {
  // 100 frames per character stands for a model whose end-of-speech never fires: "hi" would run 16 s.
  const adapter = new ToneModel({ framesPerChar: 100 });
  const { app } = await testApp(adapter);
  const response = await app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "hi", response_format: "pcm" }) });
  const capFrames = Math.ceil(12.5 * (10 + 2));
  expect(adapter.jobs[0]!.maxNewTokens).toBe(capFrames);
  expect((await bytesOf(response)).length).toBe(capFrames * 1920 * 2);
  expect(response.headers.get("x-output-tokens")).toBe(String(capFrames));
});

describe("disconnects and failures", () => {
  test("a client that leaves mid-stream stops generation within a frame or two", async () => {
    const adapter = new ToneModel({ frameDelayMs: 20, framesPerChar: 4 });
    const server = await startTestServer(adapter);
    try {
      for (const body of [{ stream_format: "audio", response_format: "pcm" }, { stream: true }]) {
        adapter.framesProduced = 0;
        const abort = new AbortController();
        const response = await post(`${server.url}/v1/audio/speech`, { input: "a long sentence that would take a while to speak", ...body }, { signal: abort.signal });
        const reader = response.body!.getReader();
        for (let i = 0; i < 3; i++) await reader.read();
        abort.abort();
        await new Promise((resolve) => setTimeout(resolve, 150));
        const atAbort = adapter.framesProduced;
        await new Promise((resolve) => setTimeout(resolve, 400));
        expect(atAbort).toBeLessThan(20);
        // Nothing more is produced once the abort has propagated (the whole text would be ~190 frames).
        expect(adapter.framesProduced - atAbort).toBeLessThanOrEqual(1);
      }
    } finally {
      await server.stop();
    }
  });

  test("a failure after audio was sent is an SSE error event with partial_audio and action", async () => {
    const { app } = await testApp(new ToneModel({ failAfterFrames: 2 }));
    const response = await app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: TEXT, stream: true }) });
    const events = parseSse(await response.text());
    expect(events.filter((event) => event.event === "speech.audio.delta").length).toBe(2);
    const last = events.at(-1)!;
    expect(last.event).toBe("speech.audio.error");
    expect(last.data.error).toMatchObject({ type: "server_error", code: 500, partial_audio: true, action: "discard" });
  });

  test("a failure before any audio is an SSE error without partial_audio; non-streaming is a 500 without a stack", async () => {
    const { app } = await testApp(new ToneModel({ failAfterFrames: 0 }));
    const sse = parseSse(await (await app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: TEXT, stream: true }) })).text());
    expect(sse.at(-1)!.event).toBe("speech.audio.error");
    expect(sse.at(-1)!.data.error.partial_audio).toBeUndefined();
    const file = await app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: TEXT }) });
    expect(file.status).toBe(500);
    const body = await file.json();
    expect(body.error).toEqual({ message: "Internal server error", type: "server_error", param: null, code: 500 });
  });
});
