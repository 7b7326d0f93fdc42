/**
 * ElevenLabs' API under /elevenlabs, called by its official SDK (@elevenlabs/elevenlabs-js, which validates
 * every response against its types) against a real server on loopback: text-to-speech in every form, the
 * output formats decoded by ffmpeg, voices, cloning, models, errors in ElevenLabs' shape, and xi-api-key.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ElevenLabsClient } from "@elevenlabs/elevenlabs-js";
import { refusal } from "../support/elevenlabs-sdk.ts";
import { startTestServer, type TestServer } from "../support/server.ts";
import { ToneModel } from "../support/tone-model.ts";
import { decodeWithFfmpeg } from "../support/ffmpeg.ts";
import { dominantFrequencyHz } from "../support/spectrum.ts";
import { wavFile } from "../support/uploads.ts";
import { createClassicModel } from "../../src/models/classic/model.ts";
import { ELEVENLABS_PREMADE_VOICES } from "../../src/api/voice-aliases.ts";

/** The tone adapter makes one 80 ms frame for every two characters, at 220 Hz. */
const FRAME_SECONDS = 0.08;
const TONE_HZ = 220;
const TEXT = "hello world this is a test"; // 26 characters: 13 frames, 1.04 s
const TEXT_SECONDS = 13 * FRAME_SECONDS;
const API_KEY = "sk-eleven";

async function bytesOf(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

function clientFor(server: TestServer, apiKey = API_KEY): ElevenLabsClient {
  return new ElevenLabsClient({ apiKey, baseUrl: `${server.url}/elevenlabs`, maxRetries: 0 });
}

describe("text-to-speech through the SDK", () => {
  let server: TestServer;
  let client: ElevenLabsClient;
  beforeAll(async () => {
    server = await startTestServer(new ToneModel(), { flags: { "api-key": API_KEY } });
    client = clientFor(server);
  });
  afterAll(() => server.stop());

  test("convert: mp3_44100_128 by default, decoded at 44.1 kHz to the tone and its length", async () => {
    const mp3 = await bytesOf(await client.textToSpeech.convert("low", { text: TEXT, modelId: "eleven_flash_v2_5", seed: 7 }));
    const decoded = decodeWithFfmpeg(mp3);
    expect(decoded.codec).toBe("mp3");
    expect(decoded.sampleRateHz).toBe(44100);
    // From a pipe ffmpeg keeps up to a frame of encoder padding (test/http/speech.test.ts says why).
    expect(Math.abs(decoded.samples.length / 44100 - TEXT_SECONDS)).toBeLessThan(1152 / 44100 + 1e-9);
    expect(Math.abs(dominantFrequencyHz(decoded.samples, 44100) - TONE_HZ)).toBeLessThan(15);
  });

  test.each([
    { outputFormat: "pcm_16000", demuxer: "s16le", rateHz: 16000, bytesPerSample: 2 },
    { outputFormat: "pcm_44100", demuxer: "s16le", rateHz: 44100, bytesPerSample: 2 },
    { outputFormat: "ulaw_8000", demuxer: "mulaw", rateHz: 8000, bytesPerSample: 1 },
    { outputFormat: "alaw_8000", demuxer: "alaw", rateHz: 8000, bytesPerSample: 1 },
  ] as const)("convert $outputFormat: raw audio whose length is the duration at the rate", async ({ outputFormat, demuxer, rateHz, bytesPerSample }) => {
    const audio = await bytesOf(await client.textToSpeech.convert("low", { text: TEXT, outputFormat }));
    expect(audio.length).toBe(Math.round(TEXT_SECONDS * rateHz) * bytesPerSample);
    const decoded = decodeWithFfmpeg(audio, demuxer, rateHz);
    expect(Math.abs(dominantFrequencyHz(decoded.samples, rateHz) - TONE_HZ)).toBeLessThan(15);
  });

  test.each([
    { outputFormat: "mp3_22050_32", codec: "mp3", rateHz: 22050, kbps: 32 },
    { outputFormat: "mp3_44100_192", codec: "mp3", rateHz: 44100, kbps: 192 },
    { outputFormat: "opus_48000_64", codec: "opus", rateHz: 48000, kbps: 64 },
    { outputFormat: "wav_24000", codec: "pcm_s16le", rateHz: 24000, kbps: undefined },
  ] as const)("convert $outputFormat: $codec at $rateHz Hz", async ({ outputFormat, codec, rateHz, kbps }) => {
    const audio = await bytesOf(await client.textToSpeech.convert("high", { text: TEXT, outputFormat }));
    const decoded = decodeWithFfmpeg(audio);
    expect(decoded.codec).toBe(codec);
    expect(decoded.sampleRateHz).toBe(rateHz);
    if (kbps !== undefined && codec === "mp3") expect(Math.abs((audio.length * 8) / TEXT_SECONDS / 1000 - kbps) / kbps).toBeLessThan(0.15);
  });

  test("stream: the same audio as convert, in several chunks", async () => {
    const whole = await bytesOf(await client.textToSpeech.convert("low", { text: TEXT, outputFormat: "pcm_24000", seed: 3 }));
    const chunks: Uint8Array[] = [];
    for await (const chunk of await client.textToSpeech.stream("low", { text: TEXT, outputFormat: "pcm_24000", seed: 3 })) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(1);
    expect(Buffer.concat(chunks).equals(whole)).toBe(true);
    const mp3 = await bytesOf(await client.textToSpeech.stream("low", { text: TEXT }));
    expect(decodeWithFfmpeg(mp3).sampleRateHz).toBe(44100);
  });

  const TWO_SENTENCES = "Hello there. How are you today?";

  test("convertWithTimestamps: normalized_alignment is over the text as spoken, on the same sentence times", async () => {
    const text = "**It** costs $5. See [the docs](https://example.com).";
    const result = await client.textToSpeech.convertWithTimestamps("low", { text, outputFormat: "pcm_24000", seed: 1 });
    const alignment = result.alignment!;
    const normalized = result.normalizedAlignment!;
    expect(alignment.characters.join("")).toBe(text);
    expect(normalized.characters.join("")).toBe("It costs five dollars. See the docs.");
    // Each sentence spans the same stretch of audio in both.
    expect(normalized.characterEndTimesSeconds.at(-1)).toBe(alignment.characterEndTimesSeconds.at(-1)!);
    const firstSentenceEnd = (characters: string[], ends: number[]) => ends[characters.indexOf(".")]!;
    expect(firstSentenceEnd(normalized.characters, normalized.characterEndTimesSeconds)).toBeCloseTo(firstSentenceEnd(alignment.characters, alignment.characterEndTimesSeconds), 5);
  });

  test("convertWithTimestamps: every character aligned, sentence boundaries where each sentence's audio ends", async () => {
    const result = await client.textToSpeech.convertWithTimestamps("low", { text: TWO_SENTENCES, outputFormat: "pcm_24000", seed: 1 });
    const audio = Buffer.from(result.audioBase64, "base64");
    const alignment = result.alignment!;
    expect(alignment.characters.join("")).toBe(TWO_SENTENCES);
    expect(result.normalizedAlignment).toEqual(alignment);
    const starts = alignment.characterStartTimesSeconds;
    const ends = alignment.characterEndTimesSeconds;
    for (let i = 0; i < starts.length; i++) {
      expect(ends[i]!).toBeGreaterThanOrEqual(starts[i]!);
      if (i > 0) expect(starts[i]!).toBeCloseTo(ends[i - 1]!, 5);
    }
    // Each sentence alone: "Hello there." is 12 characters, 6 frames; the whole text's audio is both.
    const firstSeconds = Math.round(12 * 0.5) * FRAME_SECONDS;
    const secondSeconds = Math.round(18 * 0.5) * FRAME_SECONDS;
    expect(audio.length / 2 / 24000).toBeCloseTo(firstSeconds + secondSeconds, 6);
    expect(ends["Hello there.".length - 1]!).toBeCloseTo(firstSeconds, 5);
    expect(starts[TWO_SENTENCES.indexOf("How")]!).toBeCloseTo(firstSeconds, 5);
    expect(ends.at(-1)!).toBeCloseTo(firstSeconds + secondSeconds, 5);
  });

  test("streamWithTimestamps: chunks whose audio and alignments join to convertWithTimestamps'", async () => {
    const whole = await client.textToSpeech.convertWithTimestamps("low", { text: TWO_SENTENCES, outputFormat: "pcm_24000", seed: 1 });
    const audio: Buffer[] = [];
    const characters: string[] = [];
    const starts: number[] = [];
    let chunks = 0;
    for await (const chunk of await client.textToSpeech.streamWithTimestamps("low", { text: TWO_SENTENCES, outputFormat: "pcm_24000", seed: 1 })) {
      chunks++;
      audio.push(Buffer.from(chunk.audioBase64, "base64"));
      characters.push(...(chunk.alignment?.characters ?? []));
      starts.push(...(chunk.alignment?.characterStartTimesSeconds ?? []));
    }
    expect(chunks).toBeGreaterThan(2);
    expect(Buffer.concat(audio).equals(Buffer.from(whole.audioBase64, "base64"))).toBe(true);
    expect(characters.join("")).toBe(TWO_SENTENCES);
    expect(starts).toEqual(whole.alignment!.characterStartTimesSeconds);
  });

  test("streamWithTimestamps in mp3: the joined chunks are one mp3 stream", async () => {
    const audio: Buffer[] = [];
    for await (const chunk of await client.textToSpeech.streamWithTimestamps("high", { text: TWO_SENTENCES, outputFormat: "mp3_22050_32" })) audio.push(Buffer.from(chunk.audioBase64, "base64"));
    const decoded = decodeWithFfmpeg(new Uint8Array(Buffer.concat(audio)));
    expect(decoded.sampleRateHz).toBe(22050);
    expect(decoded.samples.length / 22050).toBeGreaterThan(1.2);
  });

  test("ElevenLabs' other body fields are accepted, and the ignored ones named", async () => {
    const { rawResponse } = await client.textToSpeech
      .convert("low", {
        text: TEXT,
        outputFormat: "pcm_16000",
        voiceSettings: { stability: 0.5, similarityBoost: 0.75, style: 0, useSpeakerBoost: true, speed: 1 },
        previousText: "Before.",
        nextText: "After.",
        languageCode: "en",
        applyTextNormalization: "auto",
      })
      .withRawResponse();
    const ignored = rawResponse.headers.get("x-ignored-fields")?.split(",");
    expect(ignored).toEqual(expect.arrayContaining(["voice_settings.stability", "voice_settings.similarity_boost", "voice_settings.style", "voice_settings.use_speaker_boost", "previous_text", "next_text", "language_code"]));
    expect(ignored).not.toContain("apply_text_normalization");
    expect(ignored).not.toContain("voice_settings.speed");
  });

  /** Seconds of pcm_24000 audio. */
  const pcmSeconds = (audio: Uint8Array) => audio.length / 2 / 24000;

  test.each([
    { speed: 1.2, route: "convert" },
    { speed: 0.7, route: "convert" },
    { speed: 0.8, route: "stream" },
  ] as const)("voice_settings.speed $speed is applied ($route): the audio is 1/speed as long, the tone's pitch kept", async ({ speed, route }) => {
    const request = { text: TEXT, outputFormat: "pcm_24000", voiceSettings: { speed, stability: 0.5 } } as const;
    const { data, rawResponse } = await (route === "convert" ? client.textToSpeech.convert("low", request) : client.textToSpeech.stream("low", request)).withRawResponse();
    const audio = await bytesOf(data);
    // Sonic keeps whole pitch periods, so the length is within a few periods of length / speed.
    expect(Math.abs(pcmSeconds(audio) - TEXT_SECONDS / speed)).toBeLessThan(0.03);
    const decoded = decodeWithFfmpeg(audio, "s16le", 24000);
    expect(Math.abs(dominantFrequencyHz(decoded.samples, 24000) - TONE_HZ)).toBeLessThan(15);
    expect(rawResponse.headers.get("x-ignored-fields")?.split(",")).toEqual(["voice_settings.stability"]);
  });

  test("with timestamps, voice_settings.speed is applied sentence by sentence, and the alignment follows the changed audio", async () => {
    const speed = 1.2;
    const natural = await client.textToSpeech.convertWithTimestamps("low", { text: TWO_SENTENCES, outputFormat: "pcm_24000" });
    const { data, rawResponse } = await client.textToSpeech.convertWithTimestamps("low", { text: TWO_SENTENCES, outputFormat: "pcm_24000", voiceSettings: { speed } }).withRawResponse();
    const seconds = pcmSeconds(Buffer.from(data.audioBase64, "base64"));
    expect(Math.abs(seconds - pcmSeconds(Buffer.from(natural.audioBase64, "base64")) / speed)).toBeLessThan(0.05);
    expect(data.alignment!.characterEndTimesSeconds.at(-1)!).toBeCloseTo(seconds, 5);
    const secondStarts = (alignment: typeof data.alignment) => alignment!.characterStartTimesSeconds[TWO_SENTENCES.indexOf("How")]!;
    expect(Math.abs(secondStarts(data.alignment) - secondStarts(natural.alignment) / speed)).toBeLessThan(0.03);
    expect(rawResponse.headers.get("x-ignored-fields")).toBeNull();

    const streamed: Buffer[] = [];
    for await (const chunk of await client.textToSpeech.streamWithTimestamps("low", { text: TWO_SENTENCES, outputFormat: "pcm_24000", voiceSettings: { speed } })) streamed.push(Buffer.from(chunk.audioBase64, "base64"));
    expect(Buffer.concat(streamed).equals(Buffer.from(data.audioBase64, "base64"))).toBe(true);
  });

  test("apply_text_normalization is ours: the model reads (and usage counts) the written forms as said, unless it is off", async () => {
    const inputTokens = async (text: string, applyTextNormalization: "on" | "off") => {
      const { rawResponse } = await client.textToSpeech.convert("low", { text, outputFormat: "pcm_16000", applyTextNormalization }).withRawResponse();
      return Number(rawResponse.headers.get("x-input-tokens"));
    };
    const written = "It costs $19.99 on 03/04/2026.";
    expect(await inputTokens(written, "on")).toBeGreaterThan(await inputTokens(written, "off"));
    expect(await inputTokens("Plain words only.", "on")).toBe(await inputTokens("Plain words only.", "off"));
  });
});

describe("voices and models through the SDK", () => {
  let server: TestServer;
  let client: ElevenLabsClient;
  beforeAll(async () => {
    server = await startTestServer(new ToneModel({ cloning: true }));
    client = clientFor(server);
  });
  afterAll(() => server.stop());

  test("getAll and get list the built-in voices as premade, then ElevenLabs' premade voices as aliases of the default voice", async () => {
    const { voices } = await client.voices.getAll();
    expect(voices.slice(0, 2).map((voice) => [voice.voiceId, voice.category])).toEqual([
      ["low", "premade"],
      ["high", "premade"],
    ]);
    expect(voices.slice(2).map((voice) => [voice.voiceId, voice.name])).toEqual(ELEVENLABS_PREMADE_VOICES.map(({ voiceId, name }) => [voiceId, name]));
    expect((await client.voices.get("HIGH")).name).toBe("high");
    expect(await client.voices.get("21m00Tcm4TlvDq8ikWAM")).toMatchObject({ voiceId: "21m00Tcm4TlvDq8ikWAM", name: "Rachel", category: "premade", labels: { speaks_with: "default" }, description: expect.stringContaining("default voice") });
    const missing = await refusal(() => client.voices.get("0000000000000000000x"));
    expect(missing.statusCode).toBe(404);
    expect(missing.body).toEqual({ detail: { status: "voice_not_found", message: expect.stringContaining("0000000000000000000x") } });
  });

  test("ivc.create clones a voice that speaks, lists as cloned, and deletes", async () => {
    const created = await client.voices.ivc.create({ name: "Narrator", files: [wavFile(3, 330)], description: "calm", labels: { consent: "rec-42" } });
    expect(created).toEqual({ voiceId: "Narrator", requiresVerification: false });
    const voice = await client.voices.get(created.voiceId);
    expect(voice).toMatchObject({ voiceId: "Narrator", name: "Narrator", category: "cloned", description: "calm" });
    const audio = await bytesOf(await client.textToSpeech.convert(created.voiceId, { text: TEXT, outputFormat: "pcm_24000" }));
    expect(audio.length).toBe(Math.round(TEXT_SECONDS * 24000) * 2);

    const total = 3 + ELEVENLABS_PREMADE_VOICES.length;
    const page = await client.voices.search({ pageSize: 2 });
    expect(page).toMatchObject({ hasMore: true, totalCount: total, nextPageToken: "2" });
    expect(page.voices.map((entry) => entry.voiceId)).toEqual(["Narrator", "low"]);
    const next = await client.voices.search({ pageSize: 2, nextPageToken: page.nextPageToken! });
    expect(next).toMatchObject({ hasMore: true, totalCount: total });
    expect(next.voices.map((entry) => entry.voiceId)).toEqual(["high", ELEVENLABS_PREMADE_VOICES[0]!.voiceId]);
    const last = await client.voices.search({ pageSize: 2, nextPageToken: String(total - 1) });
    expect(last).toMatchObject({ hasMore: false, totalCount: total, nextPageToken: undefined });
    expect(last.voices.map((entry) => entry.voiceId)).toEqual([ELEVENLABS_PREMADE_VOICES.at(-1)!.voiceId]);
    expect((await client.voices.search({ voiceType: "personal" })).voices.map((entry) => entry.voiceId)).toEqual(["Narrator"]);
    expect((await client.voices.search({ search: "hig" })).voices.map((entry) => entry.voiceId)).toEqual(["high"]);

    expect(await client.voices.delete("narrator")).toEqual({ status: "ok" });
    expect((await refusal(() => client.voices.get("Narrator"))).statusCode).toBe(404);
    expect((await refusal(() => client.voices.delete("Narrator"))).statusCode).toBe(404);
    expect((await refusal(() => client.voices.delete("low"))).body.detail.status).toBe("voice_not_deletable");
  });

  test("ivc.create without a consent id is refused, as the upload route refuses it; without files, 422", async () => {
    const refused = await refusal(() => client.voices.ivc.create({ name: "Nobody", files: [wavFile()] }));
    expect(refused.statusCode).toBe(400);
    expect(refused.body.detail.message).toContain("consent");
    const noFiles = await refusal(() => client.voices.ivc.create({ name: "Nobody", files: [], labels: { consent: "rec-1" } }));
    expect(noFiles.statusCode).toBe(422);
    expect(noFiles.body.detail).toEqual({ status: "validation_error", message: expect.stringContaining("files") });
  });

  test("models.list: the ElevenLabs model ids, each speaking English", async () => {
    const models = await client.models.list();
    const ids = models.map((model) => model.modelId);
    expect(ids).toEqual(expect.arrayContaining(["tone-test", "eleven_multilingual_v2", "eleven_flash_v2_5", "eleven_turbo_v2_5"]));
    for (const model of models) {
      expect(model.canDoTextToSpeech).toBe(true);
      expect(model.languages).toEqual([{ languageId: "en", name: "English" }]);
    }
  });
});

describe("ElevenLabs' premade voices and --voice-aliases", () => {
  const adapter = new ToneModel({ cloning: true });
  let server: TestServer;
  let client: ElevenLabsClient;
  beforeAll(async () => {
    server = await startTestServer(adapter, { flags: { "voice-aliases": "Rachel=HIGH,bIHbv24MWmeRgasZH58o=high,Narrator=high" } });
    client = clientFor(server);
  });
  afterAll(() => server.stop());

  /** The built-in voice the request for `voiceId` spoke with. */
  const spokenWith = async (voiceId: string) => {
    await bytesOf(await client.textToSpeech.convert(voiceId, { text: "Hi.", outputFormat: "pcm_16000" }));
    return adapter.jobs.at(-1)!.voice;
  };

  test("the voices clients send by default speak: the model's default voice, or the voice --voice-aliases gives the id or the name", async () => {
    // Mastra's Aria, the legacy SDK's Sarah (by name, and her id), OpenAI's names; unmapped, the default voice.
    for (const voiceId of ["9BWtsMINqrJLrRacOk9x", "Sarah", "EXAVITQu4vr4xnSDxMaL", "cjVigY5qzO86Huf0OWal", "alloy"]) expect(await spokenWith(voiceId)).toBe("low");
    // The AI SDK's Rachel, mapped by name; LiveKit's Will, mapped by id; an alias of our own.
    for (const voiceId of ["21m00Tcm4TlvDq8ikWAM", "rachel", "bIHbv24MWmeRgasZH58o", "Will", "narrator"]) expect(await spokenWith(voiceId)).toBe("high");
    expect((await refusal(() => client.textToSpeech.convert("0000000000000000000x", { text: "Hi." }))).statusCode).toBe(404);
  });

  test("the list says what each alias speaks with; an alias is not deletable; an upload under a premade id shadows it", async () => {
    const listed = new Map((await client.voices.getAll()).voices.map((voice) => [voice.voiceId, voice]));
    expect(listed.get("21m00Tcm4TlvDq8ikWAM")).toMatchObject({ name: "Rachel", labels: { speaks_with: "high" } });
    expect(listed.get("9BWtsMINqrJLrRacOk9x")).toMatchObject({ name: "Aria", labels: { speaks_with: "default" } });
    expect(listed.get("narrator")).toMatchObject({ name: "narrator", category: "premade", labels: { speaks_with: "high" } });
    expect(listed.has("alloy")).toBe(false);
    expect((await refusal(() => client.voices.delete("21m00Tcm4TlvDq8ikWAM"))).body.detail.status).toBe("voice_not_deletable");

    await client.voices.ivc.create({ name: "EXAVITQu4vr4xnSDxMaL", files: [wavFile(2, 330)], labels: { consent: "rec-7" } });
    try {
      const sarah = (await client.voices.getAll()).voices.filter((voice) => voice.voiceId.toLowerCase() === "exavitqu4vr4xnsdxmal");
      expect(sarah.map((voice) => voice.category)).toEqual(["cloned"]);
      await bytesOf(await client.textToSpeech.convert("EXAVITQu4vr4xnSDxMaL", { text: "Hi.", outputFormat: "pcm_16000" }));
      expect(adapter.jobs.at(-1)!.voicePrompt).toBeDefined();
    } finally {
      await client.voices.delete("EXAVITQu4vr4xnSDxMaL");
    }
  });
});

describe("a model that cannot clone", () => {
  test("ivc.create is refused with a clear reason", async () => {
    const server = await startTestServer(new ToneModel());
    try {
      const refused = await refusal(() => clientFor(server).voices.ivc.create({ name: "Narrator", files: [wavFile()], labels: { consent: "rec-1" } }));
      expect(refused.statusCode).toBe(400);
      expect(refused.body.detail).toEqual({ status: "voice_cloning_unavailable", message: expect.stringContaining("cannot clone") });
    } finally {
      await server.stop();
    }
  });
});

describe("errors in ElevenLabs' shape", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(new ToneModel(), { flags: { "api-key": API_KEY } });
  });
  afterAll(() => server.stop());

  const post = (path: string, body: unknown, headers: Record<string, string> = { "xi-api-key": API_KEY }) =>
    fetch(`${server.url}/elevenlabs${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

  test.each([
    { name: "unknown output_format", path: "/v1/text-to-speech/low?output_format=mp3_44100_999", body: { text: "Hi." }, status: 400, reason: "invalid_output_format", mentions: "mp3_44100_999" },
    { name: "missing text", path: "/v1/text-to-speech/low", body: {}, status: 422, reason: "validation_error", mentions: "text" },
    { name: "a voice setting out of range", path: "/v1/text-to-speech/low/stream", body: { text: "Hi.", voice_settings: { stability: 2 } }, status: 422, reason: "validation_error", mentions: "voice_settings.stability" },
    { name: "unknown voice", path: "/v1/text-to-speech/nobody/with-timestamps", body: { text: "Hi." }, status: 404, reason: "voice_not_found", mentions: "nobody" },
    { name: "unknown model", path: "/v1/text-to-speech/low", body: { text: "Hi.", model_id: "eleven_nonexistent" }, status: 400, reason: "model_not_found", mentions: "eleven_nonexistent" },
    { name: "no such route", path: "/v1/sound-generation", body: {}, status: 404, reason: "not_found", mentions: "sound-generation" },
  ])("$name → $status $reason", async ({ path, body, status, reason, mentions }) => {
    const response = await post(path, body);
    expect(response.status).toBe(status);
    const error = (await response.json()) as { detail: { status: string; message: string } };
    expect(error).toEqual({ detail: { status: reason, message: expect.any(String) } });
    expect(error.detail.message).toContain(mentions);
  });

  test("xi-api-key: missing or wrong is 401 in ElevenLabs' shape, the right one passes (SDK and plain HTTP)", async () => {
    for (const headers of [{}, { "xi-api-key": "sk-wrong" }] as Record<string, string>[]) {
      const response = await post("/v1/text-to-speech/low", { text: "Hi." }, headers);
      expect(response.status).toBe(401);
      expect(await response.json()).toEqual({ detail: { status: "invalid_api_key", message: expect.any(String) } });
    }
    expect((await post("/v1/text-to-speech/low?output_format=pcm_16000", { text: "Hi." })).status).toBe(200);
    const refused = await refusal(() => clientFor(server, "sk-wrong").models.list());
    expect(refused.statusCode).toBe(401);
    expect((await clientFor(server).models.list()).length).toBeGreaterThan(1);
  });
});

describe("long text", () => {
  test("past 4096 characters with-timestamps must be streamed, as a file must on the speech route", async () => {
    const server = await startTestServer(new ToneModel(), { flags: { "max-input-chars": "6000" } });
    try {
      const refused = await refusal(() => clientFor(server).textToSpeech.convertWithTimestamps("low", { text: "word ".repeat(1000) }));
      expect(refused.statusCode).toBe(400);
      expect(refused.body.detail.message).toContain("stream/with-timestamps");
    } finally {
      await server.stop();
    }
  });
});

describe("with the offline engine (Flite)", () => {
  let server: TestServer;
  let client: ElevenLabsClient;
  beforeAll(async () => {
    server = await startTestServer(await createClassicModel());
    client = clientFor(server);
  });
  afterAll(() => server.stop());

  test("ulaw_8000 speech that ffmpeg decodes as μ-law at 8 kHz", async () => {
    const voice = (await client.voices.getAll()).voices[0]!.voiceId;
    const ulaw = await bytesOf(await client.textToSpeech.convert(voice, { text: "The offline engine speaks on the phone.", outputFormat: "ulaw_8000" }));
    const decoded = decodeWithFfmpeg(ulaw, "mulaw", 8000);
    expect(decoded.sampleRateHz).toBe(8000);
    expect(decoded.samples.length).toBe(ulaw.length);
    expect(decoded.samples.length / 8000).toBeGreaterThan(1);
  });

  test("timestamps: two sentences, the second starting where the first one's audio ends", async () => {
    const voice = (await client.voices.getAll()).voices[0]!.voiceId;
    const text = "First sentence here. And the second one.";
    const result = await client.textToSpeech.convertWithTimestamps(voice, { text, outputFormat: "pcm_16000" });
    const audioSeconds = Buffer.from(result.audioBase64, "base64").length / 2 / 16000;
    const alignment = result.alignment!;
    expect(alignment.characters.join("")).toBe(text);
    const firstEnd = alignment.characterEndTimesSeconds[text.indexOf(".")]!;
    expect(firstEnd).toBeGreaterThan(0.3);
    expect(alignment.characterStartTimesSeconds[text.indexOf("And")]!).toBeCloseTo(firstEnd, 5);
    expect(alignment.characterEndTimesSeconds.at(-1)!).toBeCloseTo(audioSeconds, 5);
  });
});
