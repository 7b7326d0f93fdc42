/**
 * ElevenLabs' WebSockets under /elevenlabs, replaying the message sequences clients send: stream-input (an
 * init message, words as they come, `{"text": ""}`), Pipecat's multi-stream-input (a context per turn, flush,
 * keepalives, close_context on interruption, close_socket) and LiveKit's ElevenLabs plugin 1.9 (a context per
 * reply, each sentence flushed, an empty flush and close_context at once), that plugin also driven itself.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { initializeLogger } from "@livekit/agents";
import { TTS as LiveKitElevenLabsTTS } from "@livekit/agents-plugin-elevenlabs";
import { ERRONEOUS_MESSAGE_BURST } from "../../src/speech/stream-rules.ts";
import { MAX_CONTEXT_ID_CHARS } from "../../src/elevenlabs/sockets.ts";
import { createClassicModel } from "../../src/models/classic/model.ts";
import { assertAsrAvailable, transcribe } from "../support/asr.ts";
import { decodeWithFfmpeg } from "../support/ffmpeg.ts";
import { INTELLIGIBILITY_SENTENCES } from "../support/test-sentences.ts";
import { wordErrorRate } from "../support/wer.ts";
import { startTestServer, type TestServer } from "../support/server.ts";
import { ToneModel } from "../support/tone-model.ts";
import { RecordingSocket } from "../support/ws-client.ts";

const API_KEY = "sk-eleven";
/** The tone adapter: one 80 ms frame for every two characters. */
const secondsOf = (text: string) => Math.round(text.length * 0.5) * 0.08;

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer(new ToneModel({ frameDelayMs: 5 }), { flags: { "api-key": API_KEY } });
});
afterAll(() => server.stop());

const socketUrl = (route: string) => `${server.url.replace("http", "ws")}/elevenlabs/v1/text-to-speech/${route}`;

function audioMessages(socket: RecordingSocket, contextId?: string): any[] {
  return socket.json().filter((message) => typeof message.audio === "string" && (contextId === undefined || message.contextId === contextId));
}

function audioBytes(messages: any[]): number {
  return messages.reduce((sum, message) => sum + Buffer.from(message.audio, "base64").length, 0);
}

function joinedAudio(messages: any[]): Uint8Array {
  return Buffer.concat(messages.map((message) => Buffer.from(message.audio, "base64")));
}

/** Root mean square of a stretch of samples. */
function rms(samples: Float32Array): number {
  return Math.sqrt(samples.reduce((sum, sample) => sum + sample * sample, 0) / Math.max(1, samples.length));
}

/**
 * Checks raw pcm16 audio through ffmpeg: it lasts as long as the sentences (the tone model's length for them)
 * and the last sentence's stretch is the tone (RMS ~0.35), not silence.
 */
function expectEverySentenceHeard(pcm: Uint8Array, sampleRateHz: number, sentences: string[]): void {
  expect(pcm.byteLength).toBeGreaterThan(0);
  const decoded = decodeWithFfmpeg(pcm, "s16le", sampleRateHz);
  expect(decoded.sampleRateHz).toBe(sampleRateHz);
  const expectedSeconds = sentences.reduce((sum, sentence) => sum + secondsOf(sentence), 0);
  expect(Math.abs(decoded.samples.length / sampleRateHz - expectedSeconds)).toBeLessThan(0.01);
  const lastSentenceSamples = Math.round(secondsOf(sentences.at(-1)!) * sampleRateHz);
  expect(rms(decoded.samples.subarray(decoded.samples.length - lastSentenceSamples))).toBeGreaterThan(0.2);
}

test("stream-input as LiveKit's plugin spoke it before multi-stream-input: init, words, end; pcm audio with alignment, then isFinal and a normal close", async () => {
  const socket = new RecordingSocket(socketUrl("low/stream-input?model_id=eleven_turbo_v2_5&output_format=pcm_24000&optimize_streaming_latency=3"), { "xi-api-key": API_KEY });
  await socket.opened;
  socket.send({ text: " ", try_trigger_generation: true, voice_settings: { stability: 0.71, similarity_boost: 0.5, style: 0, use_speaker_boost: true }, generation_config: { chunk_length_schedule: [120, 160, 250, 290] } });
  for (const word of ["Hello", "there.", "How", "are", "you?"]) socket.send({ text: `${word} `, try_trigger_generation: false });
  socket.send({ text: "" });
  await socket.closedPromise;

  expect(socket.closeCode).toBe(1000);
  const messages = socket.json();
  expect(messages.at(-1)).toEqual({ isFinal: true });
  const audio = audioMessages(socket);
  expect(audio.length).toBeGreaterThan(2);
  for (const message of audio) expect(message.isFinal).toBe(false);
  expect(audioBytes(audio)).toBe(Math.round((secondsOf("Hello there.") + secondsOf("How are you?")) * 24000) * 2);

  const alignments = audio.map((message) => message.alignment).filter(Boolean);
  expect(alignments.map((alignment) => alignment.chars.join(""))).toEqual(["Hello there. ", "How are you? "]);
  for (const alignment of alignments) {
    expect(alignment.charStartTimesMs.length).toBe(alignment.chars.length);
    expect(alignment.charStartTimesMs[0]).toBe(0);
    // A sentence's alignment spans its audio: the last character ends where the sentence's audio does.
    const lastSpoken = alignment.chars.length - 2;
    expect(alignment.charStartTimesMs[lastSpoken] + alignment.charDurationsMs[lastSpoken]).toBe(Math.round(secondsOf("Hello there.") * 1000));
  }
  expect(audio.map((message) => message.normalizedAlignment)).toEqual(audio.map((message) => message.alignment));
});

test("stream-input in ulaw_8000 with the key in the query: one byte a sample at 8 kHz", async () => {
  const socket = new RecordingSocket(socketUrl(`high/stream-input?output_format=ulaw_8000&xi_api_key=${API_KEY}`));
  await socket.opened;
  socket.send({ text: " " });
  socket.send({ text: "Hello there.", flush: true });
  await socket.waitFor(() => audioMessages(socket).some((message) => message.alignment));
  socket.send({ text: "" });
  await socket.closedPromise;
  expect(audioBytes(audioMessages(socket))).toBe(Math.round(secondsOf("Hello there.") * 8000));
});

describe("multi-stream-input as Pipecat speaks it", () => {
  test("a context per turn: init, text, flush, keepalive, close_context → isFinal; an interrupted context stops; close_socket", async () => {
    const socket = new RecordingSocket(socketUrl("low/multi-stream-input?model_id=eleven_flash_v2_5&output_format=pcm_16000&auto_mode=true"), { "xi-api-key": API_KEY });
    await socket.opened;
    const voiceSettings = { stability: 0.5, similarity_boost: 0.75, speed: 1 };

    socket.send({ text: " ", context_id: "turn-1", voice_settings: voiceSettings });
    socket.send({ text: "Hello there. ", context_id: "turn-1" });
    socket.send({ text: "How are you?", context_id: "turn-1" });
    socket.send({ context_id: "turn-1", flush: true });
    socket.send({ text: "", context_id: "turn-1" });
    await socket.waitFor(() => audioMessages(socket, "turn-1").filter((message) => message.alignment).length === 2);
    socket.send({ context_id: "turn-1", close_context: true });
    await socket.waitFor(() => socket.json().some((message) => message.isFinal === true && message.contextId === "turn-1"));
    expect(audioBytes(audioMessages(socket, "turn-1"))).toBe(Math.round((secondsOf("Hello there.") + secondsOf("How are you?")) * 16000) * 2);

    // The user interrupts turn 2 after its first audio, before the turn's flush: close_context stops it at once.
    socket.send({ text: " ", context_id: "turn-2", voice_settings: voiceSettings });
    socket.send({ text: "This turn has a long first sentence that the user will not wait for at all. And more.", context_id: "turn-2" });
    await socket.waitFor(() => audioMessages(socket, "turn-2").length > 0);
    socket.send({ context_id: "turn-2", close_context: true });
    await socket.waitFor(() => socket.json().some((message) => message.isFinal === true && message.contextId === "turn-2"));
    const finalAt = socket.json().findIndex((message) => message.isFinal === true && message.contextId === "turn-2");
    await Bun.sleep(300);
    expect(socket.json().slice(finalAt + 1).filter((message) => message.contextId === "turn-2")).toEqual([]);
    const longSentence = "This turn has a long first sentence that the user will not wait for at all.";
    expect(audioBytes(audioMessages(socket, "turn-2"))).toBeLessThan(Math.round(secondsOf(longSentence) * 16000) * 2);

    socket.send({ close_socket: true });
    await socket.closedPromise;
    expect(socket.closeCode).toBe(1000);
  });

  test("contexts are independent, and at most five are open", async () => {
    const socket = new RecordingSocket(socketUrl("high/multi-stream-input?output_format=pcm_24000"), { "xi-api-key": API_KEY });
    await socket.opened;
    for (const contextId of ["a", "b"]) socket.send({ text: "One sentence here.", context_id: contextId, flush: true });
    await socket.waitFor(() => ["a", "b"].every((contextId) => audioMessages(socket, contextId).some((message) => message.alignment)));
    for (const contextId of ["a", "b"]) expect(audioBytes(audioMessages(socket, contextId))).toBe(Math.round(secondsOf("One sentence here.") * 24000) * 2);
    for (const contextId of ["c", "d", "e", "f"]) socket.send({ text: " ", context_id: contextId });
    await socket.waitFor(() => socket.json().some((message) => message.error === "max_active_conversations"));
    expect(socket.json().find((message) => message.error === "max_active_conversations").contextId).toBe("f");
    socket.close();
  });
});

/** What LiveKit's ElevenLabs plugin 1.9 asks for with its defaults (multiStreamUrl in its dist/tts.js). */
const LIVEKIT_QUERY = "model_id=eleven_turbo_v2_5&output_format=pcm_22050&enable_ssml_parsing=false&enable_logging=true&inactivity_timeout=180&apply_text_normalization=auto&sync_alignment=true&auto_mode=true";

/**
 * One reply as LiveKit's plugin 1.9 sends it (Connection.#sendLoop and SynthesizeStream.run in its dist/tts.js):
 * the context's init packet, each sentence with a trailing space and flush (auto_mode with its sentence
 * tokenizer), then an empty flush and close_context, all at once when the reply is already written.
 */
function sendLiveKitReply(socket: RecordingSocket, contextId: string, sentences: string[]): void {
  socket.send({ text: " ", voice_settings: {}, context_id: contextId });
  for (const sentence of sentences) socket.send({ text: `${sentence} `, context_id: contextId, flush: true });
  socket.send({ text: "", context_id: contextId, flush: true });
  socket.send({ context_id: contextId, close_context: true });
}

const isFinalOf = (contextId: string) => (message: any) => message.isFinal === true && message.contextId === contextId;

describe("multi-stream-input as LiveKit's ElevenLabs plugin 1.9 speaks it", () => {
  test("replies of one and of three sentences, each closed the moment it is sent: every sentence is spoken, then isFinal; the socket serves the next reply", async () => {
    const socket = new RecordingSocket(socketUrl(`low/multi-stream-input?${LIVEKIT_QUERY}`), { "xi-api-key": API_KEY });
    await socket.opened;
    for (const [contextId, sentences] of [
      ["Q7vR2mXkLp9a", ["Hello there."]],
      ["Hx3nB8sWq2Tc", ["Hello there.", "The weather is nice today.", "Goodbye now."]],
    ] as const) {
      sendLiveKitReply(socket, contextId, [...sentences]);
      await socket.waitFor(() => socket.json().some(isFinalOf(contextId)));
      const messages = socket.json().filter((message) => message.contextId === contextId);
      expect(messages.at(-1)).toEqual({ isFinal: true, contextId });
      expect(messages.filter((message) => message.error)).toEqual([]);
      expect(messages.map((message) => message.alignment?.chars.join("")).filter(Boolean)).toEqual(sentences.map((sentence) => `${sentence} `));
      expectEverySentenceHeard(joinedAudio(audioMessages(socket, contextId)), 22050, [...sentences]);
    }
    expect(socket.closeCode).toBeUndefined();
    socket.close();
  });

  test("close_context while a flush is still being spoken: the flushed text is spoken to its end, nothing after isFinal, and later text for that context is refused", async () => {
    const socket = new RecordingSocket(socketUrl("low/multi-stream-input?output_format=pcm_16000"), { "xi-api-key": API_KEY });
    await socket.opened;
    const sentences = ["This reply has a long first sentence that takes a while to speak.", "And a second one."];
    socket.send({ text: `${sentences.join(" ")} `, context_id: "reply", flush: true });
    await socket.waitFor(() => audioMessages(socket, "reply").length > 0);
    socket.send({ context_id: "reply", close_context: true });
    socket.send({ text: "", context_id: "reply" });
    socket.send({ text: "Too late. ", context_id: "reply", flush: true });
    await socket.waitFor(() => socket.json().some(isFinalOf("reply")));
    await Bun.sleep(200);
    const messages = socket.json().filter((message) => message.contextId === "reply");
    const finalAt = messages.findIndex(isFinalOf("reply"));
    expect(messages.slice(finalAt + 1)).toEqual([]);
    expect(messages.filter((message) => message.error)).toEqual([{ message: expect.stringContaining("is closed"), error: "invalid_request", code: 1008, contextId: "reply" }]);
    expectEverySentenceHeard(joinedAudio(audioMessages(socket, "reply")), 16000, sentences);
    socket.close();
  });

  test("close_socket waits for the contexts still flushing: each speaks to its end and sends isFinal, then the socket closes (1000)", async () => {
    const socket = new RecordingSocket(socketUrl("low/multi-stream-input?output_format=pcm_16000"), { "xi-api-key": API_KEY });
    await socket.opened;
    sendLiveKitReply(socket, "first", ["Hello there.", "How are you?"]);
    socket.send({ text: "A second context speaks too. ", context_id: "second", flush: true });
    socket.send({ text: "Never flushed. And not spoken", context_id: "third" });
    socket.send({ close_socket: true });
    socket.send({ text: "After close_socket. ", context_id: "fourth", flush: true });
    expect(await socket.waitForClose()).toBe(1000);
    expectEverySentenceHeard(joinedAudio(audioMessages(socket, "first")), 16000, ["Hello there.", "How are you?"]);
    expectEverySentenceHeard(joinedAudio(audioMessages(socket, "second")), 16000, ["A second context speaks too."]);
    for (const contextId of ["first", "second", "third"]) expect(socket.json().filter((message) => message.contextId === contextId).at(-1)).toEqual({ isFinal: true, contextId });
    expect(socket.json().filter((message) => message.contextId === "fourth")).toEqual([]);
  });
});

describe("a server shutdown on multi-stream-input", () => {
  test("each context finishes what it had flushed and sends isFinal (an idle one at once), then the socket closes with 1001", async () => {
    const draining = await startTestServer(new ToneModel({ frameDelayMs: 5 }));
    try {
      const socket = new RecordingSocket(`${draining.url.replace("http", "ws")}/elevenlabs/v1/text-to-speech/low/multi-stream-input?output_format=pcm_16000`);
      await socket.opened;
      const sentences = ["This reply has a long first sentence that takes a while to speak.", "And a second one."];
      socket.send({ text: " ", context_id: "idle" });
      socket.send({ text: `${sentences.join(" ")} `, context_id: "speaking", flush: true });
      await socket.waitFor(() => audioMessages(socket, "speaking").length > 0);
      draining.lifecycle.startDraining();
      expect(await socket.waitForClose()).toBe(1001);
      expectEverySentenceHeard(joinedAudio(audioMessages(socket, "speaking")), 16000, sentences);
      for (const contextId of ["idle", "speaking"]) expect(socket.json().filter((message) => message.contextId === contextId).at(-1)).toEqual({ isFinal: true, contextId });
    } finally {
      await draining.stop();
    }
  });
});

describe("a LiveKit reply spoken by the offline engine", () => {
  let classic: TestServer;
  beforeAll(async () => {
    classic = await startTestServer(await createClassicModel());
  });
  afterAll(() => classic.stop());

  test("each sentence, the last included, is there in words: pocketsphinx on each sentence's audio (cut at its alignment message)", async () => {
    assertAsrAvailable();
    const sentences = INTELLIGIBILITY_SENTENCES.slice(0, 2);
    const socket = new RecordingSocket(`${classic.url.replace("http", "ws")}/elevenlabs/text-to-speech/rms/multi-stream-input?${LIVEKIT_QUERY.replace("pcm_22050", "pcm_16000")}`);
    await socket.opened;
    sendLiveKitReply(socket, "reply", sentences);
    await socket.waitFor(() => socket.json().some(isFinalOf("reply")));
    // A sentence's last audio message carries its alignment: the messages up to it are its audio.
    const perSentence: any[][] = [[]];
    for (const message of audioMessages(socket, "reply")) {
      perSentence.at(-1)!.push(message);
      if (message.alignment) perSentence.push([]);
    }
    expect(perSentence.slice(0, -1).map((messages) => messages.at(-1).alignment.chars.join("").trim())).toEqual(sentences);
    for (const [index, sentence] of sentences.entries()) {
      const decoded = decodeWithFfmpeg(joinedAudio(perSentence[index]!), "s16le", 16000);
      expect(wordErrorRate(sentence, await transcribe(decoded.samples, decoded.sampleRateHz))).toBeLessThan(0.35);
    }
    socket.close();
  }, 60_000);
});

describe("LiveKit's ElevenLabs plugin 1.9 itself (its URL building, messages and framing), at the base URL with and without /v1", () => {
  beforeAll(() => initializeLogger({ pretty: false, level: "warn" }));

  test.each(["/elevenlabs", "/elevenlabs/v1"])("base %s: a streamed two-sentence reply, a synthesize() and the voice list", async (basePath) => {
    const tts = new LiveKitElevenLabsTTS({ apiKey: API_KEY, baseURL: `${server.url}${basePath}`, voiceId: "low" });
    try {
      const collect = async (frames: AsyncIterable<{ frame: { data: Int16Array; sampleRate: number } }>) => {
        const chunks: Uint8Array[] = [];
        for await (const { frame } of frames) {
          expect(frame.sampleRate).toBe(22050);
          chunks.push(new Uint8Array(frame.data.buffer, frame.data.byteOffset, frame.data.byteLength).slice());
        }
        return Buffer.concat(chunks);
      };
      const stream = tts.stream();
      stream.pushText("Hello there. How are you?");
      stream.endInput();
      expectEverySentenceHeard(await collect(stream as never), 22050, ["Hello there.", "How are you?"]);
      expectEverySentenceHeard(await collect(tts.synthesize("One more sentence.") as never), 22050, ["One more sentence."]);
      expect((await tts.listVoices()).map((voice) => voice.id)).toEqual(expect.arrayContaining(["low", "high"]));
    } finally {
      await tts.close();
    }
  });
});

describe("ElevenLabs' routes without their /v1", () => {
  test("stream-input at /elevenlabs/text-to-speech/…, the key in ?xi_api_key= as on /v1; a path no route serves is a 404 naming it as sent", async () => {
    const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/elevenlabs/text-to-speech/low/stream-input?output_format=pcm_16000&xi_api_key=${API_KEY}`);
    await socket.opened;
    socket.send({ text: " " });
    socket.send({ text: "Hello there. " });
    socket.send({ text: "" });
    expect(await socket.waitForClose()).toBe(1000);
    expect(audioBytes(audioMessages(socket))).toBe(Math.round(secondsOf("Hello there.") * 16000) * 2);

    const missing = await fetch(`${server.url}/elevenlabs/nothing-here`, { headers: { "xi-api-key": API_KEY } });
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { detail: { message: string } }).detail.message).toBe("No route for GET /elevenlabs/nothing-here");
  });
});

describe("keep-alives reset the inactivity timeout", () => {
  // Kept alive for twice the timeout, every 200 ms: a loop held up to 1.8 s on a loaded machine still passes.
  // The two sockets wait out their seconds together.
  test.concurrent('stream-input: {"text": " "} every 200 ms keeps a 2 s inactivity_timeout socket and its unfinished text', async () => {
    const socket = new RecordingSocket(socketUrl("low/stream-input?output_format=pcm_16000&inactivity_timeout=2"), { "xi-api-key": API_KEY });
    await socket.opened;
    socket.send({ text: " " });
    socket.send({ text: "Hello there" });
    for (let i = 0; i < 20; i++) {
      await Bun.sleep(200);
      socket.send({ text: " " });
    }
    expect(socket.closeCode).toBeUndefined();
    socket.send({ text: "" });
    expect(await socket.waitForClose()).toBe(1000);
    expect(socket.json().at(-1)).toEqual({ isFinal: true });
    expectEverySentenceHeard(joinedAudio(audioMessages(socket)), 16000, ["Hello there"]);
  }, 60_000);

  test.concurrent('multi-stream-input: {"text": "", "context_id"} every 200 ms keeps a context past a 2 s inactivity_timeout, with its unfinished text', async () => {
    const socket = new RecordingSocket(socketUrl("low/multi-stream-input?output_format=pcm_16000&inactivity_timeout=2"), { "xi-api-key": API_KEY });
    await socket.opened;
    socket.send({ text: " ", context_id: "agent" });
    socket.send({ text: "Hello there", context_id: "agent" });
    for (let i = 0; i < 20; i++) {
      await Bun.sleep(200);
      socket.send({ text: "", context_id: "agent" });
    }
    socket.send({ context_id: "agent", flush: true });
    await socket.waitFor(() => audioMessages(socket, "agent").some((message) => message.alignment));
    expect(socket.json().filter((message) => message.error)).toEqual([]);
    expectEverySentenceHeard(joinedAudio(audioMessages(socket, "agent")), 16000, ["Hello there"]);
    socket.close();
  }, 60_000);
});

describe("erroneous messages are budgeted, context ids capped", () => {
  test("close_context for no context: answered while within the budget (the socket still speaks), then a flood is closed with 1008", async () => {
    const socket = new RecordingSocket(socketUrl("low/multi-stream-input?output_format=pcm_16000"), { "xi-api-key": API_KEY });
    await socket.opened;
    for (let i = 0; i < 10; i++) socket.send({ context_id: "nobody", close_context: true });
    socket.send({ text: "Still here. ", context_id: "a", flush: true });
    await socket.waitFor(() => audioMessages(socket, "a").some((message) => message.alignment));
    for (let i = 0; i < 5000; i++) socket.send({ context_id: "nobody", close_context: true });
    expect(await socket.waitForClose()).toBe(1008);
    expect(socket.closeReason).toContain("too many erroneous messages");
    const errors = socket.json().filter((message) => message.error);
    // The burst, what refilled while the test ran, and the closing error.
    expect(errors.length).toBeLessThanOrEqual(ERRONEOUS_MESSAGE_BURST + 3);
    expect(errors.at(-1)).toMatchObject({ error: "invalid_request", code: 1008, contextId: null });
  });

  test("a sixth context, again and again: refused while within the budget, then closed with 1008", async () => {
    const socket = new RecordingSocket(socketUrl("low/multi-stream-input?output_format=pcm_16000"), { "xi-api-key": API_KEY });
    await socket.opened;
    for (const contextId of ["a", "b", "c", "d", "e"]) socket.send({ text: " ", context_id: contextId });
    for (let i = 0; i < 5000; i++) socket.send({ text: " ", context_id: "f" });
    expect(await socket.waitForClose()).toBe(1008);
    expect(socket.json().filter((message) => message.error === "max_active_conversations").length).toBeLessThanOrEqual(ERRONEOUS_MESSAGE_BURST + 2);
  });

  test(`a context_id of ${MAX_CONTEXT_ID_CHARS} characters is an id; one longer closes the socket with 1008, never echoed`, async () => {
    const socket = new RecordingSocket(socketUrl("low/multi-stream-input?output_format=pcm_16000"), { "xi-api-key": API_KEY });
    await socket.opened;
    const longestId = "x".repeat(MAX_CONTEXT_ID_CHARS);
    socket.send({ text: "Hello there. ", context_id: longestId, flush: true });
    await socket.waitFor(() => audioMessages(socket, longestId).some((message) => message.alignment));
    const repliedBefore = socket.json().length;
    socket.send({ context_id: "y".repeat(1024 * 1024), close_context: true });
    expect(await socket.waitForClose()).toBe(1008);
    const replies = socket.json().slice(repliedBefore);
    expect(replies).toEqual([{ message: `context_id must be at most ${MAX_CONTEXT_ID_CHARS} characters`, error: "invalid_request", code: 1008, contextId: null }]);
  });
});

describe("before the upgrade: errors in ElevenLabs' shape", () => {
  test.each([
    { name: "unknown voice", route: "nobody/stream-input", headers: { "xi-api-key": API_KEY }, status: 404, reason: "voice_not_found" },
    { name: "unknown output_format", route: "low/multi-stream-input?output_format=flac_44100", headers: { "xi-api-key": API_KEY }, status: 400, reason: "invalid_output_format" },
    { name: "inactivity_timeout out of range", route: "low/stream-input?inactivity_timeout=999", headers: { "xi-api-key": API_KEY }, status: 422, reason: "validation_error" },
    { name: "an unknown apply_text_normalization", route: "low/stream-input?apply_text_normalization=maybe", headers: { "xi-api-key": API_KEY }, status: 422, reason: "validation_error" },
    { name: "a wrong key", route: "low/stream-input", headers: { "xi-api-key": "sk-wrong" }, status: 401, reason: "invalid_api_key" },
  ] as { name: string; route: string; headers: Record<string, string>; status: number; reason: string }[])("$name → $status", async ({ route, headers, status, reason }) => {
    const response = await fetch(`${server.url}/elevenlabs/v1/text-to-speech/${route}`, { headers: { upgrade: "websocket", connection: "Upgrade", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", "sec-websocket-version": "13", ...headers } });
    expect(response.status).toBe(status);
    expect(((await response.json()) as { detail: { status: string } }).detail.status).toBe(reason);
  });
});

describe("the key in the first message, as ElevenLabs' protocol allows", () => {
  test("stream-input: xi-api-key in the init message opens the stream", async () => {
    const socket = new RecordingSocket(socketUrl("low/stream-input?output_format=pcm_16000"));
    await socket.opened;
    socket.send({ text: " ", "xi-api-key": API_KEY });
    socket.send({ text: "Hello there. " });
    socket.send({ text: "" });
    await socket.closedPromise;
    expect(socket.closeCode).toBe(1000);
    expect(audioBytes(audioMessages(socket))).toBe(Math.round(secondsOf("Hello there.") * 16000) * 2);
  });

  test.each([
    { name: "no key", first: { text: " " } },
    { name: "a wrong key", first: { text: " ", xi_api_key: "sk-wrong", context_id: "a" } },
  ])("multi-stream-input: $name in the first message → invalid_api_key and 1008, nothing spoken", async ({ first }) => {
    const socket = new RecordingSocket(socketUrl("low/multi-stream-input"));
    await socket.opened;
    socket.send(first);
    socket.send({ text: "Hello there.", context_id: "a", flush: true });
    await socket.closedPromise;
    expect(socket.closeCode).toBe(1008);
    expect(socket.json()).toEqual([{ message: expect.any(String), error: "invalid_api_key", code: 1008, contextId: null }]);
  });

  test("an unknown voice is refused only once the first message's key has passed", async () => {
    const socket = new RecordingSocket(socketUrl("nobody/stream-input"));
    await socket.opened;
    socket.send({ text: " ", xi_api_key: API_KEY });
    await socket.closedPromise;
    expect(socket.closeCode).toBe(1008);
    expect(socket.json()).toEqual([{ message: expect.stringContaining("Unknown voice 'nobody'"), error: "invalid_request", code: 1008 }]);
  });
});
