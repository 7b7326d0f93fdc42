import { describe, expect, test } from "bun:test";
import { ApiError } from "../../src/api/errors.ts";
import type { SpeechRequest } from "../../src/api/speech.ts";
import { headerSafeFieldName, OPENAI_PCM_SAMPLE_RATE_HZ } from "../../src/openai/dialect.ts";
import { wholeAudio } from "../../src/speech/service.ts";
import { testApp } from "../support/server.ts";
import { ToneModel } from "../support/tone-model.ts";

const signal = () => new AbortController().signal;
const request = (fields: Partial<SpeechRequest> = {}): SpeechRequest => ({ input: "Hello there.", ...fields });

describe("OpenAI's dialect over the core", () => {
  test("defaults: a file is wav at the model's rate, pcm is OpenAI's 24 kHz, a streamed WebSocket sentence is pcm16 at the model's rate", async () => {
    const { openai } = await testApp(new ToneModel({ sampleRateHz: 16000 }));
    const file = await openai.start(request(), "speech", signal());
    expect([file.prepared.responseFormat, file.prepared.outputSampleRateHz, file.prepared.delivery]).toEqual(["wav", 16000, "file"]);
    await wholeAudio(file.audio);
    const pcm = await openai.start(request({ response_format: "pcm" }), "speech", signal());
    expect(pcm.prepared.outputSampleRateHz).toBe(OPENAI_PCM_SAMPLE_RATE_HZ);
    await wholeAudio(pcm.audio);
    const sentence = await openai.start(request(), "websocket_streamed", signal());
    expect([sentence.prepared.responseFormat, sentence.prepared.outputSampleRateHz, sentence.prepared.delivery, sentence.prepared.streamed]).toEqual(["pcm", 16000, "websocket", true]);
    await wholeAudio(sentence.audio);
  });

  test("stream rules: stream_format picks the delivery; streaming is refused off the speech route; speed cannot stream", async () => {
    const { openai } = await testApp(new ToneModel());
    const sse = await openai.start(request({ stream: true }), "speech", signal());
    expect(sse.prepared.delivery).toBe("sse");
    await sse.audio.return();
    const refusal = (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error as ApiError);
    expect((await refusal(openai.start(request({ stream_format: "audio" }), "batch", signal())))?.param).toBe("stream_format");
    expect((await refusal(openai.start(request({ stream_format: "audio", speed: 2 }), "speech", signal())))?.message).toBe("speed is not supported with streaming; omit speed or stream");
    expect((await refusal(openai.start(request({ speed: 2 }), "websocket_streamed", signal())))?.message).toBe("speed is not supported with stream_audio; omit speed or set stream_audio false");
  });

  test("model names: the served id, OpenAI's, dated snapshots and --model-aliases; anything else a 404", async () => {
    const { openai } = await testApp(new ToneModel(), { flags: { "model-aliases": "house-voice" } });
    for (const model of ["tone-test", "tts-1", "gpt-4o-mini-tts-2031-01-01", "house-voice"]) openai.checkModel(model);
    expect(() => openai.checkModel("whisper-1")).toThrow(ApiError);
  });

  test("ignored fields are named as OpenAI's clients sent them", async () => {
    const { openai } = await testApp(new ToneModel());
    const speech = await openai.start(request({ language: "German", task_type: "Base", instructions: "softly" }), "speech", signal());
    await wholeAudio(speech.audio);
    expect(speech.prepared.ignoredFields).toEqual(["instructions", "language", "task_type"]);
  });

  test("check finds a session config's mistakes before any text, without speaking", async () => {
    const adapter = new ToneModel();
    const { openai } = await testApp(adapter);
    await openai.check({ voice: "high", response_format: "mp3" }, "websocket_whole", signal());
    await expect(openai.check({ voice: "nobody" }, "websocket_whole", signal())).rejects.toBeInstanceOf(ApiError);
    await expect(openai.check({ sample_rate: 12345 }, "websocket_whole", signal())).rejects.toBeInstanceOf(ApiError);
    expect(adapter.jobs).toHaveLength(0);
  });

  test("an extra_params key is header-safe as an ignored field's name", () => {
    expect(headerSafeFieldName("ok_key-1.x~")).toBe("ok_key-1.x~");
    expect(headerSafeFieldName("a,b\nc")).toBe("a%2Cb%0Ac");
    expect(headerSafeFieldName("x".repeat(100))).toBe(`${"x".repeat(64)}...`);
  });
});
