import { describe, expect, test } from "bun:test";
import { z } from "zod";
import { ApiError } from "../../src/api/errors.ts";
import { EngineFullError } from "../../src/engine/errors.ts";
import { asApiError } from "../../src/speech/errors.ts";
import { wholeAudio, type SpeechDelivery, type SpeechSpec } from "../../src/speech/service.ts";
import { testApp } from "../support/server.ts";
import { ToneModel } from "../support/tone-model.ts";

const FILE: SpeechDelivery = { mode: "file", streamed: false, admit: "now", whenFull: "reject" };
const STREAM: SpeechDelivery = { mode: "audio_stream", streamed: true, admit: "now", whenFull: "reject" };
const signal = () => new AbortController().signal;

function spec(overrides: Partial<SpeechSpec> = {}): SpeechSpec {
  return { text: "Hello there.", voice: { kind: "built-in", name: "low" }, output: { format: "pcm" }, sampling: { params: {} }, ...overrides };
}

describe("SpeechService.start: the protocol-neutral core", () => {
  test("raw pcm with no rate named is the model's own rate, not OpenAI's 24 kHz", async () => {
    const { service } = await testApp(new ToneModel({ sampleRateHz: 16000 }));
    const speech = await service.start(spec(), FILE, signal());
    const bytes = await wholeAudio(speech.audio);
    const end = await speech.done;
    expect(speech.prepared.outputSampleRateHz).toBe(16000);
    expect(end.finishReason).toBe("stop");
    expect(bytes.byteLength / 2 / 16000).toBeCloseTo(end.audioSeconds, 3);
  });

  test("a format with a rate of its own (G.711) takes it by default and refuses any other", async () => {
    const { service } = await testApp(new ToneModel());
    const speech = await service.start(spec({ output: { format: "ulaw" } }), FILE, signal());
    expect(speech.prepared.outputSampleRateHz).toBe(8000);
    await wholeAudio(speech.audio);
    const refused = await service.start(spec({ output: { format: "alaw", rateHz: 16000 } }), FILE, signal()).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ApiError);
    expect((refused as ApiError).param).toBe("sample_rate");
  });

  test("samples delivery gives float chunks at the output rate, as many as the encoded stream would carry", async () => {
    const { service } = await testApp(new ToneModel());
    const samples = await service.start(spec({ output: { format: "mp3", rateHz: 22050 } }), { ...STREAM, audio: "samples" }, signal());
    let count = 0;
    for await (const chunk of samples.audio) {
      expect(chunk).toBeInstanceOf(Float32Array);
      count += chunk.length;
    }
    expect(count / 22050).toBeCloseTo((await samples.done).audioSeconds, 6);
    const pcm = await service.start(spec({ output: { format: "pcm", rateHz: 22050 } }), STREAM, signal());
    expect((await wholeAudio(pcm.audio)).byteLength / 2).toBe(count);
  });

  test("samples delivery with a speed is the time-stretched utterance", async () => {
    const { service } = await testApp(new ToneModel());
    const plain = await service.start(spec(), { ...FILE, audio: "samples" }, signal());
    for await (const _ of plain.audio);
    const faster = await service.start(spec({ speed: 2 }), { ...FILE, audio: "samples" }, signal());
    let count = 0;
    for await (const chunk of faster.audio) count += chunk.length;
    expect(count / 24000).toBeCloseTo((await plain.done).audioSeconds / 2, 1);
  });

  test("the dialect names what the model did not use, in its own words", async () => {
    const { service } = await testApp(new ToneModel({ paramsSchema: z.strictObject({ temperature: z.number().optional() }).strip() as never }));
    const speech = await service.start(spec({ sampling: { params: { temperature: 0.5, mystery: 1 } }, instructions: "whisper", nameIgnored: (unused) => [...unused.params.map((key) => `param:${key}`), ...(unused.instructions ? ["instructions"] : [])] }), FILE, signal());
    await wholeAudio(speech.audio);
    expect(speech.prepared.ignoredFields).toEqual(["param:mystery", "instructions"]);
    expect(speech.prepared.job.extraParams).toEqual({ temperature: 0.5 });
  });

  test("a full engine refuses with the engine's own typed error, which the edge maps to a 429 with Retry-After", async () => {
    const { service } = await testApp(new ToneModel(), { flags: { "max-streams": "1", "max-queue": "0" } });
    const first = await service.start(spec({ text: "A long one. ".repeat(20) }), STREAM, signal());
    const refused = await service.start(spec(), STREAM, signal()).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(EngineFullError);
    expect(refused).not.toBeInstanceOf(ApiError);
    const mapped = asApiError(refused)!;
    expect(mapped.status).toBe(429);
    expect(Number(mapped.headers["Retry-After"])).toBe((refused as EngineFullError).retryAfterSeconds);
    await first.audio.return();
  });
});
