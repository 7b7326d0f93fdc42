/**
 * Client habits, through a real port: the request bodies a client written against vLLM-Omni or OpenAI sends,
 * and what it needs back. A pydantic client dumps its request model whole, so every field it leaves unset
 * arrives as an explicit null.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ToneAdapter } from "../support/tone-adapter.ts";
import { startTestServer, type TestServer } from "../support/server.ts";
import { isJson, RecordingSocket } from "../support/ws-client.ts";

const TEXT = "hello world this is a test";

/** What our request fields look like in a pydantic dump of vLLM-Omni's request model when nothing is set. */
const UNSET_SPEECH_FIELDS = {
  model: null,
  voice: null,
  instructions: null,
  response_format: null,
  sample_rate: null,
  speed: null,
  seed: null,
  ref_audio: null,
  ref_text: null,
  language: null,
  max_new_tokens: null,
  extra_params: null,
  word_timestamps: null,
};

function post(server: TestServer, path: string, body: unknown): Promise<Response> {
  return fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

async function openSession(server: TestServer, config: Record<string, unknown>, text: string): Promise<RecordingSocket> {
  const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/v1/audio/speech/stream`);
  await socket.opened;
  socket.send({ type: "session.config", ...config });
  socket.send({ type: "input.text", text });
  socket.send({ type: "input.done" });
  return socket;
}

let server: TestServer;
const adapter = new ToneAdapter();
beforeAll(async () => {
  server = await startTestServer(adapter);
});
afterAll(() => server.stop());

describe("an explicit null means the field is not set", () => {
  const cases: Record<string, Record<string, unknown>> = {
    "every optional field null": { input: TEXT, ...UNSET_SPEECH_FIELDS, stream: null, stream_format: null },
    "stream null, stream_format null": { input: TEXT, stream: null, stream_format: null },
  };
  for (const [name, body] of Object.entries(cases)) {
    test(`POST /v1/audio/speech, ${name}: the same audio as the bare request`, async () => {
      const bare = new Uint8Array(await (await post(server, "/v1/audio/speech", { input: TEXT })).arrayBuffer());
      const response = await post(server, "/v1/audio/speech", body);
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toBe("audio/wav");
      expect(new Uint8Array(await response.arrayBuffer())).toEqual(bare);
      // null is no way around the schema: a name in no schema is still a 400 naming it, and input is required.
      const unknown = await post(server, "/v1/audio/speech", { ...body, colour: null });
      expect(unknown.status).toBe(400);
      expect((await unknown.json()).error).toMatchObject({ param: "colour", message: "Unknown field 'colour'" });
      const noInput = await post(server, "/v1/audio/speech", { ...body, input: null });
      expect(noInput.status).toBe(400);
      expect((await noInput.json()).error.param).toBe("input");
    });
  }

  test("batch: null batch defaults and null item fields; a null item field leaves the batch default in force", async () => {
    const response = await post(server, "/v1/audio/speech/batch", {
      ...UNSET_SPEECH_FIELDS,
      voice: "high",
      items: [{ input: TEXT, ...UNSET_SPEECH_FIELDS }, { input: TEXT, ...UNSET_SPEECH_FIELDS, voice: "low" }],
    });
    expect(response.status).toBe(200);
    const body = await response.json();
    expect(body.results.map((result: any) => [result.status, result.media_type])).toEqual([
      ["success", "audio/wav"],
      ["success", "audio/wav"],
    ]);
    expect(adapter.jobs.slice(-2).map((job) => job.voice)).toEqual(["high", "low"]);
  });

  test("WebSocket session.config with every field null speaks with the defaults", async () => {
    const socket = await openSession(server, { ...UNSET_SPEECH_FIELDS, stream_audio: null, split_granularity: null }, "Hello there.");
    await socket.waitFor((received) => received.some(isJson("session.done")));
    expect(socket.json().find((message) => message.type === "audio.start")).toMatchObject({ format: "wav", sample_rate: 24000 });
    expect(socket.json().filter((message) => message.type === "error")).toEqual([]);
    socket.close();
  });
});
