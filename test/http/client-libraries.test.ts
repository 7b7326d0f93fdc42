/**
 * Client libraries people use, run unchanged (but for their base URL) against a real server on loopback, each
 * with the defaults it ships: the AI SDK with its OpenAI and ElevenLabs providers, the legacy `elevenlabs` SDK
 * and LiveKit Agents' OpenAI and ElevenLabs plugins (their HTTP requests; the ElevenLabs plugin's socket is
 * test/elevenlabs/sockets.test.ts's), driven without a room. Each request they send is recorded as it arrived,
 * and the audio they hand back is decoded by ffmpeg.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { experimental_generateSpeech as generateSpeech } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { createElevenLabs } from "@ai-sdk/elevenlabs";
import { ElevenLabsClient as LegacyElevenLabsClient } from "elevenlabs";
import { initializeLogger } from "@livekit/agents";
import { TTS as LiveKitOpenAiTts } from "@livekit/agents-plugin-openai";
import { TTS as LiveKitElevenLabsTts } from "@livekit/agents-plugin-elevenlabs";
import { decodeWithFfmpeg } from "../support/ffmpeg.ts";
import { startTestServer, type TestServer } from "../support/server.ts";
import { dominantFrequencyHz } from "../support/spectrum.ts";
import { ToneModel } from "../support/tone-model.ts";

const API_KEY = "sk-clients";
/** The tone adapter's default voice ("low"): 220 Hz, one 80 ms frame for every two characters. */
const TONE_HZ = 220;
const TEXT = "hello world this is a test"; // 26 characters: 13 frames, 1.04 s
const TEXT_SECONDS = 13 * 0.08;

interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  body: unknown;
}

let server: TestServer;
/** What reached the server, in order: the clients' requests exactly as they sent them. */
let recorded: RecordedRequest[] = [];
/** A loopback proxy in front of the server that records each request, so a test sees the client's own. */
let proxy: ReturnType<typeof Bun.serve>;
let baseUrl: string;
const adapter = new ToneModel();

beforeAll(async () => {
  server = await startTestServer(adapter, { flags: { "api-key": API_KEY } });
  proxy = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (request) => {
      const url = new URL(request.url);
      const text = request.method === "GET" ? "" : await request.text();
      recorded.push({ method: request.method, path: url.pathname, query: Object.fromEntries(url.searchParams), body: text ? JSON.parse(text) : undefined });
      return fetch(`${server.url}${url.pathname}${url.search}`, { method: request.method, headers: request.headers, body: text || undefined });
    },
  });
  baseUrl = `http://127.0.0.1:${proxy.port}`;
});
afterAll(async () => {
  proxy.stop(true);
  await server.stop();
});

function expectTone(samples: Float32Array, rateHz: number, seconds = TEXT_SECONDS): void {
  // From a pipe ffmpeg keeps up to a frame of mp3 encoder padding.
  expect(Math.abs(samples.length / rateHz - seconds)).toBeLessThan(0.06);
  expect(Math.abs(dominantFrequencyHz(samples, rateHz) - TONE_HZ)).toBeLessThan(15);
}

describe("the AI SDK (ai 6) with @ai-sdk/openai", () => {
  test("generateSpeech with openai.speech('tts-1') and its defaults: alloy, mp3, on the served model's default voice", async () => {
    recorded = [];
    const openai = createOpenAI({ baseURL: `${baseUrl}/v1`, apiKey: API_KEY });
    const { audio } = await generateSpeech({ model: openai.speech("tts-1"), text: TEXT });
    expect(recorded).toEqual([{ method: "POST", path: "/v1/audio/speech", query: {}, body: { model: "tts-1", input: TEXT, voice: "alloy", response_format: "mp3" } }]);
    expect(audio.mediaType).toBe("audio/mpeg");
    const decoded = decodeWithFfmpeg(audio.uint8Array);
    expect(decoded.codec).toBe("mp3");
    expectTone(decoded.samples, decoded.sampleRateHz);
  });

  test("its speed is OpenAI's: the audio comes 1/speed as long", async () => {
    const openai = createOpenAI({ baseURL: `${baseUrl}/v1`, apiKey: API_KEY });
    const { audio } = await generateSpeech({ model: openai.speech("tts-1"), text: TEXT, speed: 1.25, outputFormat: "wav" });
    const decoded = decodeWithFfmpeg(audio.uint8Array);
    expect(decoded.codec).toBe("pcm_s16le");
    expectTone(decoded.samples, decoded.sampleRateHz, TEXT_SECONDS / 1.25);
  });
});

describe("the AI SDK (ai 6) with @ai-sdk/elevenlabs", () => {
  // The provider has no base URL option (it always calls https://api.elevenlabs.io): its `fetch` option is the
  // one place to point it elsewhere.
  const elevenlabs = () =>
    createElevenLabs({
      apiKey: API_KEY,
      // Bun's fetch type adds preconnect, which the provider never calls.
      fetch: ((input: RequestInfo | URL, init?: RequestInit) => fetch(String(input).replace("https://api.elevenlabs.io", `${baseUrl}/elevenlabs`), init)) as typeof fetch,
    });

  test("generateSpeech with its defaults: Rachel's voice id, mp3_44100_128; speed as voice_settings.speed", async () => {
    recorded = [];
    const { audio } = await generateSpeech({ model: elevenlabs().speech("eleven_multilingual_v2"), text: TEXT, speed: 1.2 });
    expect(recorded).toEqual([
      {
        method: "POST",
        path: "/elevenlabs/v1/text-to-speech/21m00Tcm4TlvDq8ikWAM",
        query: { output_format: "mp3_44100_128" },
        body: { text: TEXT, model_id: "eleven_multilingual_v2", voice_settings: { speed: 1.2 } },
      },
    ]);
    const decoded = decodeWithFfmpeg(audio.uint8Array);
    expect(decoded.codec).toBe("mp3");
    expect(decoded.sampleRateHz).toBe(44100);
    expectTone(decoded.samples, 44100, TEXT_SECONDS / 1.2);
    expect(adapter.jobs.at(-1)!.voice).toBe("low");
  });

  test("its outputFormat names (pcm, mp3_32) come at the rates their ElevenLabs names say", async () => {
    const pcm = await generateSpeech({ model: elevenlabs().speech("eleven_flash_v2_5"), text: TEXT, outputFormat: "pcm" });
    expectTone(decodeWithFfmpeg(pcm.audio.uint8Array, "s16le", 44100).samples, 44100);
    const mp3 = decodeWithFfmpeg((await generateSpeech({ model: elevenlabs().speech("eleven_flash_v2_5"), text: TEXT, outputFormat: "mp3_32" })).audio.uint8Array);
    expect(mp3.sampleRateHz).toBe(44100);
    expectTone(mp3.samples, 44100);
  });
});

describe("the legacy `elevenlabs` SDK (1.59)", () => {
  const client = () => new LegacyElevenLabsClient({ apiKey: API_KEY, baseUrl: `${baseUrl}/elevenlabs` });
  const bytesOf = async (readable: AsyncIterable<Uint8Array>) => {
    const chunks: Uint8Array[] = [];
    for await (const chunk of readable) chunks.push(chunk);
    return new Uint8Array(Buffer.concat(chunks));
  };

  test("generate() with its default voice: \"Sarah\" looked up by name in the voice list, then spoken by her id", async () => {
    recorded = [];
    const audio = await bytesOf(await client().generate({ text: TEXT, model_id: "eleven_multilingual_v2" }));
    expect(recorded.map(({ method, path, query }) => ({ method, path, query }))).toEqual([
      { method: "GET", path: "/elevenlabs/v1/voices", query: { show_legacy: "true" } },
      { method: "POST", path: "/elevenlabs/v1/text-to-speech/EXAVITQu4vr4xnSDxMaL", query: {} },
    ]);
    const decoded = decodeWithFfmpeg(audio);
    expect(decoded.codec).toBe("mp3");
    expect(decoded.sampleRateHz).toBe(44100);
    expectTone(decoded.samples, 44100);
  });

  test("textToSpeech.convertAsStream with a premade voice id, pcm_16000 and voice_settings.speed", async () => {
    recorded = [];
    const stream = await client().textToSpeech.convertAsStream("pNInz6obpgDQGcFmaJgB", { text: TEXT, model_id: "eleven_turbo_v2_5", output_format: "pcm_16000", voice_settings: { stability: 0.5, similarity_boost: 0.75, speed: 0.8 } });
    const audio = await bytesOf(stream);
    expect(recorded[0]).toMatchObject({ path: "/elevenlabs/v1/text-to-speech/pNInz6obpgDQGcFmaJgB/stream", query: { output_format: "pcm_16000" } });
    expectTone(decodeWithFfmpeg(audio, "s16le", 16000).samples, 16000, TEXT_SECONDS / 0.8);
  });
});

describe("LiveKit Agents' OpenAI plugin (1.9), driven without a room", () => {
  test("TTS.synthesize: one request for pcm, played as 24 kHz frames", async () => {
    initializeLogger({ pretty: false, level: "warn" });
    recorded = [];
    const tts = new LiveKitOpenAiTts({ baseURL: `${baseUrl}/v1`, apiKey: API_KEY });
    const frames: Int16Array[] = [];
    let frameRateHz = 0;
    for await (const event of tts.synthesize(TEXT)) {
      frames.push(event.frame.data);
      frameRateHz = event.frame.sampleRate;
    }
    await tts.close();
    expect(recorded).toEqual([{ method: "POST", path: "/v1/audio/speech", query: {}, body: { input: TEXT, model: "tts-1", voice: "alloy", response_format: "pcm", speed: 1 } }]);
    expect(frameRateHz).toBe(24000);
    const pcm = new Uint8Array(Buffer.concat(frames.map((frame) => new Uint8Array(frame.buffer, frame.byteOffset, frame.byteLength))));
    expectTone(decodeWithFfmpeg(pcm, "s16le", 24000).samples, 24000);
  });
});

describe("LiveKit Agents' ElevenLabs plugin (1.9), driven without a room", () => {
  test("TTS.synthesize (its HTTP path) with its defaults: Will's voice id, pcm_22050, played as 22.05 kHz frames; listVoices lists him", async () => {
    initializeLogger({ pretty: false, level: "warn" });
    recorded = [];
    const tts = new LiveKitElevenLabsTts({ baseURL: `${baseUrl}/elevenlabs/v1`, apiKey: API_KEY });
    const frames: Int16Array[] = [];
    let frameRateHz = 0;
    for await (const event of tts.synthesize(TEXT)) {
      frames.push(event.frame.data);
      frameRateHz = event.frame.sampleRate;
    }
    expect(recorded).toEqual([
      {
        method: "POST",
        path: "/elevenlabs/v1/text-to-speech/bIHbv24MWmeRgasZH58o/stream",
        query: { output_format: "pcm_22050", enable_logging: "true" },
        body: { text: TEXT, model_id: "eleven_turbo_v2_5", apply_text_normalization: "auto" },
      },
    ]);
    expect(frameRateHz).toBe(22050);
    const pcm = new Uint8Array(Buffer.concat(frames.map((frame) => new Uint8Array(frame.buffer, frame.byteOffset, frame.byteLength))));
    expectTone(decodeWithFfmpeg(pcm, "s16le", 22050).samples, 22050);
    expect(await tts.listVoices()).toEqual(expect.arrayContaining([{ id: "bIHbv24MWmeRgasZH58o", name: "Will", category: "premade" }]));
    await tts.close();
  });
});
