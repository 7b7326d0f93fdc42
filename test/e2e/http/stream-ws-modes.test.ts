/**
 * vLLM-Omni's newer WebSocket clients (token_level_streaming_client.py, sentence_commit_streaming_client.py):
 * session.config.streaming_mode, input.commit → input.committed, and stream_audio in every response format,
 * a wav sentence opening with its 44-byte header.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ToneModel } from "../../support/tone-model.ts";
import { startTestServer, type TestServer } from "../../support/server.ts";
import { isJson, RecordingSocket, type Received } from "../../support/ws-client.ts";
import { decodeWithFfmpeg } from "../../support/ffmpeg.ts";
import { concatBytes } from "../../../src/lib/concat.ts";

const wsUrl = (server: TestServer) => `${server.url.replace("http", "ws")}/v1/audio/speech/stream`;

/** Each sentence's binary messages, in order, keyed by sentence_index of its audio.start. */
function sentenceAudio(received: Received[]): { start: any; bytes: Uint8Array }[] {
  const sentences: { start: any; parts: Uint8Array[] }[] = [];
  for (const entry of received) {
    if (entry.kind === "json" && entry.value.type === "audio.start") sentences.push({ start: entry.value, parts: [] });
    else if (entry.kind === "binary") sentences.at(-1)!.parts.push(entry.bytes);
  }
  return sentences.map(({ start, parts }) => ({ start, bytes: concatBytes(parts) }));
}

async function speakSession(server: TestServer, config: Record<string, unknown>, messages: unknown[]): Promise<RecordingSocket> {
  const socket = new RecordingSocket(wsUrl(server));
  await socket.opened;
  socket.send({ type: "session.config", ...config });
  for (const message of messages) socket.send(message);
  socket.send({ type: "input.done" });
  await socket.waitFor((received) => received.some(isJson("session.done")));
  return socket;
}

describe("streaming modes", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(new ToneModel());
  });
  afterAll(() => server.stop());

  const paragraph = "The first sentence is short. The second one follows it. A third ends it.";
  const asTokens = (text: string) => text.split(/(?<= )/).map((token) => ({ type: "input.text", text: token }));

  test("token_level: text a token at a time is cut into the same sentences as the default mode", async () => {
    const sentenceMode = await speakSession(server, { stream_audio: true, response_format: "pcm" }, asTokens(paragraph));
    const tokenMode = await speakSession(server, { stream_audio: true, response_format: "pcm", streaming_mode: "token_level" }, asTokens(paragraph));
    const texts = (socket: RecordingSocket) => socket.json().filter((message) => message.type === "audio.start").map((message) => message.sentence_text);
    expect(texts(tokenMode)).toEqual(texts(sentenceMode));
    expect(texts(tokenMode)).toHaveLength(3);
    expect(tokenMode.json().filter((message) => message.type === "error")).toEqual([]);
    for (const socket of [sentenceMode, tokenMode]) socket.close();
  });

  test("sentence_commit: text waits for input.commit, which speaks it as one sentence and is answered with input.committed", async () => {
    const socket = new RecordingSocket(wsUrl(server));
    await socket.opened;
    socket.send({ type: "session.config", stream_audio: true, response_format: "pcm", streaming_mode: "sentence_commit" });
    // Punctuation does not cut a sentence here: the client decides where sentences end.
    for (const token of ["Dear listener. ", "This is ", "one sentence"]) socket.send({ type: "input.text", text: token });
    await Bun.sleep(150);
    expect(socket.json().filter((message) => message.type === "audio.start")).toEqual([]);
    socket.send({ type: "input.commit", commit_id: "c-1" });
    socket.send({ type: "input.text", text: "And a second" });
    socket.send({ type: "input.commit", commit_id: 2 });
    socket.send({ type: "input.commit", commit_id: "empty" });
    socket.send({ type: "input.done" });
    await socket.waitFor((received) => received.some(isJson("session.done")));
    const committed = socket.json().filter((message) => message.type === "input.committed");
    expect(committed).toEqual([
      { type: "input.committed", commit_id: "c-1", sentence_index: 0, utterance_index: 0 },
      { type: "input.committed", commit_id: 2, sentence_index: 1, utterance_index: 0 },
      { type: "input.committed", commit_id: "empty", sentence_index: null, utterance_index: 0 },
    ]);
    const spoken = socket.json().filter((message) => message.type === "audio.start").map((message) => message.sentence_text);
    expect(spoken).toEqual(["Dear listener. This is one sentence", "And a second"]);
    expect(socket.json().filter((message) => message.type === "audio.done").every((message) => message.error === false)).toBe(true);
    socket.close();
  });

  test("input.done speaks what is left uncommitted; input.commit outside sentence_commit is a non-fatal error", async () => {
    const commitSession = await speakSession(server, { stream_audio: true, response_format: "pcm", streaming_mode: "sentence_commit" }, [{ type: "input.text", text: "left over" }]);
    expect(commitSession.json().filter((message) => message.type === "audio.start").map((message) => message.sentence_text)).toEqual(["left over"]);
    commitSession.close();

    const plain = await speakSession(server, { stream_audio: true, response_format: "pcm" }, [{ type: "input.text", text: "Hello. " }, { type: "input.commit", commit_id: "x" }]);
    const errors = plain.json().filter((message) => message.type === "error");
    expect(errors).toHaveLength(1);
    expect(errors[0].message).toContain("sentence_commit");
    expect(plain.json().some((message) => message.type === "session.done")).toBe(true);
    plain.close();
  });

  test("an unknown streaming_mode is refused at config: error, close 1008", async () => {
    const socket = new RecordingSocket(wsUrl(server));
    await socket.opened;
    socket.send({ type: "session.config", streaming_mode: "word" });
    expect(await socket.waitForClose()).toBe(1008);
    expect(socket.json().at(-1).message).toContain("streaming_mode");
  });
});

describe("stream_audio in every format", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(new ToneModel());
  });
  afterAll(() => server.stop());

  test("wav: audio.start says wav, and each sentence's bytes open with a 44-byte WAV header and decode on their own", async () => {
    const socket = await speakSession(server, { stream_audio: true, response_format: "wav" }, [{ type: "input.text", text: "One sentence here. And another one. " }]);
    const sentences = sentenceAudio(socket.received);
    expect(sentences).toHaveLength(2);
    for (const { start, bytes } of sentences) {
      expect(start.format).toBe("wav");
      expect(new TextDecoder().decode(bytes.subarray(0, 4))).toBe("RIFF");
      expect(new TextDecoder().decode(bytes.subarray(36, 40))).toBe("data");
      const decoded = decodeWithFfmpeg(bytes);
      expect(decoded.sampleRateHz).toBe(start.sample_rate);
      expect(decoded.samples.length).toBe((bytes.byteLength - 44) / 2);
    }
    socket.close();
  });

  for (const format of ["mp3", "opus", "flac", "aac"] as const) {
    test(`${format}: each sentence's bytes are one playable ${format} stream`, async () => {
      const socket = await speakSession(server, { stream_audio: true, response_format: format }, [{ type: "input.text", text: "A sentence to stream. " }]);
      const [sentence] = sentenceAudio(socket.received);
      expect(sentence!.start.format).toBe(format);
      const decoded = decodeWithFfmpeg(sentence!.bytes);
      expect(decoded.samples.length).toBeGreaterThan(decoded.sampleRateHz * 0.5);
      const done = socket.json().find((message) => message.type === "audio.done");
      expect(done).toMatchObject({ error: false, total_bytes: sentence!.bytes.byteLength });
      socket.close();
    });
  }
});
