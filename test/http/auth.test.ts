/**
 * The auth matrix: keys off and on × every route the app registers × --public-listings (and the flags that
 * protect /health and /metrics), plus the WebSocket upgrade, which checks the key before upgrading (header,
 * or `?api_key=` as browsers must send it).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HEALTH_PATHS, METRICS_PATH, PUBLIC_LISTINGS } from "../../src/http/auth.ts";
import { RawHttpConnection, requestHead } from "../support/raw-http.ts";
import { startTestServer, testApp, type TestServer } from "../support/server.ts";
import { ToneModel } from "../support/tone-model.ts";
import { RecordingSocket } from "../support/ws-client.ts";

const FLAG_KEY = "sk-flag";
const FILE_KEY = "sk-from-file";
const keyFile = join(mkdtempSync(join(tmpdir(), "voxedge-keys-")), "keys");
writeFileSync(keyFile, `# rotated in on Monday\n\n  ${FILE_KEY}  \n`);

type App = Awaited<ReturnType<typeof testApp>>["app"];

/** Every (method, path) the app answers, with a concrete value for each path parameter. */
function routesOf(app: App): { method: string; path: string }[] {
  const seen = new Set<string>();
  const routes: { method: string; path: string }[] = [];
  for (const route of app.routes) {
    if (route.method === "ALL") continue;
    // The static routes answer only for their files' names; any other parameter is a name.
    const path = route.path.replace("/playground/ort/:file", "/playground/ort/ort-wasm-simd-threaded.wasm").replace("/playground/:file", "/playground/playground.js").replace("/swagger-ui-dist/:file", "/swagger-ui-dist/swagger-ui.css").replace(/:[a-z]+/gi, "someone");
    const id = `${route.method} ${path}`;
    if (seen.has(id)) continue;
    seen.add(id);
    routes.push({ method: route.method, path });
  }
  return routes;
}

/** Routes that answer without a key whatever the flags: the API's description, the playground page and its engine's code. */
const ALWAYS_OPEN = new Set(["/openapi.json", "/docs", "/docs/assets/swagger-ui-dist/swagger-ui.css", "/", "/playground/playground.js", "/playground/engine.js", "/playground/decoder.js", "/playground/ort/ort-wasm-simd-threaded.wasm", "/favicon.ico"]);

const call = (app: App, method: string, path: string, headers: Record<string, string> = {}) => app.request(path, { method, headers });

/** A 401 in OpenAI's error shape, or in ElevenLabs' for its routes under /elevenlabs. */
async function expectUnauthorized(response: Response, path = ""): Promise<void> {
  expect(response.status).toBe(401);
  expect(response.headers.get("www-authenticate")).toMatch(/^Bearer/);
  const body: unknown = await response.json();
  if (path.startsWith("/elevenlabs/")) expect(body).toEqual({ detail: { status: "invalid_api_key", message: expect.any(String) } });
  else expect(body).toEqual({ error: { message: expect.any(String), type: "UnauthorizedError", param: null, code: 401 } });
}

describe("no keys configured", () => {
  test("every route answers without credentials", async () => {
    const { app } = await testApp(new ToneModel());
    const routes = routesOf(app);
    expect(routes.length).toBeGreaterThanOrEqual(14);
    for (const { method, path } of routes) expect({ method, path, status: (await call(app, method, path)).status }).not.toMatchObject({ status: 401 });
  });
});

const MATRIX: { name: string; flags: Record<string, string>; open: (path: string, method: string) => boolean }[] = [
  { name: "keys", flags: {}, open: (path) => ALWAYS_OPEN.has(path) || HEALTH_PATHS.has(path) || path === METRICS_PATH },
  { name: "keys + --public-listings", flags: { "public-listings": "true" }, open: (path, method) => ALWAYS_OPEN.has(path) || HEALTH_PATHS.has(path) || path === METRICS_PATH || (method === "GET" && PUBLIC_LISTINGS.has(path)) },
  { name: "keys + --protect-health + --protect-metrics", flags: { "protect-health": "true", "protect-metrics": "true" }, open: (path) => ALWAYS_OPEN.has(path) },
];

for (const { name, flags, open } of MATRIX) {
  describe(name, () => {
    let app: App;
    beforeAll(async () => {
      ({ app } = await testApp(new ToneModel(), { flags: { "api-key": FLAG_KEY, "api-key-file": keyFile, ...flags } }));
    });

    test("every route: no key and a wrong key are 401 (OpenAI's error shape, ElevenLabs' under /elevenlabs) unless open; either key, as Bearer, X-API-Key or xi-api-key, gets past", async () => {
      for (const { method, path } of routesOf(app)) {
        const label = `${method} ${path}`;
        const anonymous = await call(app, method, path);
        if (open(path, method)) expect({ label, status: anonymous.status }).not.toMatchObject({ status: 401 });
        else await expectUnauthorized(anonymous, path);
        const wrong = await call(app, method, path, { authorization: "Bearer sk-wrong" });
        // A wrong key is refused wherever a key counts; the always-open routes and the probes ignore it.
        if (open(path, method) && !PUBLIC_LISTINGS.has(path)) expect({ label, status: wrong.status }).not.toMatchObject({ status: 401 });
        else await expectUnauthorized(wrong, path);
        const keyed: Record<string, string>[] = [{ authorization: `Bearer ${FLAG_KEY}` }, { authorization: `bearer ${FILE_KEY}` }, { "x-api-key": FILE_KEY }, { "x-api-key": FLAG_KEY }, { "xi-api-key": FLAG_KEY }];
        for (const headers of keyed) {
          expect({ label, headers, status: (await call(app, method, path, headers)).status }).not.toMatchObject({ status: 401 });
        }
      }
    });

    test("a key in the query string counts only on the WebSocket upgrade", async () => {
      await expectUnauthorized(await call(app, "POST", `/v1/audio/speech?api_key=${FLAG_KEY}`));
      await expectUnauthorized(await call(app, "DELETE", `/v1/audio/voices/someone?api_key=${FLAG_KEY}`));
    });
  });
}

describe("the WebSocket checks the key at upgrade", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(new ToneModel(), { flags: { "api-key": FLAG_KEY } });
  });
  afterAll(() => server.stop());

  async function upgradeStatus(path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
    const connection = await RawHttpConnection.open(server.url);
    try {
      connection.write(requestHead("GET", path, { Upgrade: "websocket", Connection: "Upgrade", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13", ...headers }));
      const response = await connection.response();
      return { status: response.status, body: response.body.toString() };
    } finally {
      connection.destroy();
    }
  }

  test("without a key, or with a wrong one, the upgrade is refused with 401 in OpenAI's shape", async () => {
    for (const refused of [await upgradeStatus("/v1/audio/speech/stream"), await upgradeStatus("/v1/audio/speech/stream?api_key=sk-wrong"), await upgradeStatus("/v1/audio/speech/stream", { "X-API-Key": "sk-wrong" })]) {
      expect(refused.status).toBe(401);
      expect(JSON.parse(refused.body).error.code).toBe(401);
    }
  });

  test("?api_key= (browsers) and the Authorization header both open a session that speaks", async () => {
    const base = server.url.replace("http", "ws");
    for (const socket of [new RecordingSocket(`${base}/v1/audio/speech/stream?api_key=${FLAG_KEY}`), new RecordingSocket(`${base}/v1/audio/speech/stream`, { authorization: `Bearer ${FLAG_KEY}` })]) {
      await socket.opened;
      socket.send({ type: "session.config", voice: "low", stream_audio: true });
      socket.send({ type: "input.text", text: "Hello there." });
      socket.send({ type: "input.done" });
      await socket.waitFor((received) => received.some((entry) => entry.kind === "json" && entry.value.type === "session.done"));
      expect(socket.received.some((entry) => entry.kind === "binary")).toBe(true);
      socket.close();
    }
  });
});
