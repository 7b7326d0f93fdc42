import { afterAll, beforeAll, expect, test } from "bun:test";
import OpenAI from "openai";
import { ToneModel } from "../../support/tone-model.ts";
import { startTestServer, type TestServer } from "../../support/server.ts";
import { parseSse } from "../../support/sse.ts";

let server: TestServer;
let client: OpenAI;
beforeAll(async () => {
  server = await startTestServer(new ToneModel());
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
});
afterAll(() => server.stop());

const TEXT = "the official client works unchanged";

test("non-streaming call", async () => {
  const response = await client.audio.speech.create({ model: "tts-1", voice: "default", input: TEXT, response_format: "wav" });
  const bytes = new Uint8Array(await response.arrayBuffer());
  expect(new TextDecoder().decode(bytes.slice(0, 4))).toBe("RIFF");
  expect(response.headers.get("x-output-tokens")).toBe(String(Math.round(TEXT.length * 0.5)));
});

test("stream_format sse", async () => {
  const response = await client.audio.speech.create({ model: "tts-1", voice: "default", input: TEXT, response_format: "pcm", stream_format: "sse" });
  const events = parseSse(await response.text());
  expect(events.at(-1)!.event).toBe("speech.audio.done");
  const pcm = Buffer.concat(events.filter((event) => event.event === "speech.audio.delta").map((event) => Buffer.from(event.data.audio, "base64")));
  expect(pcm.length).toBe(Math.round(TEXT.length * 0.5) * 1920 * 2);
});

test("stream_format audio", async () => {
  const response = await client.audio.speech.create({ model: "tts-1", voice: "default", input: TEXT, response_format: "pcm", stream_format: "audio" });
  let total = 0;
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) total += chunk.length;
  expect(total).toBe(Math.round(TEXT.length * 0.5) * 1920 * 2);
});

test("errors surface as the client's typed errors", async () => {
  const failure = await client.audio.speech.create({ model: "tts-1", voice: "nobody", input: TEXT }).catch((error: unknown) => error);
  expect(failure).toBeInstanceOf(OpenAI.BadRequestError);
  expect((failure as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("voice");
});
