/**
 * The pipeline in a real page (Debian's Chromium through playwright-core): the worker the server builds
 * (/playground/engine.js) loads the served model from the model files route and speaks with no speech request
 * to the server, the same seed giving the server's samples; and `conformance --browser` runs the golden cases
 * in the page and reports as the CLI does.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { launchChromium, DEFAULT_CHROMIUM } from "../../../src/chromium/launch.ts";
import { PocketModel } from "../../../src/models/pocket/model.ts";
import { silentLogger } from "../../../src/log/logger.ts";
import { floatToInt16 } from "../../../src/audio/wav.ts";
import { compareTensors } from "../../../src/conformance/report.ts";
import { startTestServer, type TestServer } from "../../support/server.ts";
import { fixtureBundle, requirePocketTinyFixture } from "../../models/pocket/bundle-fixture.ts";
import { REPO_ROOT } from "../../support/repo.ts";
import { pocketTinyCatalogEntry, startPocketTinyHub, tinyRepoPath } from "../../support/hub-server.ts";
import { pullBundle } from "../../../src/weights/download.ts";

/**
 * A page load is ~10 s alone on 2 cores, and 2–3× that on a busy machine: bounds for hangs, not for speed.
 */
const PAGE_LOAD_TIMEOUT_MS = 300_000;

const TEXT = "The page speaks on the visitor's own machine. It costs $19.99 on 03/04/2026.";

let server: TestServer;
let model: PocketModel;
let browser: Browser;
beforeAll(async () => {
  if (!existsSync(DEFAULT_CHROMIUM)) throw new Error("the browser tests need Debian's Chromium: apt-get install chromium");
  model = await PocketModel.load(fixtureBundle(), {}, { logger: silentLogger });
  server = await startTestServer(model);
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await model?.close();
});

interface PageEngine {
  page: Page;
  /** Every request the page made, as method and path. */
  requests: string[];
  errors: string[];
}

async function openEngine(context: BrowserContext): Promise<PageEngine> {
  const page = await context.newPage();
  const requests: string[] = [];
  const errors: string[] = [];
  page.on("request", (request) => requests.push(`${request.method()} ${new URL(request.url()).pathname}`));
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(`${server.url}/`);
  return { page, requests, errors };
}

/** Loads the served model in the page; resolves to the engine's info. */
const loadInPage = (page: Page) =>
  page.evaluate(async () => {
    const { BrowserEngine } = await import("/playground/browser-engine.js" as string);
    const engine = new BrowserEngine();
    (window as unknown as { engine: unknown }).engine = engine;
    return engine.load({ model: "pocket-tts" });
  }) as Promise<{ executionProvider: string; decoder: string; decoderWorker: boolean; voices: string[]; crossOriginIsolated: boolean; threads: number; fetchedBytes: number; cachedBytes: number; sampleRateHz: number }>;

/** Speaks in the page; resolves to every sample made and the worker's numbers. */
const speakInPage = (page: Page, request: object) =>
  page.evaluate(async (asked) => {
    const engine = (window as unknown as { engine: { speak(request: object, onAudio: (samples: Float32Array) => void): { done: Promise<object> } } }).engine;
    const frames: number[][] = [];
    const stats = await engine.speak(asked, (samples) => frames.push(Array.from(samples))).done;
    return { samples: frames.flat(), frames: frames.length, stats };
  }, request) as Promise<{ samples: number[]; frames: number; stats: { firstAudioMs: number; rtf: number; audioSeconds: number; stageSeconds: Record<string, number> } }>;

/**
 * One page loads the model cold and the later tests go on in it (or beside it, in its context): a page load
 * costs ~10 s on 2 cores, and what they check is what a loaded engine does next, not another cold load. A
 * second load read wholly from the browser's cache is checked once, through the playground
 * (playground-browser-engine.test.ts).
 */
interface LoadedEngine {
  context: BrowserContext;
  engine: PageEngine;
  /** What the cold load said of itself. */
  cold: Awaited<ReturnType<typeof loadInPage>>;
}
let loaded: LoadedEngine | undefined;

async function loadedEngine(): Promise<LoadedEngine> {
  if (!loaded) {
    const context = await browser.newContext();
    const engine = await openEngine(context);
    loaded = { context, engine, cold: await loadInPage(engine.page) };
  }
  return loaded;
}

describe("the engine in the page", () => {
  test("loads the served model from its files and speaks what the server speaks for the same seed, with no speech request", async () => {
    const {
      engine: { page, requests, errors },
      cold: info,
    } = await loadedEngine();
    expect(info).toMatchObject({ executionProvider: "wasm", decoder: "onnx", voices: ["alba"], crossOriginIsolated: true, sampleRateHz: 24_000 });
    expect(info.fetchedBytes).toBeGreaterThan(0);
    expect(requests).toContain("GET /v1/models/pocket-tts/files");
    expect(requests).toContain("GET /playground/engine.js");

    const before = requests.length;
    const spoken = await speakInPage(page, { text: TEXT, voice: "alba", seed: 1234 });
    const duringSpeech = requests.slice(before);
    expect(duringSpeech.filter((request) => request.includes("/v1/audio") || request.includes("/speech"))).toEqual([]);
    expect(spoken.frames).toBeGreaterThan(1);
    expect(spoken.stats.firstAudioMs).toBeGreaterThan(0);
    expect(spoken.stats.rtf).toBeGreaterThan(0);
    expect(spoken.stats.audioSeconds).toBeCloseTo(spoken.samples.length / 24_000, 6);
    // Where the worker's time went, stage by stage, as the server's engine observer hears it.
    for (const stage of ["prefill", "flow_lm", "flow_head", "decode"]) expect(spoken.stats.stageSeconds[stage]).toBeGreaterThan(0);

    const response = await fetch(`${server.url}/v1/audio/speech`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: "pocket-tts", input: TEXT, voice: "alba", seed: 1234, response_format: "pcm" }),
    });
    expect(response.status).toBe(200);
    const serverPcm = new Int16Array(await response.arrayBuffer());
    const pagePcm = floatToInt16(Float32Array.from(spoken.samples));
    expect(pagePcm.length).toBe(serverPcm.length);
    // The server's PCM is the page's floats through the same int16 conversion.
    const { relRms } = compareTensors(pagePcm, serverPcm);
    expect(relRms).toBeLessThanOrEqual(1e-4);
    // Another seed is other audio: the comparison above can fail.
    const other = await speakInPage(page, { text: TEXT, voice: "alba", seed: 4321 });
    expect(compareTensors(floatToInt16(Float32Array.from(other.samples.slice(0, pagePcm.length))), serverPcm.subarray(0, Math.min(other.samples.length, serverPcm.length))).relRms).toBeGreaterThan(1e-2);
    expect(errors).toEqual([]);
  }, PAGE_LOAD_TIMEOUT_MS);

  test("clones a voice in the page and speaks with it; a bad request fails alone", async () => {
    const { page } = (await loadedEngine()).engine;
    const cloned = (await page.evaluate(async () => {
      const engine = (window as unknown as { engine: { clone(samples: Float32Array): Promise<{ voiceId: string; seconds: number }> } }).engine;
      const clip = Float32Array.from({ length: 48_000 }, (_, index) => 0.3 * Math.sin((2 * Math.PI * 200 * index) / 24_000));
      return engine.clone(clip);
    })) as { voiceId: string; seconds: number };
    expect(cloned.seconds).toBe(2);
    const spoken = await speakInPage(page, { text: "A voice cloned in the page.", voiceId: cloned.voiceId, seed: 5 });
    expect(spoken.samples.length).toBeGreaterThan(0);
    const builtIn = await speakInPage(page, { text: "A voice cloned in the page.", voice: "alba", seed: 5 });
    expect(compareTensors(spoken.samples.slice(0, builtIn.samples.length), builtIn.samples.slice(0, spoken.samples.length)).relRms).toBeGreaterThan(1e-2);
    await expect(speakInPage(page, { text: "Nobody.", voice: "nobody" })).rejects.toThrow("this model has no voice 'nobody'");
    expect((await speakInPage(page, { text: "Still speaking.", voice: "alba", seed: 5 })).samples.length).toBeGreaterThan(0);
  }, PAGE_LOAD_TIMEOUT_MS);
});

describe("the engine's requests", () => {
  test("a speak still waiting its turn can be cancelled, 'default' and OpenAI names mean the default voice, and two loads both settle", async () => {
    // Beside the loaded page, in its context: the model's files come from the browser's cache.
    const { page } = await openEngine((await loadedEngine()).context);
    const result = (await page.evaluate(async () => {
      const { BrowserEngine } = await import("/playground/browser-engine.js" as string);
      const engine = new BrowserEngine();
      const [first, second] = await Promise.all([engine.load({ model: "pocket-tts" }), engine.load({ model: "pocket-tts" })]);
      const frames = { running: 0, waiting: 0, byDefault: 0, byAlloy: 0 };
      const running = engine.speak({ text: "The first speak runs to its end.", voice: "alba", seed: 1 }, () => frames.running++);
      const waiting = engine.speak({ text: "The second speak waits its turn, and is cancelled before it starts.", voice: "alba", seed: 1 }, () => frames.waiting++);
      engine.cancel(waiting.id);
      const [ran, cancelled] = await Promise.all([running.done, waiting.done]);
      await engine.speak({ text: "Default.", voice: "default", seed: 9 }, () => frames.byDefault++).done;
      await engine.speak({ text: "Default.", voice: "alloy", seed: 9 }, () => frames.byAlloy++).done;
      return { loads: [first.voices, second.voices], frames, ran, cancelled };
    })) as { loads: string[][]; frames: Record<string, number>; ran: { audioSeconds: number }; cancelled: { audioSeconds: number } };
    await page.close();
    expect(result.loads).toEqual([["alba"], ["alba"]]);
    expect(result.frames.running).toBeGreaterThan(0);
    expect(result.frames.waiting).toBe(0);
    expect(result.cancelled.audioSeconds).toBe(0);
    expect(result.frames.byDefault).toBeGreaterThan(0);
    expect(result.frames.byAlloy).toBe(result.frames.byDefault);
  }, PAGE_LOAD_TIMEOUT_MS);
});

describe("the Mimi decoder in a worker of its own", () => {
  test("decodes in a second worker, as the server's decoder threads do, with the same samples as in the engine's worker", async () => {
    const {
      engine: { page, errors },
      cold,
    } = await loadedEngine();
    const errorsBefore = errors.length;
    const request = { text: "Decoded beside the sampling. Then a second sentence.", voice: "alba", seed: 11 };
    const apart = (await page.evaluate(async (asked) => {
      const { BrowserEngine } = await import("/playground/browser-engine.js" as string);
      const engine = new BrowserEngine();
      const info = await engine.load({ model: "pocket-tts", decoderWorker: true });
      const samples: number[] = [];
      await engine.speak(asked, (frame: Float32Array) => samples.push(...frame)).done;
      engine.terminate();
      return { decoderWorker: info.decoderWorker, warnings: info.warnings, samples };
    }, request)) as { decoderWorker: boolean; warnings: string[]; samples: number[] };
    // The page's first engine decodes in the engine's worker (the default).
    const together = await speakInPage(page, request);
    expect(apart.decoderWorker).toBe(true);
    expect(apart.warnings).toEqual([]);
    expect(cold.decoderWorker).toBe(false);
    expect(apart.samples.length).toBeGreaterThan(0);
    expect(apart.samples).toEqual(together.samples);
    expect(errors.slice(errorsBefore)).toEqual([]);
  }, PAGE_LOAD_TIMEOUT_MS);
});

describe("the engine in a page with WebGPU", () => {
  test("'auto' keeps a software adapter off and runs on wasm, as the server's --device auto does; asked for, the language model runs on the WebGPU EP and the decoder on our WGSL kernels (Chromium's software adapter here)", async () => {
    // One WebGPU-enabled browser and page for both loads: the second load replaces the first in the same worker.
    const gpuBrowser = await launchChromium({ webgpu: true });
    try {
      const page = await gpuBrowser.newPage();
      await page.goto(`${server.url}/`);
      const auto = await loadInPage(page);
      expect(auto).toMatchObject({ executionProvider: "wasm", decoder: "onnx" });
      // "auto" keeps a software adapter off, as the server's --device auto does: asked for explicitly.
      const info = (await page.evaluate(() => (window as unknown as { engine: { load(options: object): Promise<object> } }).engine.load({ model: "pocket-tts", ep: "webgpu" }))) as { executionProvider: string; decoder: string; adapter: string };
      expect(info).toMatchObject({ executionProvider: "webgpu", decoder: "wgsl" });
      expect(info.adapter).toContain("swiftshader");
      const spoken = await speakInPage(page, { text: "Hello from the page's GPU.", voice: "alba", seed: 1 });
      expect(spoken.samples.length).toBeGreaterThan(0);
      expect(spoken.stats.audioSeconds).toBe(spoken.samples.length / 24_000);
    } finally {
      await gpuBrowser.close();
    }
  }, 480_000);
});

describe("a pulled model in the page", () => {
  test("with source 'hub', its files come from the hub it was pulled from, checked against their SHA-256, and none from the server", async () => {
    const hub = startPocketTinyHub();
    const cacheDir = mkdtempSync(join(tmpdir(), "voxedge-pulled-"));
    const pulledDir = await pullBundle({ name: "pocket-tiny", catalog: [pocketTinyCatalogEntry()], hubUrl: hub.url, cacheDir });
    const pulledModel = await PocketModel.load(pulledDir, {}, { logger: silentLogger });
    const pulledServer = await startTestServer(pulledModel);
    const contexts: BrowserContext[] = [];
    try {
      const listing = (await (await fetch(`${pulledServer.url}/v1/models/pocket-tts/files`)).json()) as { data: Array<{ name: string; hub_url?: string }> };
      expect(listing.data.filter((file) => file.name.endsWith(".onnx")).every((file) => file.hub_url?.startsWith(hub.url))).toBe(true);
      const context = await browser.newContext();
      contexts.push(context);
      const page = await context.newPage();
      const serverFileRequests: string[] = [];
      page.on("request", (request) => {
        if (request.url().startsWith(`${pulledServer.url}/v1/models/pocket-tts/files/`)) serverFileRequests.push(request.url());
      });
      await page.goto(`${pulledServer.url}/`);
      hub.requests.length = 0;
      const info = (await page.evaluate(async () => {
        const { BrowserEngine } = await import("/playground/browser-engine.js" as string);
        const engine = new BrowserEngine();
        (window as unknown as { engine: unknown }).engine = engine;
        return engine.load({ model: "pocket-tts", source: "hub" });
      })) as { fetchedBytes: number; supportsCloning: boolean };
      expect(info.fetchedBytes).toBeGreaterThan(0);
      expect(hub.requests.some((request) => request.method === "GET" && request.file?.endsWith("flow_lm_main.onnx"))).toBe(true);
      expect(serverFileRequests).toEqual([]);
      // A bundle pulled flat has no built-in voice: a voice cloned in the page speaks.
      const spoken = (await page.evaluate(async () => {
        const engine = (window as unknown as { engine: { clone(samples: Float32Array): Promise<{ voiceId: string }>; speak(request: object, onAudio: (samples: Float32Array) => void): { done: Promise<{ audioSeconds: number }> } } }).engine;
        const { voiceId } = await engine.clone(Float32Array.from({ length: 24_000 }, (_, index) => 0.2 * Math.sin(index / 9)));
        return engine.speak({ text: "Fetched from the hub.", voiceId, seed: 3 }, () => undefined).done;
      })) as { audioSeconds: number };
      expect(spoken.audioSeconds).toBeGreaterThan(0);

      // A hub file whose bytes are not the pulled ones is refused, and the server's copy is taken instead.
      hub.corrupt(tinyRepoPath("flow_lm_flow.onnx"), true);
      await context.close();
      const freshContext = await browser.newContext();
      contexts.push(freshContext);
      const fresh = await freshContext.newPage();
      const freshServerRequests: string[] = [];
      fresh.on("request", (request) => {
        if (request.url().startsWith(`${pulledServer.url}/v1/models/pocket-tts/files/`)) freshServerRequests.push(new URL(request.url()).pathname);
      });
      await fresh.goto(`${pulledServer.url}/`);
      await fresh.evaluate(async () => {
        const { BrowserEngine } = await import("/playground/browser-engine.js" as string);
        return new BrowserEngine().load({ model: "pocket-tts", source: "hub" });
      });
      expect(freshServerRequests).toEqual(["/v1/models/pocket-tts/files/flow_lm_flow.onnx"]);
    } finally {
      for (const context of contexts) await context.close();
      await pulledServer.stop();
      await pulledModel.close();
      hub.stop();
    }
  }, PAGE_LOAD_TIMEOUT_MS);
});

describe("conformance --browser", () => {
  const cli = (...args: string[]) => Bun.spawnSync([process.execPath, "src/main.ts", "conformance", ...args], { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe" });

  test("runs every golden case in headless Chromium and prints the same report", () => {
    const fixture = requirePocketTinyFixture();
    const run = cli(fixture, "--browser");
    expect(run.exitCode).toBe(0);
    const report = JSON.parse(run.stdout.toString()) as { pass: boolean; provider: string; executionProvider: string; browser: string; cases: Array<{ case: string; stage: string; pass: boolean }> };
    expect(report).toMatchObject({ fixture: "pocket-tiny", decoder: "onnx", provider: "onnxruntime-web", executionProvider: "cpu", pass: true });
    expect(report.browser).toStartWith("Chromium ");
    const stages = new Set(report.cases.map((entry) => entry.stage));
    for (const stage of ["tokenizer", "text_conditioner", "encoder", "flow_lm", "flow_head", "decoder", "end_to_end"]) expect(stages).toContain(stage);
    // The same cases as on the server.
    const onServer = JSON.parse(cli(fixture, "--provider", "onnxruntime-web").stdout.toString()) as { cases: Array<{ case: string }> };
    expect(report.cases.map((entry) => entry.case)).toEqual(onServer.cases.map((entry) => entry.case));
  }, 300_000);

  test("runs the Mimi decoder cases on our WGSL kernels in the page's WebGPU (Chromium's software adapter here)", () => {
    const run = cli(requirePocketTinyFixture(), "--browser", "--decoder", "wgsl");
    const report = JSON.parse(run.stdout.toString()) as { pass: boolean; decoder: string; cases: Array<{ case: string; pass: boolean; detail?: string }> };
    expect(run.exitCode).toBe(0);
    expect(report).toMatchObject({ decoder: "wgsl", pass: true });
    // The kernels' audio against the ONNX graph's, in the same page.
    expect(report.cases.find((entry) => entry.case === "mimi_decoder.audio_single_vs_onnx")).toMatchObject({ pass: true });
  }, 300_000);

  test("fails, exit 1, when the page's results leave the golden data", () => {
    const fixture = mkdtempSync(join(tmpdir(), "voxedge-broken-fixture-"));
    cpSync(requirePocketTinyFixture(), fixture, { recursive: true });
    const golden = JSON.parse(readFileSync(join(fixture, "golden.json"), "utf8")) as { generation_parameters?: { eos_threshold?: number }; cases: Record<string, unknown> };
    // Another EOS threshold than the golden runs used: the end-to-end cases stop elsewhere. Only they are
    // kept, since only they can fail this way and the page runs every case it is given.
    golden.generation_parameters = { ...golden.generation_parameters, eos_threshold: 50 };
    golden.cases = { end_to_end: golden.cases.end_to_end };
    writeFileSync(join(fixture, "golden.json"), JSON.stringify(golden));
    const run = cli(fixture, "--browser");
    const report = JSON.parse(run.stdout.toString()) as { pass: boolean; cases: Array<{ case: string; stage: string; pass: boolean }> };
    expect(run.exitCode).toBe(1);
    expect(report.pass).toBe(false);
    expect(report.cases.some((entry) => !entry.pass)).toBe(true);
    expect(report.cases.every((entry) => entry.stage === "end_to_end")).toBe(true);
  }, 300_000);

  test("refuses onnxruntime-node, which no page has", () => {
    const run = cli(requirePocketTinyFixture(), "--browser", "--provider", "onnxruntime-node");
    expect(run.exitCode).toBe(2);
    expect(run.stderr.toString()).toContain("--browser runs onnxruntime-web in the page");
  });
});
