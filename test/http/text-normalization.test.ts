/**
 * apply_text_normalization on every route: the model reads the normalized text and usage counts it, the
 * WebSocket's sentence_text keeps what the client sent, a written form split across input.text messages is
 * normalized whole, an invalid value is refused before any audio, and text without written forms gives the
 * same bytes either way. Inputs are money, dates, times and years, which the rules cover.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ToneModel } from "../support/tone-model.ts";
import { startTestServer, type TestServer } from "../support/server.ts";
import { isJson, RecordingSocket } from "../support/ws-client.ts";
import { parseSse } from "../support/sse.ts";
import { createClassicModel } from "../../src/models/classic/model.ts";
import { normalizeText } from "../../src/text/normalize/index.ts";

const WRITTEN = "It costs $19.99 on 03/04/2026 at 10:30 pm.";
const SPOKEN = normalizeText(WRITTEN, { language: "en" });
/** The tone adapter counts whitespace-separated words as tokens. */
const wordCount = (text: string) => text.split(/\s+/).filter(Boolean).length;
const DIGIT = /\d/;

function post(url: string, body: unknown) {
  return fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

test("the rules rewrite the test input, so every check below can tell normalized from not", () => {
  expect(SPOKEN).not.toMatch(DIGIT);
  expect(wordCount(SPOKEN)).toBeGreaterThan(wordCount(WRITTEN));
});

describe("POST /v1/audio/speech", () => {
  let server: TestServer;
  const adapter = new ToneModel();
  beforeAll(async () => {
    server = await startTestServer(adapter);
  });
  afterAll(() => server.stop());
  const speech = () => `${server.url}/v1/audio/speech`;

  for (const [mode, expected] of [[undefined, SPOKEN], ["auto", SPOKEN], ["on", SPOKEN], ["off", WRITTEN]] as const) {
    test(`a file with apply_text_normalization ${mode ?? "absent"}: the model reads ${expected === SPOKEN ? "the normalized text" : "the text as sent"}, and usage counts it`, async () => {
      const response = await post(speech(), { input: WRITTEN, seed: 1, apply_text_normalization: mode });
      expect(response.status).toBe(200);
      await response.arrayBuffer();
      expect(adapter.jobs.at(-1)!.text).toBe(expected);
      expect(response.headers.get("x-input-text-tokens")).toBe(String(wordCount(expected)));
    });
  }

  test("a raw audio stream: the model reads the normalized text", async () => {
    const response = await post(speech(), { input: WRITTEN, stream_format: "audio", response_format: "pcm", apply_text_normalization: "on" });
    expect(response.status).toBe(200);
    await response.arrayBuffer();
    expect(adapter.jobs.at(-1)!.text).toBe(SPOKEN);
  });

  test("SSE: the model reads the normalized text, and speech.audio.done's usage counts it", async () => {
    const response = await post(speech(), { input: WRITTEN, stream_format: "sse", apply_text_normalization: "on" });
    expect(response.status).toBe(200);
    const done = parseSse(await response.text()).at(-1)!;
    expect(done.event).toBe("speech.audio.done");
    expect(done.data.usage.input_token_details.text_tokens).toBe(wordCount(SPOKEN));
    expect(adapter.jobs.at(-1)!.text).toBe(SPOKEN);
  });

  for (const delivery of [{}, { stream_format: "audio" }, { stream_format: "sse" }]) {
    test(`an invalid value is a 400 naming the field, before any audio (${delivery.stream_format ?? "file"})`, async () => {
      const jobsBefore = adapter.jobs.length;
      const response = await post(speech(), { input: WRITTEN, ...delivery, apply_text_normalization: "yes" });
      expect(response.status).toBe(400);
      const { error } = (await response.json()) as { error: { message: string; param: string } };
      expect(error.param).toBe("apply_text_normalization");
      expect(error.message).toContain("auto, on, off");
      expect(adapter.jobs.length).toBe(jobsBefore);
    });
  }

  test("/openapi.json lists the field and its values", async () => {
    const document = (await (await fetch(`${server.url}/openapi.json`)).json()) as any;
    const text = JSON.stringify(document);
    const schema = document.paths["/v1/audio/speech"].post.requestBody.content["application/json"].schema;
    const resolved = schema.$ref ? document.components.schemas[schema.$ref.split("/").at(-1)] : schema;
    // null is accepted too, as "not set", like every optional field.
    expect(resolved.properties.apply_text_normalization.enum).toEqual(["auto", "on", "off", null]);
    // The speech request, the batch (defaults and items) and session.config.
    expect(text.match(/apply_text_normalization/g)!.length).toBeGreaterThanOrEqual(4);
  });
});

describe("POST /v1/audio/speech/batch", () => {
  let server: TestServer;
  const adapter = new ToneModel();
  beforeAll(async () => {
    server = await startTestServer(adapter);
  });
  afterAll(() => server.stop());
  const batch = () => `${server.url}/v1/audio/speech/batch`;

  test("the batch default applies, an item's own value wins, and each item's usage counts what its model read", async () => {
    const response = await post(batch(), { apply_text_normalization: "off", items: [{ input: WRITTEN }, { input: WRITTEN, apply_text_normalization: "on" }] });
    expect(response.status).toBe(200);
    const body = (await response.json()) as any;
    expect(body.results.map((result: any) => result.status)).toEqual(["success", "success"]);
    expect(adapter.jobs.slice(-2).map((job) => job.text)).toEqual([WRITTEN, SPOKEN]);
    expect(body.results.map((result: any) => result.usage.input_token_details.text_tokens)).toEqual([wordCount(WRITTEN), wordCount(SPOKEN)]);
  });

  test("an invalid batch default is a 400 naming the field", async () => {
    const response = await post(batch(), { apply_text_normalization: "always", items: [{ input: WRITTEN }] });
    expect(response.status).toBe(400);
    const { error } = (await response.json()) as { error: { param: string } };
    expect(error.param).toBe("apply_text_normalization");
  });

  test("an invalid item value fails that item alone, naming the field", async () => {
    const response = await post(batch(), { items: [{ input: WRITTEN, apply_text_normalization: true }, { input: WRITTEN }] });
    expect(response.status).toBe(200);
    const [invalid, valid] = ((await response.json()) as any).results;
    expect(invalid.status).toBe("error");
    expect(invalid.error).toContain("apply_text_normalization");
    expect(valid.status).toBe("success");
  });
});

describe("WebSocket /v1/audio/speech/stream", () => {
  let server: TestServer;
  const adapter = new ToneModel();
  beforeAll(async () => {
    server = await startTestServer(adapter);
  });
  afterAll(() => server.stop());
  const wsUrl = () => `${server.url.replace("http", "ws")}/v1/audio/speech/stream`;

  /** Sends `pieces` as input.text messages, then input.done; returns the audio.start events and the texts the model read. */
  async function speakInPieces(config: Record<string, unknown>, pieces: readonly string[]) {
    const jobsBefore = adapter.jobs.length;
    const socket = new RecordingSocket(wsUrl());
    await socket.opened;
    socket.send({ type: "session.config", response_format: "pcm", ...config });
    for (const text of pieces) socket.send({ type: "input.text", text });
    socket.send({ type: "input.done" });
    await socket.waitFor((received) => received.some(isJson("session.done")));
    socket.close();
    const starts = socket.json().filter((event) => event.type === "audio.start");
    const doneEvents = socket.json().filter((event) => event.type === "audio.done");
    expect(doneEvents.every((event) => event.error === false)).toBe(true);
    return { sentenceTexts: starts.map((event) => event.sentence_text), modelTexts: adapter.jobs.slice(jobsBefore).map((job) => job.text) };
  }

  test("session.config's value applies: the model reads the normalized text, sentence_text keeps what the client sent", async () => {
    const on = await speakInPieces({ apply_text_normalization: "on" }, [WRITTEN]);
    expect(on).toEqual({ sentenceTexts: [WRITTEN], modelTexts: [SPOKEN] });
    const off = await speakInPieces({ apply_text_normalization: "off" }, [WRITTEN]);
    expect(off).toEqual({ sentenceTexts: [WRITTEN], modelTexts: [WRITTEN] });
  });

  const splits: ReadonlyArray<{ granularity: string; pieces: string[]; sentences: string[] }> = [
    { granularity: "clause", pieces: ["The total is $1,2", "34.50 today, ", "which we paid on time. "], sentences: ["The total is $1,234.50 today,", "which we paid on time."] },
    { granularity: "sentence", pieces: ["It was $19.", "99 today. ", "Thanks."], sentences: ["It was $19.99 today.", "Thanks."] },
    { granularity: "clause", pieces: ["We all met on May 5, ", "2026 at noon, ", "then we ate. "], sentences: ["We all met on May 5, 2026 at noon,", "then we ate."] },
    { granularity: "sentence", pieces: ["We met on 03/04/", "2026 ", "at 10:", "30 pm. ", "It rained."], sentences: ["We met on 03/04/2026 at 10:30 pm.", "It rained."] },
  ];
  for (const { granularity, pieces, sentences } of splits) {
    test(`a written form split across input.text messages is normalized once complete (${JSON.stringify(pieces)})`, async () => {
      const { sentenceTexts, modelTexts } = await speakInPieces({ apply_text_normalization: "on", split_granularity: granularity }, pieces);
      expect(sentenceTexts).toEqual(sentences);
      expect(modelTexts).toEqual(sentences.map((sentence) => normalizeText(sentence, { language: "en" })));
      for (const text of modelTexts) expect(text).not.toMatch(DIGIT);
    });
  }

  test("an invalid value in session.config is refused with an error naming the field, and the session closes before any audio", async () => {
    const socket = new RecordingSocket(wsUrl());
    await socket.opened;
    socket.send({ type: "session.config", apply_text_normalization: "sometimes" });
    socket.send({ type: "input.text", text: WRITTEN });
    await socket.closedPromise;
    expect(socket.closeCode).toBe(1008);
    expect(socket.json()[0].type).toBe("error");
    expect(socket.json()[0].message).toContain("apply_text_normalization");
    expect(socket.received.some((entry) => entry.kind === "binary" || (entry.kind === "json" && entry.value.type === "audio.start"))).toBe(false);
  });
});

describe("text without written forms: the same bytes and usage with normalization on and off", () => {
  const PLAIN = "The quick brown fox jumps over the lazy dog, and then it rests.";
  for (const [engine, load, voice] of [
    ["the neural test model", async () => new ToneModel(), "low"],
    ["the offline engine", createClassicModel, "rms"],
  ] as const) {
    test(engine, async () => {
      const server = await startTestServer(await load());
      try {
        const speak = async (mode: string) => {
          const response = await post(`${server.url}/v1/audio/speech`, { input: PLAIN, voice, seed: 42, response_format: "wav", apply_text_normalization: mode });
          expect(response.status).toBe(200);
          const usage = ["x-input-tokens", "x-input-text-tokens", "x-output-tokens"].map((header) => response.headers.get(header));
          return { audio: new Uint8Array(await response.arrayBuffer()), usage };
        };
        const on = await speak("on");
        const off = await speak("off");
        expect(on.audio.byteLength).toBeGreaterThan(44);
        expect(on.audio).toEqual(off.audio);
        expect(on.usage).toEqual(off.usage);
      } finally {
        await server.stop();
      }
    });
  }
});
