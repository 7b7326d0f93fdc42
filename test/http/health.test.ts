/**
 * Liveness (/health) and readiness (/health/ready) through the model's life: loading, ready, an engine
 * that dies at run time (logged once, 503, requests refused rather than hung), and draining for a shutdown
 * (new work refused with a retryable 503, reads still answered).
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config.ts";
import { ModelHost } from "../../src/engine/host.ts";
import { createLogger, silentLogger } from "../../src/log/logger.ts";
import { GeneratorRunner } from "../../src/models/generator-runner.ts";
import { loadRuntime } from "../../src/runtime/serve.ts";
import { FolderVoiceStore } from "../../src/voices/folder-store.ts";
import { testApp } from "../support/server.ts";
import { ToneModel } from "../support/tone-model.ts";

const speechRequest = (input = "hello") => ({ method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input }) });

/** A tone model whose worker can die for good: from then on every step throws and the runner says why. */
class MortalToneModel extends ToneModel {
  death: Error | undefined;
  override readonly runner = new GeneratorRunner((job) => this.mortalSteps(job), { failure: () => this.death });

  async *mortalSteps(job: Parameters<ToneModel["frameSteps"]>[0]) {
    for await (const step of this.frameSteps(job)) {
      if (this.death) throw this.death;
      yield step;
    }
  }
}

test("while the model loads, both are 503 'loading'; once it is ready, both are 200", async () => {
  const config = loadConfig({}, {});
  const voices = await FolderVoiceStore.open({ dir: mkdtempSync(join(tmpdir(), "voxedge-voices-")), maxVoices: 10, logger: silentLogger });
  let finishLoading: (adapter: ToneModel) => void = () => {};
  const host = ModelHost.load(() => new Promise<ToneModel>((resolve) => (finishLoading = resolve)));
  const { app } = createApp({ config, host, logger: silentLogger, voices, runtime: await loadRuntime() });
  for (const path of ["/health", "/health/ready"]) {
    const response = await app.request(path);
    expect(response.status).toBe(503);
    expect(await response.json()).toEqual({ status: "loading" });
  }
  finishLoading(new ToneModel());
  await host.loaded;
  // Ready, and idle: no load, the default --max-streams places (the tone model admits by it alone).
  expect(await (await app.request("/health/ready")).json()).toEqual({ status: "ready", load: 0, capacity_streams: 8 });
  expect(await (await app.request("/health")).json()).toMatchObject({ status: "ok", model: "tone-test" });
});

test("an engine that dies at run time: the request in flight fails, readiness and liveness turn 503, it is logged once, and new requests are refused at once", async () => {
  const adapter = new MortalToneModel({ framesPerChar: 20 });
  const lines: string[] = [];
  const { app } = await testApp(adapter, { logger: createLogger("info", (line) => lines.push(line)) });
  expect((await app.request("/health/ready")).status).toBe(200);

  const inFlight = await app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "a long stream", stream_format: "audio", response_format: "pcm" }) });
  expect(inFlight.status).toBe(200);
  const reader = inFlight.body!.getReader();
  expect((await reader.read()).done).toBe(false);
  adapter.death = new Error("the worker exited (code 134)");
  // The stream ends (with an error) rather than hanging.
  await expect((async () => {
    for (;;) if ((await reader.read()).done) return "ended";
  })()).rejects.toBeDefined();

  const ready = await app.request("/health/ready");
  expect(ready.status).toBe(503);
  expect(await ready.json()).toEqual({ status: "failed", error: "the worker exited (code 134)" });
  expect((await app.request("/health")).status).toBe(503);
  const refused = await app.request("/v1/audio/speech", speechRequest());
  expect(refused.status).toBe(503);
  expect(((await refused.json()) as any).error).toMatchObject({ type: "ServiceUnavailableError", code: 503, message: expect.stringContaining("the worker exited") });
  const failureLines = lines.map((line) => JSON.parse(line)).filter((entry) => entry.message.startsWith("speech engine failed"));
  expect(failureLines).toHaveLength(1);
  expect(failureLines[0]).toMatchObject({ level: "error", error: "the worker exited (code 134)" });
});

test("draining: readiness 503, liveness 200, new work refused with a retryable 503 in OpenAI's shape, reads still answered", async () => {
  const { app, lifecycle } = await testApp(new ToneModel());
  lifecycle.startDraining();
  const ready = await app.request("/health/ready");
  expect(ready.status).toBe(503);
  expect(await ready.json()).toMatchObject({ status: "draining" });
  expect(await (await app.request("/health")).json()).toMatchObject({ status: "ok", draining: true });
  const refused = await app.request("/v1/audio/speech", speechRequest());
  expect(refused.status).toBe(503);
  expect(refused.headers.get("retry-after")).toBe("1");
  expect(await refused.json()).toEqual({ error: { message: expect.stringContaining("shutting down"), type: "ServiceUnavailableError", param: null, code: 503 } });
  expect((await app.request("/v1/audio/voices/someone", { method: "DELETE" })).status).toBe(503);
  expect((await app.request("/v1/models")).status).toBe(200);
  expect((await app.request("/metrics")).status).toBe(200);
});

test("draining waits for a stream in progress: idle only once its last byte is taken", async () => {
  const { app, lifecycle } = await testApp(new ToneModel({ framesPerChar: 2 }));
  const stream = await app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "stream me to the end", stream_format: "audio", response_format: "pcm" }) });
  lifecycle.startDraining();
  expect(lifecycle.active.requests).toBe(1);
  expect(await lifecycle.idle(0)).toBe(false);
  const bytes = (await stream.arrayBuffer()).byteLength;
  expect(bytes).toBeGreaterThan(0);
  expect(await lifecycle.idle(5000)).toBe(true);
  expect(lifecycle.active).toEqual({ requests: 0, sessions: 0 });
});

describe("readiness of a jammed engine", () => {
  test("503 saturated once the engine has been full without turnover for longer than the stall timeout; 200 again when it frees", async () => {
    const { Hono } = await import("hono");
    const { registerHealthRoutes } = await import("../../src/http/health.ts");
    let fullForMs = 0;
    const host = { state: "ready", failure: undefined, model: { capabilities: { modelId: "m", kind: "neural" } }, engine: { failure: undefined, fullForMs: () => fullForMs, counts: { running: 1, waiting: 0, paused: 0 }, places: 1 } };
    const app = new Hono();
    registerHealthRoutes(app, { host: host as never, lifecycle: { draining: false, active: 0 } as never, saturatedAfterMs: 1000 });
    expect((await app.request("/health/ready")).status).toBe(200);
    fullForMs = 900;
    expect((await app.request("/health/ready")).status).toBe(200);
    fullForMs = 1500;
    const jammed = await app.request("/health/ready");
    expect(jammed.status).toBe(503);
    expect(await jammed.json()).toMatchObject({ status: "saturated" });
    // Liveness stays 200: a restart is not the remedy, the held streams time out by themselves.
    expect((await app.request("/health")).status).toBe(200);
    fullForMs = 0;
    expect((await app.request("/health/ready")).status).toBe(200);
  });
});
