/**
 * ElevenLabs' WebSockets under /elevenlabs, replaying the message sequences LiveKit's ElevenLabs plugin
 * (stream-input: an init message, words as they come, `{"text": ""}`) and Pipecat's (multi-stream-input:
 * a context per turn, flush, keepalives, close_context on interruption, close_socket) send.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../support/server.ts";
import { ToneAdapter } from "../support/tone-adapter.ts";
import { RecordingSocket } from "../support/ws-client.ts";

const API_KEY = "sk-eleven";
/** The tone adapter: one 80 ms frame for every two characters. */
const secondsOf = (text: string) => Math.round(text.length * 0.5) * 0.08;

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer(new ToneAdapter({ frameDelayMs: 5 }), { flags: { "api-key": API_KEY } });
});
afterAll(() => server.stop());

const socketUrl = (route: string) => `${server.url.replace("http", "ws")}/elevenlabs/v1/text-to-speech/${route}`;

function audioMessages(socket: RecordingSocket, contextId?: string): any[] {
  return socket.json().filter((message) => typeof message.audio === "string" && (contextId === undefined || message.contextId === contextId));
}

function audioBytes(messages: any[]): number {
  return messages.reduce((sum, message) => sum + Buffer.from(message.audio, "base64").length, 0);
}

test("stream-input as LiveKit speaks it: init, words, end; pcm audio with alignment, then isFinal and a normal close", async () => {
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

    // The user interrupts turn 2 after its first audio: close_context stops it at once.
    socket.send({ text: " ", context_id: "turn-2", voice_settings: voiceSettings });
    socket.send({ text: "This turn has a long first sentence that the user will not wait for at all. And more.", context_id: "turn-2" });
    socket.send({ context_id: "turn-2", flush: true });
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
