/**
 * What the runtime's server adds around the app, seen from a bare socket: the keep-alive idle timeout (never
 * applied to a request in progress), requests without a Host header, and no body cap below the app's own.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { AudioChunk, SynthesisJob } from "../../src/models/contract.ts";
import { RawHttpConnection, requestHead } from "../support/raw-http.ts";
import { startTestServer, type TestServer } from "../support/server.ts";
import { ToneModel } from "../support/tone-model.ts";

/** Thinks for `delayMs` before its first frame, the way a cold model does. */
class SlowStartAdapter extends ToneModel {
  delayMs = 0;

  override async *synthesize(job: SynthesisJob): AsyncGenerator<AudioChunk, void, undefined> {
    await Bun.sleep(this.delayMs);
    yield* super.synthesize(job);
  }
}

describe("keep-alive timeout (--keep-alive-timeout 1)", () => {
  const adapter = new SlowStartAdapter();
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(adapter, { flags: { "keep-alive-timeout": "1" } });
  });
  afterAll(() => server.stop());

  test("a connection left idle after its answer is closed by the server", async () => {
    adapter.delayMs = 0;
    const connection = await RawHttpConnection.open(server.url);
    try {
      connection.write(requestHead("GET", "/health", {}));
      const response = await connection.response();
      expect(response.status).toBe(200);
      expect(connection.ended).toBe(false);
      expect(await connection.closedWithin(15_000)).toBe(true);
    } finally {
      connection.destroy();
    }
  });

  // Bun's idle timer ticks every 4 s or so, and it spares a handler still working on a body it has read, but
  // not a streamed response whose first chunk is late: 6 s is past the tick that would cut it.
  const IN_PROGRESS: { name: string; delayMs: number; request: Record<string, unknown>; contentType: string }[] = [
    { name: "a wav file whose synthesis takes 2.5 s", delayMs: 2500, request: { input: "hi", response_format: "wav" }, contentType: "audio/wav" },
    { name: "a raw stream whose first chunk takes 6 s", delayMs: 6000, request: { input: "hi", stream_format: "audio", response_format: "pcm" }, contentType: "audio/pcm" },
  ];
  for (const { name, delayMs, request, contentType } of IN_PROGRESS) {
    test(`${name} (longer than the timeout) still gets its answer; then the idle connection is closed`, async () => {
      adapter.delayMs = delayMs;
      const connection = await RawHttpConnection.open(server.url);
      try {
        const body = JSON.stringify(request);
        connection.write(requestHead("POST", "/v1/audio/speech", { "Content-Type": "application/json", "Content-Length": body.length }) + body);
        const response = await connection.response(20_000);
        expect(response.status).toBe(200);
        expect(response.headers["content-type"]).toBe(contentType);
        expect(response.body.length).toBeGreaterThan(1000);
        expect(await connection.closedWithin(15_000)).toBe(true);
      } finally {
        connection.destroy();
      }
    });
  }
});

describe("edge cases of the request line and headers", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(new ToneModel());
  });
  afterAll(() => server.stop());

  test("an HTTP/1.0 request without Host is routed by its path: GET /health", async () => {
    const connection = await RawHttpConnection.open(server.url);
    try {
      connection.write(requestHead("GET", "/health", {}, { version: "1.0", host: null }));
      const response = await connection.response();
      expect(response.status).toBe(200);
      expect(JSON.parse(response.body).status).toBe("ok");
    } finally {
      connection.destroy();
    }
  });

  test("an HTTP/1.0 request without Host is routed by its path: GET /v1/models", async () => {
    const connection = await RawHttpConnection.open(server.url);
    try {
      connection.write(requestHead("GET", "/v1/models", {}, { version: "1.0", host: null }));
      const response = await connection.response();
      expect(response.status).toBe(200);
      expect(JSON.parse(response.body).data.map((model: { root: string }) => model.root)).toContain("tone-test");
    } finally {
      connection.destroy();
    }
  });

  test("a generated file is sent with its Content-Length, not chunked", async () => {
    const connection = await RawHttpConnection.open(server.url);
    try {
      const body = JSON.stringify({ input: "a sentence long enough to make a file of some hundred kilobytes", response_format: "wav" });
      connection.write(requestHead("POST", "/v1/audio/speech", { "Content-Type": "application/json", "Content-Length": body.length }) + body);
      const response = await connection.response();
      expect(response.status).toBe(200);
      expect(response.headers["transfer-encoding"]).toBeUndefined();
      expect(Number(response.headers["content-length"])).toBe(response.bytes.byteLength);
      expect(response.bytes.byteLength).toBeGreaterThan(100_000);
    } finally {
      connection.destroy();
    }
  });

  for (const path of ["/v1/audio/speech", "/v1/audio/speech/batch"]) {
    test(`POST ${path} declaring a 200 MB body (past Bun's own 128 MB cap) gets the API's 413, before any of it is sent`, async () => {
      const connection = await RawHttpConnection.open(server.url);
      try {
        connection.write(requestHead("POST", path, { "Content-Type": "application/json", "Content-Length": 200 * 1024 * 1024 }));
        const response = await connection.response();
        expect(response.status).toBe(413);
        const parsed = JSON.parse(response.body);
        expect(Object.keys(parsed.error).sort()).toEqual(["code", "message", "param", "type"]);
        expect(parsed.error.code).toBe(413);
        expect(parsed.error.message).toContain(`larger than ${server.config.maxBodyBytes} bytes`);
      } finally {
        connection.destroy();
      }
    });
  }
});
