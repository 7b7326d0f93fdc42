/**
 * The playground with "This browser" chosen, in a real browser (Debian's Chromium driven by playwright-core):
 * the served Pocket model loads into the page with a progress bar, speaks through the same AudioWorklet as
 * the server path with no speech request to the server, stops, downloads, clones a voice from a clip without
 * uploading it, and a second load reads every file from Cache Storage. Screenshots go to artifacts/playground/.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DEFAULT_CHROMIUM, launchChromium } from "../../../src/chromium/launch.ts";
import { type Browser, type BrowserContext, type Page } from "playwright-core";
import { createClassicModel } from "../../../src/models/classic/model.ts";
import { PocketModel } from "../../../src/models/pocket/model.ts";
import { silentLogger } from "../../../src/log/logger.ts";
import { decodeWav, floatToInt16 } from "../../../src/audio/wav.ts";
import { startTestServer, type TestServer } from "../../support/server.ts";
import { fixtureBundle } from "../../models/pocket/bundle-fixture.ts";
import { wavFile } from "../../support/uploads.ts";
import { REPO_ROOT } from "../../support/repo.ts";
// @ts-expect-error plain browser modules, without type declarations
import { loadProgress, pcm16FromFloat } from "../../../public/playground-lib.js";

const ARTIFACTS = join(REPO_ROOT, "artifacts", "playground");
/** The page engine on the tiny fixture loads in a few seconds; a cold onnxruntime-web compile takes longer. */
const LOAD_TIMEOUT_MS = 180_000;

interface EngineLoad {
  state: "idle" | "loading" | "ready" | "error";
  loadedBytes: number;
  totalBytes: number;
  cachedBytes: number;
  fetchedBytes: number;
  error: string | null;
}

interface PlaygroundState {
  state: "idle" | "connecting" | "waiting" | "playing" | "done" | "error";
  samplesPlayed: number;
  firstAudioMs: number | null;
  underruns: number;
  lastError: string | null;
  samplesPlayedAtSessionDone: number | null;
  samplesReceived: number;
  peakLevel: number;
  engine: "server" | "browser";
  engineInfo: { executionProvider: "wasm" | "webgpu"; decoder: "onnx" | "wgsl"; threads: number; voices: string[]; sampleRateHz: number; fetchedBytes: number; cachedBytes: number } | null;
  engineLoad: EngineLoad;
  speakStats: { firstAudioMs: number; audioSeconds: number; wallSeconds: number; rtf: number } | null;
  ranOn: { engine: "server" } | { engine: "browser"; executionProvider: string; decoder: string } | null;
}

let pocket: TestServer;
let classic: TestServer;
let pocketModel: PocketModel;
let browser: Browser;
beforeAll(async () => {
  if (!existsSync(DEFAULT_CHROMIUM)) throw new Error("the browser tests need Debian's Chromium: apt-get install chromium");
  mkdirSync(ARTIFACTS, { recursive: true });
  pocketModel = await PocketModel.load(fixtureBundle(), {}, { logger: silentLogger });
  pocket = await startTestServer(pocketModel);
  classic = await startTestServer(await createClassicModel());
  // No sandbox as root, no background traffic to a closed network; a fake microphone needing no prompt.
  browser = await launchChromium({ fakeMicrophone: true });
});
afterAll(async () => {
  await browser?.close();
  await pocket?.stop();
  await classic?.stop();
  await pocketModel?.close();
});

/** What the page (and its worker) asked of the server, as method and path, and the sockets it opened. */
interface Traffic {
  requests: string[];
  sockets: string[];
}

interface OpenedPage {
  page: Page;
  traffic: Traffic;
  consoleErrors: string[];
}

async function openPlayground(server: TestServer, context?: BrowserContext, viewport = { width: 1280, height: 900 }): Promise<OpenedPage> {
  const page = await (context ?? (await browser.newContext({ viewport, acceptDownloads: true }))).newPage();
  const traffic: Traffic = { requests: [], sockets: [] };
  const consoleErrors: string[] = [];
  page.on("request", (request) => traffic.requests.push(`${request.method()} ${new URL(request.url()).pathname}`));
  page.on("websocket", (socket) => traffic.sockets.push(new URL(socket.url()).pathname));
  page.on("pageerror", (error) => consoleErrors.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error") consoleErrors.push(message.text());
  });
  await page.goto(`${server.url}/`);
  await page.waitForFunction(() => document.querySelectorAll("#voice option").length > 1);
  return { page, traffic, consoleErrors };
}

const playback = (page: Page) => page.evaluate(() => JSON.parse(JSON.stringify((window as unknown as { voxedgePlayground: object }).voxedgePlayground, (key, value) => (key === "sentences" ? undefined : value))) as PlaygroundState);

async function waitForState(page: Page, states: PlaygroundState["state"][], timeout = 120_000): Promise<PlaygroundState> {
  await page.waitForFunction((wanted) => wanted.includes((window as unknown as { voxedgePlayground: PlaygroundState }).voxedgePlayground.state), states, { timeout, polling: 50 });
  return playback(page);
}

/** Chooses "This browser" and waits for the model to load (or fail) in the page. */
async function chooseThisBrowser(page: Page): Promise<PlaygroundState> {
  await page.getByRole("radio", { name: "This browser" }).check();
  await page.waitForFunction(() => ["ready", "error"].includes((window as unknown as { voxedgePlayground: PlaygroundState }).voxedgePlayground.engineLoad.state), null, { timeout: LOAD_TIMEOUT_MS, polling: 50 });
  return playback(page);
}

/** Requests that would mean speech was made on the server: the speech routes, the stream socket, voice uploads. */
const speechTraffic = (traffic: Traffic, from: { requests: number; sockets: number }) => [
  ...traffic.requests.slice(from.requests).filter((line) => /\/v1\/audio\/speech|^POST \/v1\/audio\/voices|\/elevenlabs\//.test(line)),
  ...traffic.sockets.slice(from.sockets),
];
const mark = (traffic: Traffic) => ({ requests: traffic.requests.length, sockets: traffic.sockets.length });

describe("the playground's page engine helpers", () => {
  test("frames become the server's own pcm16 integers", () => {
    const samples = Float32Array.from({ length: 4801 }, (_, index) => 1.2 * Math.sin(index / 7) * (index % 3 === 0 ? -1 : 1));
    samples[0] = 0.5 / 32767;
    samples[1] = -0.5 / 32767;
    expect(Array.from(pcm16FromFloat(samples) as Int16Array)).toEqual(Array.from(floatToInt16(samples)));
  });

  test("load progress sums the files seen, splitting bytes read from the cache from bytes downloaded", () => {
    expect(loadProgress(new Map())).toEqual({ loadedBytes: 0, totalBytes: 0, cachedBytes: 0, fetchedBytes: 0, percent: 0 });
    const files = new Map([
      ["bundle.json", { loadedBytes: 100, totalBytes: 100, from: "cache" }],
      ["flow_lm_main.onnx", { loadedBytes: 250, totalBytes: 1000, from: "server" }],
      ["voices/alba.safetensors", { loadedBytes: 50, totalBytes: 100, from: "hub" }],
    ]);
    expect(loadProgress(files)).toEqual({ loadedBytes: 400, totalBytes: 1200, cachedBytes: 100, fetchedBytes: 300, percent: 33 });
  });
});

/**
 * A playground whose page engine has loaded, shared by the tests that go on from there (a page load costs
 * ~10 s on 2 cores); each test that takes it leaves it with the page engine chosen and idle.
 */
let loadedPlayground: OpenedPage | undefined;
async function playgroundWithEngineLoaded(): Promise<OpenedPage> {
  if (!loadedPlayground) {
    loadedPlayground = await openPlayground(pocket);
    expect((await chooseThisBrowser(loadedPlayground.page)).engineLoad.state).toBe("ready");
  }
  return loadedPlayground;
}

describe("the playground with the engine in this browser", () => {
  test("loads the model with a progress bar, speaks with no speech request to the server, clones from a clip in the page, and loads from the cache the second time", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
    const { page, traffic, consoleErrors } = await openPlayground(pocket, context);
    expect(await playback(page)).toMatchObject({ engine: "server", engineInfo: null, engineLoad: { state: "idle" } });
    expect(await page.getByRole("radio", { name: "This server" }).isChecked()).toBe(true);
    const before = mark(traffic);

    const loaded = await chooseThisBrowser(page);
    expect(loaded.engineLoad.error).toBeNull();
    expect(loaded.engine).toBe("browser");
    expect(loaded.engineLoad).toMatchObject({ state: "ready", cachedBytes: 0 });
    expect(loaded.engineLoad.fetchedBytes).toBeGreaterThan(0);
    expect(loaded.engineInfo).toMatchObject({ executionProvider: "wasm", decoder: "onnx", sampleRateHz: 24000, voices: ["alba"], cachedBytes: 0 });
    const progressBar = page.getByRole("progressbar");
    expect(await progressBar.getAttribute("aria-valuenow")).toBe("100");
    expect(await page.getByRole("status").filter({ hasText: "all downloaded" }).count()).toBe(1);
    const shown = await page.getByLabel("The engine in this browser").textContent();
    for (const figure of ["wasm", "onnx", "MB"]) expect(shown).toContain(figure);
    // The model's files came from the files route; the page asked for nothing else.
    const loadRequests = traffic.requests.slice(before.requests);
    expect(loadRequests).toContain("GET /v1/models/pocket-tts/files");
    expect(loadRequests.filter((line) => line.startsWith("GET /v1/models/pocket-tts/files/")).length).toBeGreaterThan(5);
    // The voice picker now lists the page model's voices.
    expect(await page.getByRole("combobox", { name: "Voice", exact: true }).locator("option").allTextContents()).toEqual(["default", "alba"]);
    await page.screenshot({ path: join(ARTIFACTS, "browser-engine-loaded.png"), fullPage: true });

    // Speak: the worker's frames play through the worklet, and the server hears nothing of it.
    const speaking = mark(traffic);
    await page.getByRole("textbox", { name: "Text", exact: true }).fill("Hello from the page. It speaks on this machine.");
    await page.getByRole("button", { name: "Speak", exact: true }).click();
    const done = await waitForState(page, ["done", "error"], 120_000);
    expect(done.lastError).toBeNull();
    expect(done.state).toBe("done");
    expect(done.samplesPlayed).toBeGreaterThan(0);
    expect(done.samplesPlayed).toBe(done.samplesReceived);
    expect(done.peakLevel).toBeGreaterThan(0);
    expect(done.firstAudioMs).toBeGreaterThan(0);
    expect(done.samplesPlayedAtSessionDone).not.toBeNull();
    expect(done.ranOn).toEqual({ engine: "browser", executionProvider: "wasm", decoder: "onnx" });
    expect(done.speakStats!.audioSeconds).toBeCloseTo(done.samplesReceived / 24000, 5);
    expect(done.speakStats!.rtf).toBeGreaterThan(0);
    expect(await page.textContent("#first-audio")).toMatch(/^\d+ ms$/);
    expect(await page.textContent("#rtf")).toBe(done.speakStats!.rtf.toFixed(2));
    expect(await page.textContent("#ran-on")).toBe("this browser (wasm, onnx decoder)");
    expect(await page.textContent("#sentences li .figures")).toContain(`RTF ${done.speakStats!.rtf.toFixed(2)}`);
    expect(speechTraffic(traffic, speaking)).toEqual([]);
    // A voice's file is read when it is first spoken: model files are all the page may ask for.
    expect(traffic.requests.slice(speaking.requests).filter((line) => !line.startsWith("GET /v1/models/pocket-tts/files/"))).toEqual([]);

    // Download WAV saves exactly the pcm16 that was played.
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Download WAV" }).click()]);
    const wav = decodeWav(new Uint8Array(readFileSync((await download.path())!)));
    expect(wav.sampleRateHz).toBe(24000);
    expect(wav.channels[0]!.length).toBe(done.samplesReceived);

    // Clone in the page from a WAV clip: decoded, mono, 24 kHz, and never uploaded.
    const cloning = mark(traffic);
    await page.getByLabel("Voice sample", { exact: true }).setInputFiles({ name: "ada.wav", mimeType: "audio/wav", buffer: Buffer.from(await wavFile(2, 220).arrayBuffer()) });
    await page.getByRole("button", { name: "Clone in this page" }).click();
    await expect(page.getByRole("alert").filter({ hasText: "consent" }).waitFor()).resolves.toBeUndefined();
    await page.getByRole("checkbox", { name: /consent/i }).check();
    await page.getByRole("button", { name: "Clone in this page" }).click();
    await page.getByRole("status").filter({ hasText: "Cloned ada in this page" }).waitFor({ timeout: 30_000 });
    const picker = page.getByRole("combobox", { name: "Voice", exact: true });
    expect(await picker.locator("option:checked").textContent()).toBe("cloned in this page: ada");
    expect(await page.getByRole("status").filter({ hasText: "Cloned ada" }).textContent()).toContain("2.0 s");

    await page.getByRole("textbox", { name: "Text", exact: true }).fill("Now in the cloned voice.");
    await page.getByRole("button", { name: "Speak", exact: true }).click();
    const cloned = await waitForState(page, ["done", "error"], 120_000);
    expect(cloned).toMatchObject({ state: "done", lastError: null });
    expect(cloned.samplesPlayed).toBeGreaterThan(0);
    expect(cloned.peakLevel).toBeGreaterThan(0);
    expect(speechTraffic(traffic, cloning)).toEqual([]);
    expect(pocket.voices.list()).toEqual([]);
    expect(consoleErrors).toEqual([]);

    // A fresh page in the same browser profile: every file is read from Cache Storage.
    await page.reload();
    await page.waitForFunction(() => document.querySelectorAll("#voice option").length > 1);
    const reloading = mark(traffic);
    const again = await chooseThisBrowser(page);
    expect(again.engineLoad).toMatchObject({ state: "ready", fetchedBytes: 0, error: null });
    expect(again.engineLoad.cachedBytes).toBe(loaded.engineLoad.fetchedBytes);
    expect(again.engineInfo).toMatchObject({ fetchedBytes: 0, cachedBytes: loaded.engineInfo!.fetchedBytes });
    expect(await page.getByRole("status").filter({ hasText: "all from the browser's cache" }).count()).toBe(1);
    expect(await page.textContent("#engine-fetched")).toBe("0.00 MB");
    // Only the listing went to the server: no file's bytes.
    expect(traffic.requests.slice(reloading.requests).filter((line) => line.startsWith("GET /v1/models/pocket-tts/files/"))).toEqual([]);
    expect(consoleErrors).toEqual([]);
    await context.close();
  }, 360_000);

  test("Stop cancels the page engine's utterance: playback ends, and the engine is free for the next one at once", async () => {
    const { page, traffic, consoleErrors } = await playgroundWithEngineLoaded();
    const speaking = mark(traffic);
    await page.getByRole("textbox", { name: "Text", exact: true }).fill(Array.from({ length: 40 }, (_, index) => `Sentence ${index + 1} is made in the page.`).join(" "));
    await page.getByRole("button", { name: "Speak", exact: true }).click();
    // Stop is pressed from inside the page as soon as audio plays: a round trip from the test, on a busy
    // machine, took long enough for the worker to finish all 40 sentences first.
    await page.evaluate(
      () =>
        new Promise<void>((resolve) => {
          const stopOncePlaying = () => {
            if ((window as unknown as { voxedgePlayground: PlaygroundState }).voxedgePlayground.samplesPlayed === 0) return void setTimeout(stopOncePlaying, 5);
            (document.getElementById("stop") as HTMLButtonElement).click();
            resolve();
          };
          stopOncePlaying();
        }),
    );
    const stopped = await waitForState(page, ["done", "error"]);
    expect(stopped.state).toBe("done");
    expect(stopped.samplesPlayedAtSessionDone).toBeNull();
    const playedThen = stopped.samplesPlayed;
    await Bun.sleep(300);
    expect((await playback(page)).samplesPlayed).toBe(playedThen);

    // The worker runs one request at a time: a short one right after finishes only if the long one was dropped.
    await page.getByRole("textbox", { name: "Text", exact: true }).fill("Short.");
    await page.getByRole("button", { name: "Speak", exact: true }).click();
    const next = await waitForState(page, ["done", "error"], 60_000);
    expect(next).toMatchObject({ state: "done", lastError: null });
    expect(next.speakStats!.audioSeconds).toBeLessThan(5);
    expect(speechTraffic(traffic, speaking)).toEqual([]);
    expect(consoleErrors).toEqual([]);
  }, 300_000);

  test("a phone-sized window with the page engine loaded has no horizontal scroll", async () => {
    const { page, consoleErrors } = await playgroundWithEngineLoaded();
    await page.setViewportSize({ width: 375, height: 740 });
    try {
      expect((await playback(page)).engineLoad.state).toBe("ready");
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      expect(overflow).toBeLessThanOrEqual(0);
      await page.screenshot({ path: join(ARTIFACTS, "browser-engine-phone.png"), fullPage: true });
      expect(consoleErrors).toEqual([]);
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 });
    }
  }, 180_000);

  test("switching back to this server speaks over the WebSocket again, with the server's voices", async () => {
    const { page, traffic, consoleErrors } = await playgroundWithEngineLoaded();
    expect((await playback(page)).engineLoad.state).toBe("ready");
    const before = mark(traffic);
    await page.getByRole("radio", { name: "This server" }).check();
    expect((await playback(page)).engine).toBe("server");
    expect(await page.getByRole("progressbar").isVisible()).toBe(false);
    await page.getByRole("textbox", { name: "Text", exact: true }).fill("Back on the server.");
    await page.getByRole("button", { name: "Speak", exact: true }).click();
    const done = await waitForState(page, ["done", "error"]);
    expect(done).toMatchObject({ state: "done", lastError: null, ranOn: { engine: "server" } });
    expect(traffic.sockets.slice(before.sockets)).toEqual(["/v1/audio/speech/stream"]);
    expect(consoleErrors).toEqual([]);
    await page.context().close();
    loadedPlayground = undefined;
  }, 180_000);

  test("Speak pressed while the model is still loading waits for the load, saying so, then plays", async () => {
    const { page, traffic, consoleErrors } = await openPlayground(pocket);
    await page.getByRole("textbox", { name: "Text", exact: true }).fill("Spoken once the model has loaded.");
    await page.getByRole("radio", { name: "This browser" }).check();
    const speaking = mark(traffic);
    // A person presses Speak at once: the model's files are still on their way (a fresh context has no cache).
    const loadStateAtClick = await page.evaluate(() => (window as unknown as { voxedgePlayground: PlaygroundState }).voxedgePlayground.engineLoad.state);
    expect(loadStateAtClick).toBe("loading");
    await page.getByRole("button", { name: "Speak", exact: true }).click();
    const waiting = await playback(page);
    if (waiting.engineLoad.state === "loading") {
      expect(waiting.state).toBe("waiting");
      expect(await page.getByRole("button", { name: "Waiting for the model to load…" }).isDisabled()).toBe(true);
      expect(await page.getByRole("status").filter({ hasText: "Loading" }).count()).toBe(1);
    }
    const done = await waitForState(page, ["done", "error"], LOAD_TIMEOUT_MS);
    expect(done.lastError).toBeNull();
    expect(done).toMatchObject({ state: "done", engineLoad: { state: "ready" }, ranOn: { engine: "browser" } });
    expect(done.samplesPlayed).toBeGreaterThan(0);
    expect(done.samplesPlayed).toBe(done.samplesReceived);
    expect(await page.getByRole("button", { name: "Speak", exact: true }).isEnabled()).toBe(true);
    expect(speechTraffic(traffic, speaking)).toEqual([]);
    expect(consoleErrors).toEqual([]);
    await page.context().close();
  }, 300_000);

  test("Stop while Speak waits for the model: nothing plays once it has loaded", async () => {
    const { page, consoleErrors } = await openPlayground(pocket);
    await page.getByRole("textbox", { name: "Text", exact: true }).fill("Never spoken.");
    await page.getByRole("radio", { name: "This browser" }).check();
    await page.getByRole("button", { name: "Speak", exact: true }).click();
    expect((await playback(page)).state).toBe("waiting");
    await page.getByRole("button", { name: "Stop", exact: true }).click();
    await page.waitForFunction(() => (window as unknown as { voxedgePlayground: PlaygroundState }).voxedgePlayground.engineLoad.state === "ready", null, { timeout: LOAD_TIMEOUT_MS, polling: 50 });
    await Bun.sleep(500);
    expect(await playback(page)).toMatchObject({ state: "idle", samplesReceived: 0, lastError: null });
    expect(consoleErrors).toEqual([]);
    await page.context().close();
  }, 300_000);

  test("the offline engine has no files to lend: the page says why, and Speak says the model is not loaded", async () => {
    const { page } = await openPlayground(classic);
    const failed = await chooseThisBrowser(page);
    expect(failed.engineLoad.state).toBe("error");
    expect(failed.engineLoad.error).toContain("runs only on the server");
    expect(await page.getByRole("alert").filter({ hasText: "runs only on the server" }).count()).toBe(1);
    await page.getByRole("button", { name: "Speak", exact: true }).click();
    const refused = await waitForState(page, ["error", "done"]);
    expect(refused.lastError).toContain("did not load in this page");
    expect(refused.samplesPlayed).toBe(0);
    await page.context().close();
  }, 120_000);
});
