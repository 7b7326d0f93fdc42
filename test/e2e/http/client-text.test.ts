/**
 * Client text that reaches a header or an error body: extra_params keys the model ignores are named in
 * X-Ignored-Fields, and a name holding a newline, a NUL or a character above U+00FF must neither break the
 * response (a 500 after the whole synthesis) nor leave an admitted stream holding its engine place; echoed
 * values (a model name, an unknown field) are cut, so an error stays small whatever the request held.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { encodeWav } from "../../../src/audio/wav.ts";
import { headerSafeFieldName } from "../../../src/openai/dialect.ts";
import { startTestServer, type TestServer } from "../../support/server.ts";
import { ToneModel } from "../../support/tone-model.ts";
import { sine } from "../../support/uploads.ts";
import { isJson, RecordingSocket } from "../../support/ws-client.ts";
import { eventually } from "../../support/eventually.ts";
import { parseSse } from "../../support/sse.ts";
import { z } from "zod";
import type { AudioChunk, SynthesisJob } from "../../../src/models/contract.ts";

/** Audio for as long as the request runs: only an abort ends it. */
class EndlessCloningAdapter extends ToneModel {
  constructor() {
    super({ cloning: true });
  }

  override async *synthesize(job: SynthesisJob): AsyncGenerator<AudioChunk, void, undefined> {
    const rate = this.capabilities.nativeSampleRateHz;
    const samples = new Float32Array(rate / 12.5).fill(0.25);
    while (!job.signal.aborted) yield { samples, sampleRateHz: rate, frameCount: 1 };
  }
}

const ODD_KEYS = ["a\nb", "🙂", "nul\u0000key", "cr\rlf", "comma,key", "lone\uD800surrogate"];
const extraParams = Object.fromEntries(ODD_KEYS.map((key) => [key, 1]));

describe("headerSafeFieldName", () => {
  test("keeps plain names, percent-encodes every other byte of the UTF-8, and cuts at 64 bytes", () => {
    expect(headerSafeFieldName("top_k")).toBe("top_k");
    expect(headerSafeFieldName("a\nb")).toBe("a%0Ab");
    expect(headerSafeFieldName("🙂")).toBe("%F0%9F%99%82");
    expect(headerSafeFieldName("comma,key")).toBe("comma%2Ckey");
    expect(headerSafeFieldName("lone\uD800")).toBe("lone%EF%BF%BD");
    const long = headerSafeFieldName("x".repeat(1_000_000));
    expect(long.length).toBeLessThanOrEqual(67);
    for (const key of ODD_KEYS) expect(() => new Headers({ "X-Ignored-Fields": headerSafeFieldName(key) })).not.toThrow();
  });
});

describe("odd extra_params keys on every route", () => {
  let server: TestServer;
  // One running place and no queue: a place left held by a broken response refuses the next request with a 429.
  beforeAll(async () => {
    // A model that reads only temperature: every other key is ignored, and named.
    server = await startTestServer(new ToneModel({ paramsSchema: z.object({ temperature: z.number().optional() }) }), { flags: { "max-streams": "1", "max-queue": "0" } });
  });
  afterAll(() => server.stop());

  const speak = (body: Record<string, unknown>) =>
    fetch(`${server.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "Hello there.", extra_params: extraParams, ...body }) });

  const expectNothingHeld = async () => {
    await eventually("the engine to hold no request", async () => (server.host.engine!.counts.running + server.host.engine!.counts.waiting === 0 ? true : undefined));
  };

  for (const [mode, body] of [
    ["file", {}],
    ["raw stream", { stream_format: "audio" }],
    ["SSE", { stream: true }],
  ] as const) {
    test(`${mode}: 200 with every key named header-safely, the audio whole, and no engine place left held`, async () => {
      for (let round = 0; round < 3; round++) {
        const response = await speak(body);
        expect(response.status).toBe(200);
        const named = response.headers.get("x-ignored-fields")!.split(",");
        expect(named).toContain("extra_params.a%0Ab");
        expect(named).toContain("extra_params.%F0%9F%99%82");
        expect(named).toContain("extra_params.nul%00key");
        expect(named).toContain("extra_params.comma%2Ckey");
        const bytes = new Uint8Array(await response.arrayBuffer());
        expect(bytes.byteLength).toBeGreaterThan(1000);
        if (mode === "SSE") {
          const done = parseSse(new TextDecoder().decode(bytes)).find((event) => event.event === "speech.audio.done")!;
          expect(done.data.ignored_fields).toContain("extra_params.a%0Ab");
        }
        await expectNothingHeld();
      }
    });
  }

  test("batch: every item succeeds and names the keys", async () => {
    const response = await fetch(`${server.url}/v1/audio/speech/batch`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ extra_params: extraParams, items: [{ input: "One." }, { input: "Two.", extra_params: { "x\ny": 2 } }] }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as any;
    expect(body.succeeded).toBe(2);
    expect(body.results[1].ignored_fields).toEqual(["extra_params.x%0Ay"]);
    await expectNothingHeld();
  });

  test("WebSocket: the sentence is spoken and audio.done names the keys", async () => {
    const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/v1/audio/speech/stream`);
    await socket.opened;
    socket.send({ type: "session.config", stream_audio: true, extra_params: extraParams });
    socket.send({ type: "input.text", text: "Hello there." });
    socket.send({ type: "input.done" });
    await socket.waitFor((received) => received.some(isJson("session.done")));
    const done = socket.json().find((message) => message.type === "audio.done");
    expect(done.error).toBe(false);
    expect(done.ignored_fields).toContain("extra_params.%F0%9F%99%82");
    socket.close();
    await expectNothingHeld();
  });
});

describe("values quoted back in errors are cut", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(new ToneModel());
  });
  afterAll(() => server.stop());

  const post = (body: unknown) => fetch(`${server.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  test("a 200 KB model gives a 404 of at most 4 KB", async () => {
    const response = await post({ input: "Hi.", model: "m".repeat(200_000) });
    expect(response.status).toBe(404);
    const text = await response.text();
    expect(text.length).toBeLessThanOrEqual(4096);
    expect(JSON.parse(text).error.message).toContain("does not exist");
  });

  test("a 1 MB unknown field name gives a 400 of at most 4 KB naming its start", async () => {
    const response = await post({ input: "Hi.", ["f".repeat(1_000_000)]: 1 });
    expect(response.status).toBe(400);
    const text = await response.text();
    expect(text.length).toBeLessThanOrEqual(4096);
    expect(JSON.parse(text).error.message).toContain("Unknown field 'fff");
  });

  test("a 1 MB extra_params key out of range gives a 400 of at most 4 KB", async () => {
    const response = await post({ input: "Hi.", extra_params: { temperature: 9, ["k".repeat(1_000_000)]: 1 } });
    expect(response.status).toBe(400);
    expect((await response.text()).length).toBeLessThanOrEqual(4096);
  });

  test("a 10 KB unknown path gives a 404 of at most 4 KB", async () => {
    const response = await fetch(`${server.url}/${"p".repeat(10_000)}`);
    expect(response.status).toBe(404);
    expect((await response.text()).length).toBeLessThanOrEqual(4096);
  });
});

describe("one ref_audio encoded once", () => {
  test("a batch of 3 items sharing a ref_audio, and a WebSocket session's config and sentences, encode it once", async () => {
    const adapter = new ToneModel({ cloning: true });
    const server = await startTestServer(adapter);
    try {
      const clip = `data:audio/wav;base64,${Buffer.from(encodeWav(sine(2, 300), 16000)).toString("base64")}`;
      const response = await fetch(`${server.url}/v1/audio/speech/batch`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ref_audio: clip, items: [{ input: "One." }, { input: "Two." }, { input: "Three." }] }),
      });
      expect(((await response.json()) as any).succeeded).toBe(3);
      expect(adapter.encodedReferences).toHaveLength(1);

      const other = `data:audio/wav;base64,${Buffer.from(encodeWav(sine(2, 500), 16000)).toString("base64")}`;
      const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/v1/audio/speech/stream`);
      await socket.opened;
      socket.send({ type: "session.config", ref_audio: other });
      socket.send({ type: "input.text", text: "One. Two. Three. " });
      socket.send({ type: "input.done" });
      await socket.waitFor((received) => received.some(isJson("session.done")));
      socket.close();
      expect(adapter.encodedReferences).toHaveLength(2);
    } finally {
      await server.stop();
    }
  });

  test("with the engine full, a request that would encode a ref_audio is a 429 before any encode", async () => {
    const adapter = new EndlessCloningAdapter();
    const server = await startTestServer(adapter, { flags: { "max-streams": "1", "max-queue": "0", "stream-stall-timeout": "30" } });
    try {
      // An endless raw stream holds the one place.
      const holder = await fetch(`${server.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "a sentence that goes on. ".repeat(40), stream_format: "audio" }) });
      await holder.body!.getReader().read();
      expect(holder.status).toBe(200);
      const clip = `data:audio/wav;base64,${Buffer.from(encodeWav(sine(2, 300), 16000)).toString("base64")}`;
      const refused = await fetch(`${server.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "Hi.", ref_audio: clip }) });
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).not.toBeNull();
      expect(adapter.encodedReferences).toHaveLength(0);

    } finally {
      await server.stop();
    }
  });
});
