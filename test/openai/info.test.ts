import { readFileSync } from "node:fs";
import { expect, test } from "bun:test";
import { ToneModel } from "../support/tone-model.ts";
import { testApp } from "../support/server.ts";
import { createApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config.ts";
import { ModelHost } from "../../src/engine/host.ts";
import { silentLogger } from "../../src/log/logger.ts";
import { FolderVoiceStore } from "../../src/voices/folder-store.ts";
import { loadRuntime } from "../../src/runtime/serve.ts";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

test("models list the served model and its aliases", async () => {
  const { app } = await testApp(new ToneModel());
  const body = (await (await app.request("/v1/models")).json()) as any;
  expect(body.object).toBe("list");
  expect(body.data.map((model: any) => model.id)).toEqual(["tone-test", "tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-mini-tts-2025-12-15"]);
  expect(body.data[0]).toMatchObject({ object: "model", owned_by: "voxedge", engine: "neural", sample_rate: 24000, supported_sample_rates: [8000, 16000, 22050, 24000, 44100, 48000] });
  const aliased = await app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "hi", model: "tts-1" }) });
  expect(aliased.status).toBe(200);
});

test("health is 503 while loading and after a failed load; speech is 503 then too", async () => {
  const config = loadConfig({}, {});
  const voices = await FolderVoiceStore.open({ dir: mkdtempSync(join(tmpdir(), "voxedge-voices-")), maxVoices: 10, logger: silentLogger });
  const loading = createApp({ config, host: ModelHost.load(() => new Promise(() => {})), logger: silentLogger, voices, runtime: await loadRuntime() }).app;
  const health = await loading.request("/health");
  expect(health.status).toBe(503);
  expect(await health.json()).toEqual({ status: "loading" });
  const speech = await loading.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "hi" }) });
  expect(speech.status).toBe(503);
  expect((await speech.json()).error.message).toContain("loading");

  const failedHost = ModelHost.load(async () => {
    throw new Error("bundle missing");
  });
  await failedHost.loaded;
  const failed = createApp({ config, host: failedHost, logger: silentLogger, voices, runtime: await loadRuntime() }).app;
  const failedHealth = await failed.request("/health");
  expect(failedHealth.status).toBe(503);
  expect(await failedHealth.json()).toEqual({ status: "failed", error: "bundle missing" });
});

test("metrics count requests by route and status, time to first audio and stream outcomes", async () => {
  const { app } = await testApp(new ToneModel());
  const post = (body: unknown) => app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  await (await post({ input: "count me" })).arrayBuffer();
  await (await post({ input: "" })).arrayBuffer();
  await (await post({ input: "stream me", stream: true })).text();
  const metrics = await (await app.request("/metrics")).text();
  expect(metrics).toContain('voxedge_http_requests_total{route="/v1/audio/speech",method="POST",status="200"} 2');
  expect(metrics).toContain('voxedge_http_requests_total{route="/v1/audio/speech",method="POST",status="400"} 1');
  expect(metrics).toMatch(/voxedge_time_to_first_audio_seconds_count\{mode="file"\} 1/);
  expect(metrics).toMatch(/voxedge_real_time_factor_count\{mode="sse"\} 1/);
  expect(metrics).toContain('voxedge_streams_total{mode="sse",outcome="completed"} 1');
});

test("a stream is counted by how its generation ended: a failure is failed even when SSE tells it in an event; a file is no stream", async () => {
  const { app } = await testApp(new ToneModel({ failAfterFrames: 2 }));
  const post = (body: unknown) => app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const events = await (await post({ input: "a stream that breaks", stream: true })).text();
  expect(events).toContain("event: speech.audio.error");
  await expect((await post({ input: "a raw stream that breaks", stream_format: "audio", response_format: "pcm" })).arrayBuffer()).rejects.toThrow();
  expect((await post({ input: "a file that breaks" })).status).toBe(500);
  const metrics = await (await app.request("/metrics")).text();
  expect(metrics).toContain('voxedge_streams_total{mode="sse",outcome="failed"} 1');
  expect(metrics).toContain('voxedge_streams_total{mode="audio_stream",outcome="failed"} 1');
  expect(metrics).not.toContain('outcome="completed"');
  expect(metrics).not.toContain('voxedge_streams_total{mode="file"');
});

test("an API key, when configured, is required on /v1 routes", async () => {
  const { app } = await testApp(new ToneModel(), { flags: { "api-key": "s3cret" } });
  expect((await app.request("/v1/models")).status).toBe(401);
  expect((await app.request("/v1/models", { headers: { authorization: "Bearer s3cret" } })).status).toBe(200);
  expect((await app.request("/health")).status).toBe(200);
});

test("GET /v1/audio/models lists the served model and its aliases as Open WebUI reads them", async () => {
  const { app } = await testApp(new ToneModel());
  const body = (await (await app.request("/v1/audio/models")).json()) as any;
  expect(body.models).toEqual(["tone-test", "tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-mini-tts-2025-12-15"].map((id) => ({ id, name: id })));
  expect(body.data).toEqual(((await (await app.request("/v1/models")).json()) as any).data);
});

test("with an API key and no --public-listings, the listings need the key like every /v1 route", async () => {
  const { app } = await testApp(new ToneModel(), { flags: { "api-key": "s3cret" } });
  for (const path of ["/v1/models", "/v1/audio/models", "/v1/audio/voices"]) {
    expect((await app.request(path)).status).toBe(401);
    expect((await app.request(path, { headers: { authorization: "Bearer s3cret" } })).status).toBe(200);
  }
});

test("with --public-listings, the three listings answer without a key (uploads without consent or transcript); a wrong key and everything else need the key", async () => {
  const { app, voices } = await testApp(new ToneModel({ cloning: true }), { flags: { "api-key": "s3cret", "public-listings": "true" } });
  await voices.saveAudio({ name: "Mine", consent: "rec-1", mimeType: "audio/wav", fileSizeBytes: 1, samples: new Float32Array(16000), sampleRateHz: 16000, refText: "private words" });
  const keyed = { authorization: "Bearer s3cret" };

  const models = await app.request("/v1/audio/models");
  expect(models.status).toBe(200);
  expect(((await models.json()) as any).models[0].id).toBe("tone-test");
  expect((await app.request("/v1/models")).status).toBe(200);
  const anonymousVoices = await app.request("/v1/audio/voices");
  expect(anonymousVoices.status).toBe(200);
  const anonymousBody = await anonymousVoices.text();
  const anonymous = JSON.parse(anonymousBody);
  expect(anonymous.voices).toEqual(["high", "low", "mine"]);
  expect(anonymous.uploaded_voices).toHaveLength(1);
  expect(anonymous.uploaded_voices[0].name).toBe("Mine");
  expect(anonymousBody).not.toContain("private words");
  expect(anonymousBody).not.toContain("rec-1");
  expect(((await (await app.request("/v1/audio/voices", { headers: keyed })).json()) as any).uploaded_voices[0]).toMatchObject({ name: "Mine", consent: "rec-1", ref_text: "private words" });

  expect((await app.request("/v1/audio/voices", { headers: { authorization: "Bearer wrong" } })).status).toBe(401);
  expect((await app.request("/v1/audio/models", { headers: { authorization: "Bearer wrong" } })).status).toBe(401);
  expect((await app.request("/v1/audio/voices/mine", { method: "DELETE" })).status).toBe(401);
  expect((await app.request("/v1/audio/voices", { method: "POST" })).status).toBe(401);
  const speech = await app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "hi" }) });
  expect(speech.status).toBe(401);
  expect(voices.get("mine")).toBeDefined();
});

test("the playground page is served at /", async () => {
  const { app } = await testApp(new ToneModel());
  const response = await app.request("/");
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toContain("text/html");
  expect(await response.text()).toContain('src="playground/playground.js"');
});

test("the playground's modules are served by name as JavaScript, and nothing else under /playground/", async () => {
  const { app } = await testApp(new ToneModel());
  for (const file of ["playground.js", "playground-lib.js", "pcm-player.js"]) {
    const response = await app.request(`/playground/${file}`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/javascript");
    expect(await response.text()).toBe(readFileSync(new URL(`../../public/${file}`, import.meta.url), "utf-8"));
  }
  for (const path of ["/playground/index.html", "/playground/..%2Fpackage.json", "/playground/%2e%2e%2fsrc%2fmain.ts", "/playground/"]) {
    const response = await app.request(path);
    expect(response.status).toBe(404);
    expect(((await response.json()) as { error: { code: number } }).error.code).toBe(404);
  }
});
