import { afterAll, beforeAll, expect, test } from "bun:test";
import { z } from "zod";
import { ToneModel } from "../../support/tone-model.ts";
import { startTestServer, type TestServer } from "../../support/server.ts";
import { RecordingSocket } from "../../support/ws-client.ts";

interface BadCase {
  name: string;
  body: string;
  contentType?: string;
  status: number;
  param: string | null;
  messageIncludes: string;
}

const json = (value: unknown) => JSON.stringify(value);
const CASES: BadCase[] = [
  { name: "empty input", body: json({ input: "" }), status: 400, param: "input", messageIncludes: "empty" },
  { name: "whitespace input", body: json({ input: "   \n\t" }), status: 400, param: "input", messageIncludes: "empty" },
  { name: "missing input", body: json({ voice: "low" }), status: 400, param: "input", messageIncludes: "required" },
  { name: "input over 4096 characters", body: json({ input: "a".repeat(4097) }), status: 400, param: "input", messageIncludes: "4096" },
  { name: "unknown voice", body: json({ input: "hi", voice: "nobody" }), status: 400, param: "voice", messageIncludes: "low, high" },
  { name: "voice name over 128 characters", body: json({ input: "hi", voice: "v".repeat(129) }), status: 400, param: "voice", messageIncludes: "at most 128" },
  { name: "voice id over 128 characters", body: json({ input: "hi", voice: { id: "v".repeat(129) } }), status: 400, param: "voice", messageIncludes: "at most 128" },
  { name: "ref_text over 4096 characters", body: json({ input: "hi", ref_text: "r".repeat(4097) }), status: 400, param: "ref_text", messageIncludes: "at most 4096" },
  { name: "unknown field", body: json({ input: "hi", colour: "blue" }), status: 400, param: "colour", messageIncludes: "colour" },
  { name: "bad format", body: json({ input: "hi", response_format: "ogg" }), status: 400, param: "response_format", messageIncludes: "wav" },
  { name: "speed too low", body: json({ input: "hi", speed: 0.1 }), status: 400, param: "speed", messageIncludes: "0.25" },
  { name: "speed too high", body: json({ input: "hi", speed: 4.5 }), status: 400, param: "speed", messageIncludes: "4.0" },
  { name: "streaming with speed", body: json({ input: "hi", stream: true, speed: 1.5 }), status: 400, param: "speed", messageIncludes: "stream" },
  { name: "bad sample_rate", body: json({ input: "hi", sample_rate: 12345 }), status: 400, param: "sample_rate", messageIncludes: "48000" },
  { name: "fractional sample_rate", body: json({ input: "hi", sample_rate: 16000.5 }), status: 400, param: "sample_rate", messageIncludes: "integer" },
  { name: "extra_params not an object", body: json({ input: "hi", extra_params: [1, 2] }), status: 400, param: "extra_params", messageIncludes: "object" },
  { name: "extra_params a string", body: json({ input: "hi", extra_params: "hot" }), status: 400, param: "extra_params", messageIncludes: "object" },
  { name: "invalid JSON", body: '{"input": "hi",', status: 400, param: null, messageIncludes: "Invalid JSON" },
  { name: "JSON array body", body: "[1]", status: 400, param: null, messageIncludes: "object" },
  { name: "wrong content type", body: "input=hi", contentType: "application/x-www-form-urlencoded", status: 415, param: "content-type", messageIncludes: "application/json" },
  { name: "unknown model", body: json({ input: "hi", model: "gpt-9" }), status: 404, param: "model", messageIncludes: "gpt-9" },
  { name: "voice object without id", body: json({ input: "hi", voice: { name: "x" } }), status: 400, param: "voice", messageIncludes: "voice" },
  { name: "word_timestamps over HTTP", body: json({ input: "hi", word_timestamps: true }), status: 400, param: "word_timestamps", messageIncludes: "WebSocket" },
  { name: "ref_audio to a model without cloning", body: json({ input: "hi", ref_audio: "data:audio/wav;base64,AAAA" }), status: 400, param: "ref_audio", messageIncludes: "clone" },
  { name: "max_new_tokens zero", body: json({ input: "hi", max_new_tokens: 0 }), status: 400, param: "max_new_tokens", messageIncludes: "1" },
  { name: "seed not an integer", body: json({ input: "hi", seed: "abc" }), status: 400, param: "seed", messageIncludes: "integer" },
];

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer(new ToneModel());
});
afterAll(() => server.stop());

for (const badCase of CASES) {
  test(`bad input → ${badCase.status}: ${badCase.name}`, async () => {
    const response = await fetch(`${server.url}/v1/audio/speech`, {
      method: "POST",
      headers: { "content-type": badCase.contentType ?? "application/json" },
      body: badCase.body,
    });
    expect(response.status).toBe(badCase.status);
    const body = await response.json();
    expect(Object.keys(body)).toEqual(["error"]);
    expect(body.error.code).toBe(badCase.status);
    expect(body.error.param).toBe(badCase.param);
    expect(body.error.type).toBe(badCase.status === 404 ? "NotFoundError" : "BadRequestError");
    expect(body.error.message).toContain(badCase.messageIncludes);
    expect(body.error.message).not.toContain("    at ");
  });
}

test("an oversized body is refused with 413", async () => {
  const small = await startTestServer(new ToneModel(), { flags: { "max-body-bytes": "2048" } });
  try {
    const response = await fetch(`${small.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: json({ input: "x".repeat(4000) }) });
    expect(response.status).toBe(413);
    expect((await response.json()).error.code).toBe(413);
  } finally {
    await small.stop();
  }
});

test("the server is still up and serving after every bad request", async () => {
  expect((await fetch(`${server.url}/health`)).status).toBe(200);
  const response = await fetch(`${server.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: json({ input: "still here" }) });
  expect(response.status).toBe(200);
});

test("unknown routes answer 404 in the OpenAI shape", async () => {
  const response = await fetch(`${server.url}/v1/nothing`);
  expect(response.status).toBe(404);
  expect((await response.json()).error.type).toBe("NotFoundError");
});

test("extra_params are checked with the served model's schema on every route before any work: a 400 naming extra_params.<key>; the job gets what the schema parsed", async () => {
  const adapter = new ToneModel({ paramsSchema: z.object({ warmth: z.number().max(1, "warmth must be at most 1").optional() }) });
  const tuned = await startTestServer(adapter);
  try {
    const post = (path: string, body: unknown) => fetch(`${tuned.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: json(body) });
    for (const streaming of [{}, { stream: true }, { stream_format: "audio" }]) {
      const response = await post("/v1/audio/speech", { input: "hi", response_format: "pcm", ...streaming, extra_params: { warmth: 2 } });
      expect(response.status).toBe(400);
      expect((await response.json()).error).toMatchObject({ param: "extra_params.warmth", message: "extra_params.warmth must be at most 1" });
    }
    const wrongType = await post("/v1/audio/speech", { input: "hi", extra_params: { warmth: "hot" } });
    expect(wrongType.status).toBe(400);
    const wrongTypeError = (await wrongType.json()).error;
    expect(wrongTypeError.param).toBe("extra_params.warmth");
    expect(wrongTypeError.message).toStartWith("extra_params.warmth: ");

    const batchDefault = await post("/v1/audio/speech/batch", { extra_params: { warmth: 2 }, items: [{ input: "hi" }] });
    expect(batchDefault.status).toBe(400);
    expect((await batchDefault.json()).error.param).toBe("extra_params.warmth");
    const mixed = await (await post("/v1/audio/speech/batch", { items: [{ input: "hi" }, { input: "hi", extra_params: { warmth: 2 } }] })).json();
    expect(mixed.results.map((result: any) => result.status)).toEqual(["success", "error"]);
    expect(mixed.results[1].error).toContain("extra_params.warmth");

    const socket = new RecordingSocket(`${tuned.url.replace("http", "ws")}/v1/audio/speech/stream`);
    await socket.opened;
    socket.send({ type: "session.config", extra_params: { warmth: 2 } });
    expect(await socket.waitForClose()).toBe(1008);
    expect(socket.json().at(-1)).toMatchObject({ type: "error" });
    expect(socket.json().at(-1).message).toContain("extra_params.warmth");

    expect(adapter.jobs.length).toBe(1);
    const accepted = await post("/v1/audio/speech", { input: "hi", extra_params: { warmth: 0.5, unread: "dropped" } });
    expect(accepted.status).toBe(200);
    await accepted.arrayBuffer();
    expect(adapter.jobs.at(-1)!.extraParams).toEqual({ warmth: 0.5 });
  } finally {
    await tuned.stop();
  }
});
