/**
 * /openapi.json describes exactly the routes the app registers, its request bodies are the schemas the
 * routes parse with (what the `openai` client sends validates, what the server refuses does not), and /docs
 * renders it.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import Ajv2020 from "ajv/dist/2020.js";
import OpenAI from "openai";
import { ElevenLabsClient } from "@elevenlabs/elevenlabs-js";
import { testApp } from "../support/server.ts";
import { ToneModel } from "../support/tone-model.ts";

type App = Awaited<ReturnType<typeof testApp>>["app"];
type Document = { openapi: string; paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: object }> } }>> };

let app: App;
let document: Document;
beforeAll(async () => {
  ({ app } = await testApp(new ToneModel()));
  const response = await app.request("/openapi.json");
  expect(response.status).toBe(200);
  document = (await response.json()) as Document;
});

test("it is OpenAPI 3.1", () => {
  expect(document.openapi).toBe("3.1.0");
});

test("every route the app registers is in it, and nothing else", () => {
  // A parameter's pattern (`:name{.+}`) is Hono's, not part of its name in the document.
  const registered = new Set(app.routes.filter((route) => route.method !== "ALL").map((route) => `${route.method.toLowerCase()} ${route.path.replace(/:([a-z_]+)(?:\{[^}]*\})?/gi, "{$1}")}`));
  const documented = new Set(Object.entries(document.paths).flatMap(([path, operations]) => Object.keys(operations).map((method) => `${method} ${path}`)));
  expect([...registered].sort()).toEqual([...documented].sort());
  expect(registered.size).toBeGreaterThanOrEqual(14);
});

test("each documented /elevenlabs/v1 route also answers without its /v1, the same way (the document lists it once)", async () => {
  const elevenLabsV1 = Object.entries(document.paths).filter(([path]) => path.startsWith("/elevenlabs/v1/"));
  expect(elevenLabsV1.length).toBeGreaterThanOrEqual(8);
  expect(Object.keys(document.paths).filter((path) => path.startsWith("/elevenlabs/") && !/^\/elevenlabs\/v\d\//.test(path))).toEqual([]);
  for (const [path, operations] of elevenLabsV1) {
    for (const method of Object.keys(operations)) {
      const concrete = path.replace("{voice_id}", "low");
      const answer = async (url: string) => {
        const response = await app.request(url, { method: method.toUpperCase(), ...(method === "post" ? { headers: { "content-type": "application/json" }, body: "{}" } : {}) });
        return { status: response.status, body: await response.text() };
      };
      const withV1 = await answer(concrete);
      const withoutV1 = await answer(concrete.replace("/elevenlabs/v1/", "/elevenlabs/"));
      expect({ route: `${method} ${path}`, ...withoutV1 }).toEqual({ route: `${method} ${path}`, ...withV1 });
      expect(withV1.body).not.toContain("No route");
    }
  }
});

test("/docs is an HTML page over /openapi.json whose script and style this server serves (no CDN)", async () => {
  const response = await app.request("/docs");
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toContain("text/html");
  const html = await response.text();
  // Relative to the page (so a reverse proxy's path prefix is kept), resolving to this server's own files.
  const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => new URL(match[1]!, "http://voxedge.test/docs").pathname);
  expect(assets.sort()).toEqual(["/docs/assets/swagger-ui-dist/swagger-ui-bundle.js", "/docs/assets/swagger-ui-dist/swagger-ui.css"]);
  expect(html).toContain("url: 'openapi.json'");
  for (const asset of assets) {
    const served = await app.request(asset);
    expect(served.status).toBe(200);
    expect(served.headers.get("content-type")).toMatch(asset.endsWith(".js") ? /javascript/ : /css/);
    expect((await served.arrayBuffer()).byteLength).toBeGreaterThan(10_000);
  }
  expect((await app.request("/docs/assets/swagger-ui-dist/package.json")).status).toBe(404);
});

describe("request bodies validate against it", () => {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  const validatorFor = (path: string) => ajv.compile(document.paths[path]!.post!.requestBody!.content["application/json"]!.schema);

  test("what the openai client sends for speech: files, SSE, every option it has", async () => {
    const sent: unknown[] = [];
    const client = new OpenAI({
      baseURL: "http://voxedge.test/v1",
      apiKey: "unused",
      maxRetries: 0,
      fetch: async (url: string | URL | Request, init?: RequestInit) => {
        sent.push(JSON.parse(String(init?.body)));
        return app.request(String(url), init);
      },
    });
    const requests: OpenAI.Audio.SpeechCreateParams[] = [
      { model: "tts-1", voice: "alloy", input: "Hello." },
      { model: "gpt-4o-mini-tts", voice: "low", input: "Calm.", instructions: "calm", response_format: "mp3", speed: 1.25 },
      { model: "tts-1-hd", voice: "high", input: "Events.", response_format: "pcm", stream_format: "sse" },
      { model: "tts-1", voice: "nova", input: "Raw.", response_format: "wav", stream_format: "audio" },
    ];
    for (const request of requests) {
      const response = await client.audio.speech.create(request);
      expect(response.status).toBe(200);
      await response.arrayBuffer();
    }
    const validate = validatorFor("/v1/audio/speech");
    expect(sent).toHaveLength(requests.length);
    for (const body of sent) expect({ body, valid: validate(body), errors: validate.errors }).toMatchObject({ valid: true });
  });

  test("what the server refuses does not validate (the schema is not vacuous)", async () => {
    const validate = validatorFor("/v1/audio/speech");
    for (const body of [{ voice: "alloy" }, { input: "x", speed: 9 }, { input: "x", response_format: "ogg" }, { input: "x", typo_field: 1 }]) {
      const refused = await app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      expect(refused.status).toBe(400);
      expect(validate(body)).toBe(false);
    }
    // null means "not set", in the document as in the server.
    expect(validate({ input: "x", voice: null, speed: null, seed: 42 })).toBe(true);
  });

  test("what the ElevenLabs SDK sends for text-to-speech validates; a body the server refuses does not", async () => {
    const sent: unknown[] = [];
    const client = new ElevenLabsClient({
      baseUrl: "http://voxedge.test/elevenlabs",
      apiKey: "unused",
      maxRetries: 0,
      fetch: Object.assign(
        async (url: string | URL | Request, init?: RequestInit) => {
          sent.push(JSON.parse(String(init?.body)));
          return app.request(String(url), init);
        },
        { preconnect: fetch.preconnect },
      ),
    });
    await new Response(await client.textToSpeech.convert("low", { text: "Hello.", modelId: "eleven_flash_v2_5", outputFormat: "pcm_16000", seed: 3, voiceSettings: { stability: 0.5, similarityBoost: 0.8, speed: 1 }, previousText: "Hi.", applyTextNormalization: "auto" })).arrayBuffer();
    await client.textToSpeech.convertWithTimestamps("high", { text: "Timed.", languageCode: "en" });
    const validate = validatorFor("/elevenlabs/v1/text-to-speech/{voice_id}");
    expect(sent).toHaveLength(2);
    for (const body of sent) expect({ body, valid: validate(body), errors: validate.errors }).toMatchObject({ valid: true });
    expect(validate({ model_id: "eleven_flash_v2_5" })).toBe(false);
    expect(validate({ text: "x", voice_settings: { stability: 2 } })).toBe(false);
  });

  test("a batch with per-item overrides validates", () => {
    const validate = validatorFor("/v1/audio/speech/batch");
    expect(validate({ response_format: "wav", items: [{ input: "One." }, { input: "Two.", voice: "high", response_format: "flac" }] })).toBe(true);
    expect(validate({ items: [] })).toBe(false);
  });
});
