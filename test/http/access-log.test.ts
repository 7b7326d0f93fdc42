/**
 * Access logs: one JSON line per request once its response has ended, with the request id (the proxy's
 * X-Request-Id when usable, returned either way), route pattern, status, latency, time to first audio and
 * audio seconds, and never the input text or the path's own values.
 */
import { expect, test } from "bun:test";
import { createLogger } from "../../src/log/logger.ts";
import { startTestServer, testApp } from "../support/server.ts";
import { RecordingSocket } from "../support/ws-client.ts";
import { ToneModel } from "../support/tone-model.ts";

const SECRET_TEXT = "my bank password is hunter2";

async function loggingApp(flags: Record<string, string> = {}) {
  const lines: string[] = [];
  const built = await testApp(new ToneModel(), { logger: createLogger("info", (line) => lines.push(line)), flags });
  const accessLines = () => lines.map((line) => JSON.parse(line)).filter((entry) => entry.message === "request");
  return { ...built, lines, accessLines };
}

const post = (body: unknown, headers: Record<string, string> = {}) => ({ method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

test("a file: the proxy's request id is kept and returned; route, status, latency, first audio and audio seconds are logged; the text is not", async () => {
  const { app, lines, accessLines } = await loggingApp();
  const response = await app.request("/v1/audio/speech", post({ input: SECRET_TEXT, response_format: "wav" }, { "X-Request-Id": "nginx-7f3a9c" }));
  expect(response.status).toBe(200);
  expect(response.headers.get("x-request-id")).toBe("nginx-7f3a9c");
  await response.arrayBuffer();
  const [entry] = accessLines();
  expect(entry).toMatchObject({ level: "info", request_id: "nginx-7f3a9c", method: "POST", route: "/v1/audio/speech", status: 200 });
  expect(entry.latency_ms).toBeGreaterThanOrEqual(entry.first_audio_ms);
  expect(entry.first_audio_ms).toBeGreaterThanOrEqual(0);
  expect(entry.audio_seconds).toBeGreaterThan(0);
  for (const line of lines) expect(line).not.toContain("hunter2");
});

test("a raw stream is logged when its last byte is taken, with its audio seconds", async () => {
  const { app, accessLines } = await loggingApp();
  const response = await app.request("/v1/audio/speech", post({ input: "stream this sentence", stream_format: "audio", response_format: "pcm", sample_rate: 24000 }));
  const requestId = response.headers.get("x-request-id")!;
  expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
  expect(accessLines()).toEqual([]);
  const bytes = (await response.arrayBuffer()).byteLength;
  const [entry] = accessLines();
  expect(entry).toMatchObject({ request_id: requestId, route: "/v1/audio/speech", status: 200 });
  expect(entry.audio_seconds).toBeCloseTo(bytes / 2 / 24000, 3);
});

test("an unusable request id (spaces, or too long) is replaced by a fresh one; refusals are logged with the route they were for, not its values", async () => {
  const { app, accessLines } = await loggingApp({ "api-key": "sk-1" });
  for (const offered of ["has spaces in it", "x".repeat(201)]) {
    const refused = await app.request("/v1/audio/voices/Private%20Name", { method: "DELETE", headers: { "X-Request-Id": offered } });
    expect(refused.status).toBe(401);
    expect(refused.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(JSON.parse(await refused.text()).error.code).toBe(401);
  }
  for (const entry of accessLines()) {
    expect(entry).toMatchObject({ method: "DELETE", route: "/v1/audio/voices/:name", status: 401 });
    expect(JSON.stringify(entry)).not.toContain("Private");
  }
  expect(accessLines()).toHaveLength(2);
});

test("a client leaving mid-stream is logged as client_closed, with the audio it was sent", async () => {
  const { app, accessLines } = await loggingApp();
  const response = await app.request("/v1/audio/speech", post({ input: "a stream its client leaves before the end of it", stream_format: "audio", response_format: "pcm" }));
  const reader = response.body!.getReader();
  expect((await reader.read()).done).toBe(false);
  await reader.cancel();
  const [entry] = accessLines();
  expect(entry).toMatchObject({ route: "/v1/audio/speech", status: 200, end: "client_closed" });
  expect(entry.audio_seconds).toBeGreaterThan(0);
});

test("a WebSocket session is logged when it closes: status 101, its audio seconds and first audio, completed", async () => {
  const lines: string[] = [];
  const server = await startTestServer(new ToneModel(), { logger: createLogger("info", (line) => lines.push(line)) });
  try {
    const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/v1/audio/speech/stream`, { "x-request-id": "ws-session-1" });
    await socket.opened;
    socket.send({ type: "session.config", voice: "low", stream_audio: true, sample_rate: 24000 });
    socket.send({ type: "input.text", text: "Two sentences here. And another one." });
    socket.send({ type: "input.done" });
    socket.send({ type: "session.close" });
    await socket.closedPromise;
    expect(socket.closeCode).toBe(1000);
    const audioBytes = socket.received.filter((entry) => entry.kind === "binary").reduce((sum, entry) => sum + (entry as { bytes: Uint8Array }).bytes.byteLength, 0);
    let entry: Record<string, any> | undefined;
    while (!(entry = lines.map((line) => JSON.parse(line)).find((logged) => logged.message === "request"))) await Bun.sleep(10);
    expect(entry).toMatchObject({ request_id: "ws-session-1", method: "GET", route: "/v1/audio/speech/stream", status: 101 });
    expect(entry.end).toBeUndefined();
    expect(entry.first_audio_ms).toBeGreaterThan(0);
    expect(entry.audio_seconds).toBeCloseTo(audioBytes / 2 / 24000, 3);
  } finally {
    await server.stop();
  }
});
