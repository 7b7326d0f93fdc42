/**
 * Every check that depends only on the request runs before the first byte: on a raw stream and on SSE the
 * client gets a 4xx JSON error instead of a 200 followed by an error event or a dropped connection, and on
 * the WebSocket an `error` before any audio.start.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { z } from "zod";
import { encodeWav } from "../../../src/audio/wav.ts";
import { ToneModel } from "../../support/tone-model.ts";
import { startTestServer, type TestServer } from "../../support/server.ts";
import { multipartBody, sine, wavFile } from "../../support/uploads.ts";
import { isJson, RecordingSocket } from "../../support/ws-client.ts";

const DELIVERIES: Record<string, Record<string, unknown>> = {
  file: {},
  "raw pcm stream": { stream_format: "audio", response_format: "pcm" },
  "raw wav stream": { stream_format: "audio", response_format: "wav" },
  "SSE (stream: true)": { stream: true },
  "SSE (stream_format: sse)": { stream_format: "sse", response_format: "pcm" },
};

const oneSecondClip = `data:audio/wav;base64,${Buffer.from(encodeWav(sine(1.5, 300), 16000)).toString("base64")}`;

function post(server: TestServer, body: unknown): Promise<Response> {
  return fetch(`${server.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

async function expectJsonError(response: Response, status: number, param: string, messageIncludes: string[]): Promise<void> {
  const text = await response.text();
  expect({ status: response.status, contentType: response.headers.get("content-type") }).toEqual({ status, contentType: "application/json" });
  const error = JSON.parse(text).error;
  expect(error.param).toBe(param);
  for (const part of messageIncludes) expect(error.message).toContain(part);
}

/** Opens a session with `config`, sends text, and returns what came back once the server closed it. */
async function configureSocket(server: TestServer, config: Record<string, unknown>): Promise<RecordingSocket> {
  const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/v1/audio/speech/stream`);
  await socket.opened;
  socket.send({ type: "session.config", ...config });
  socket.send({ type: "input.text", text: "Hello there. " });
  socket.send({ type: "input.done" });
  return socket;
}

async function expectSocketRefused(socket: RecordingSocket, messageIncludes: string[]): Promise<void> {
  expect(await socket.waitForClose()).toBe(1008);
  const messages = socket.json();
  expect(messages.some((message) => message.type === "audio.start")).toBe(false);
  expect(socket.received.some((entry) => entry.kind === "binary")).toBe(false);
  expect(messages[0].type).toBe("error");
  for (const part of messageIncludes) expect(messages[0].message).toContain(part);
}

describe("a model with no built-in voices", () => {
  const adapter = new ToneModel({ voices: [], cloning: true });
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(adapter);
  });
  afterAll(() => server.stop());

  for (const [delivery, fields] of Object.entries(DELIVERIES)) {
    for (const voice of ["default", undefined, { id: "Default" }]) {
      test(`voice ${JSON.stringify(voice)} on ${delivery}: a 400 that says how to get a voice, before any generation`, async () => {
        const jobsBefore = adapter.jobs.length;
        await expectJsonError(await post(server, { input: "Hello there.", voice, ...fields }), 400, "voice", ["no built-in voices", "POST /v1/audio/voices", "ref_audio"]);
        expect(adapter.jobs.length).toBe(jobsBefore);
      });
    }
  }

  test("an unknown voice says how to get one instead of listing an empty choice", async () => {
    await expectJsonError(await post(server, { input: "Hello there.", voice: "alloyish", stream_format: "audio" }), 400, "voice", ["alloyish", "POST /v1/audio/voices", "ref_audio"]);
  });

  test("the WebSocket refuses a session.config without a voice before any audio.start", async () => {
    await expectSocketRefused(await configureSocket(server, {}), ["no built-in voices", "ref_audio"]);
  });

  test("ref_audio or an uploaded voice still speak", async () => {
    const cloned = await post(server, { input: "Hello there.", ref_audio: oneSecondClip, stream_format: "audio", response_format: "pcm" });
    expect(cloned.status).toBe(200);
    expect((await cloned.arrayBuffer()).byteLength).toBeGreaterThan(0);

    const { body, contentType } = await multipartBody({ name: "mine", consent: "consent-1", audio_sample: wavFile() });
    expect((await fetch(`${server.url}/v1/audio/voices`, { method: "POST", headers: { "content-type": contentType }, body: body as Uint8Array<ArrayBuffer> })).status).toBe(200);
    const uploaded = await post(server, { input: "Hello there.", voice: "mine", stream: true });
    expect(uploaded.status).toBe(200);
    expect(await uploaded.text()).toContain("speech.audio.done");
  });
});

describe("bad voice, ref_audio or extra_params on every streaming route", () => {
  const adapter = new ToneModel({ cloning: true, paramsSchema: z.object({ warmth: z.number().max(1, "warmth must be at most 1").optional() }) });
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(adapter);
  });
  afterAll(() => server.stop());

  const BAD: { name: string; fields: Record<string, unknown>; param: string; messageIncludes: string[] }[] = [
    { name: "unknown voice", fields: { voice: "nobody" }, param: "voice", messageIncludes: ["nobody", "low, high"] },
    { name: "ref_audio that does not decode", fields: { ref_audio: "data:audio/wav;base64,AAAA" }, param: "ref_audio", messageIncludes: [] },
    { name: "ref_audio on a refused host", fields: { ref_audio: "http://127.0.0.1:9/voice.wav" }, param: "ref_audio", messageIncludes: ["loopback"] },
    { name: "extra_params out of range", fields: { extra_params: { warmth: 2 } }, param: "extra_params.warmth", messageIncludes: ["extra_params.warmth must be at most 1"] },
  ];

  for (const bad of BAD) {
    for (const [delivery, fields] of Object.entries(DELIVERIES)) {
      test(`${bad.name} on ${delivery}: 400 JSON before any generation`, async () => {
        const jobsBefore = adapter.jobs.length;
        await expectJsonError(await post(server, { input: "Hello there.", ...bad.fields, ...fields }), 400, bad.param, bad.messageIncludes);
        expect(adapter.jobs.length).toBe(jobsBefore);
      });
    }
    for (const streamAudio of [true, false]) {
      test(`${bad.name} in a WebSocket session.config (stream_audio ${streamAudio}): an error before any audio.start`, async () => {
        await expectSocketRefused(await configureSocket(server, { ...bad.fields, stream_audio: streamAudio }), bad.messageIncludes);
      });
    }
  }

  test("the same session with good fields speaks", async () => {
    const socket = await configureSocket(server, { voice: "high", stream_audio: true });
    await socket.waitFor((received) => received.some(isJson("session.done")));
    expect(socket.json().map((message) => message.type)).toEqual(["audio.start", "audio.done", "session.done"]);
    socket.close();
  });
});
