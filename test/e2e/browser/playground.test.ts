/**
 * The playground page in a real browser (Debian's Chromium driven by playwright-core), found by role and
 * label as a screen reader would: speaking through the WebSocket route into the AudioWorklet, Stop aborting
 * the server's generation, uploads (good, bad, recorded from a fake microphone) and the phone-sized layout.
 * Screenshots go to artifacts/playground/.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DEFAULT_CHROMIUM, launchChromium } from "../../../src/chromium/launch.ts";
import { type Browser, type Page } from "playwright-core";
import { createClassicModel } from "../../../src/models/classic/model.ts";
import { PocketModel } from "../../../src/models/pocket/model.ts";
import { silentLogger } from "../../../src/log/logger.ts";
import { decodeWav } from "../../../src/audio/wav.ts";
import { startTestServer, type TestServer } from "../../support/server.ts";
import { eventually } from "../../support/eventually.ts";
import { fixtureBundle } from "../../models/pocket/bundle-fixture.ts";
import { wavFile } from "../../support/uploads.ts";
import { REPO_ROOT } from "../../support/repo.ts";
import { scrapeMetrics, sumOfSamples } from "../../support/metrics.ts";
import { ToneModel } from "../../support/tone-model.ts";

const ARTIFACTS = join(REPO_ROOT, "artifacts", "playground");

const sentences = (count: number) => Array.from({ length: count }, (_, index) => `Sentence ${index + 1} is spoken as it streams.`).join(" ");

interface PlaygroundState {
  state: "idle" | "connecting" | "playing" | "done" | "error";
  samplesPlayed: number;
  firstAudioMs: number | null;
  underruns: number;
  lastError: string | null;
  samplesPlayedAtSessionDone: number | null;
  samplesReceived: number;
  peakLevel: number;
}

let classic: TestServer;
let pocket: TestServer;
let pocketModel: PocketModel;
let browser: Browser;
beforeAll(async () => {
  if (!existsSync(DEFAULT_CHROMIUM)) throw new Error("the browser tests need Debian's Chromium: apt-get install chromium");
  mkdirSync(ARTIFACTS, { recursive: true });
  classic = await startTestServer(await createClassicModel());
  pocketModel = await PocketModel.load(fixtureBundle(), {}, { logger: silentLogger });
  pocket = await startTestServer(pocketModel);
  // No sandbox as root, no background traffic to a closed network; a fake microphone needing no prompt.
  browser = await launchChromium({ fakeMicrophone: true });
});
afterAll(async () => {
  await browser?.close();
  await classic?.stop();
  await pocket?.stop();
  await pocketModel?.close();
});

interface OpenedPage {
  page: Page;
  consoleErrors: string[];
}

async function openPlayground(server: TestServer, viewport = { width: 1280, height: 900 }): Promise<OpenedPage> {
  const context = await browser.newContext({ viewport, acceptDownloads: true });
  const page = await context.newPage();
  const consoleErrors: string[] = [];
  page.on("pageerror", (error) => consoleErrors.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error") consoleErrors.push(message.text());
  });
  await page.goto(`${server.url}/`);
  await page.waitForFunction(() => document.querySelectorAll("#voice option").length > 1);
  return { page, consoleErrors };
}

const playback = (page: Page) => page.evaluate(() => ({ ...(window as unknown as { voxedgePlayground: PlaygroundState }).voxedgePlayground }) as PlaygroundState);

async function waitForState(page: Page, states: PlaygroundState["state"][], timeout = 60_000): Promise<PlaygroundState> {
  await page.waitForFunction((wanted) => wanted.includes((window as unknown as { voxedgePlayground: PlaygroundState }).voxedgePlayground.state), states, { timeout, polling: 50 });
  return playback(page);
}

const ABORTED_WEBSOCKET_STREAMS = /^voxedge_streams_total\{(?=.*mode="websocket")(?=.*outcome="aborted")/;

async function metric(server: TestServer, pattern: RegExp): Promise<number> {
  return sumOfSamples(await scrapeMetrics(server.url), pattern);
}

describe("the playground page", () => {
  test("loads with no console errors, every control found by role and label, numbers empty", async () => {
    const { page, consoleErrors } = await openPlayground(classic);
    await expect(page.getByRole("textbox", { name: "Text", exact: true }).isVisible()).resolves.toBe(true);
    for (const name of ["Speak", "Stop", "Upload"]) expect(await page.getByRole("button", { name, exact: true }).count()).toBe(1);
    expect(await page.getByLabel("Voice sample", { exact: true }).getAttribute("type")).toBe("file");
    for (const name of ["Voice name", "Consent ID"]) expect(await page.getByRole("textbox", { name, exact: true }).count()).toBe(1);
    expect(await page.getByRole("checkbox", { name: /consent/i }).count()).toBe(1);
    expect(await page.getByRole("button", { name: "Stop", exact: true }).isDisabled()).toBe(true);
    expect(await page.getByRole("combobox", { name: "Voice", exact: true }).locator("option").allTextContents()).toEqual(expect.arrayContaining(["default", "slt"]));
    expect(await page.textContent("#model")).toContain("offline classic fallback");
    // The API panel is written for this very server.
    expect(await page.textContent("#snippet-curl")).toContain(`${classic.url}/v1/audio/speech`);
    expect(await page.textContent("#snippet-websocket")).toContain(`${classic.url.replace("http", "ws")}/v1/audio/speech/stream`);
    expect(await playback(page)).toMatchObject({ state: "idle", samplesPlayed: 0, firstAudioMs: null, underruns: 0, lastError: null });
    await page.screenshot({ path: join(ARTIFACTS, "first-load.png"), fullPage: true });
    expect(consoleErrors).toEqual([]);
    // Tab order reaches Speak from the text box: the page works from the keyboard.
    await page.getByRole("textbox", { name: "Text", exact: true }).focus();
    let reachedSpeak = false;
    for (let step = 0; step < 12 && !reachedSpeak; step += 1) {
      await page.keyboard.press("Tab");
      reachedSpeak = await page.evaluate(() => document.activeElement?.id === "speak");
    }
    expect(reachedSpeak).toBe(true);
    await page.context().close();
  }, 60_000);

  test("Speak plays text typed at a language model's pace through the worklet while it is still being made, gapless, non-silent, and downloads as WAV", async () => {
    const { page, consoleErrors } = await openPlayground(classic);
    await page.getByRole("textbox", { name: "Text", exact: true }).fill(sentences(4));
    await page.getByRole("checkbox", { name: /language model's pace/ }).check();
    await page.getByRole("button", { name: "Speak", exact: true }).click();
    const playing = await waitForState(page, ["playing", "error"]);
    expect(playing.state).toBe("playing");
    await page.waitForFunction(() => document.querySelector("#sentences li[aria-current='true']") !== null);
    await page.screenshot({ path: join(ARTIFACTS, "speaking.png"), fullPage: true });
    const done = await waitForState(page, ["done", "error"], 90_000);
    expect(done.state).toBe("done");
    expect(done.lastError).toBeNull();
    expect(done.firstAudioMs).toBeGreaterThan(0);
    // Playback had begun before the server had finished the utterance.
    expect(done.samplesPlayedAtSessionDone).toBeGreaterThan(0);
    // Everything received was played, in one piece.
    expect(done.samplesPlayed).toBe(done.samplesReceived);
    expect(done.underruns).toBe(0);
    expect(await page.locator("#sentences li").count()).toBe(4);

    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Download WAV" }).click()]);
    const wav = decodeWav(new Uint8Array(readFileSync((await download.path())!)));
    const samples = wav.channels[0]!;
    expect(wav.channels.length).toBe(1);
    expect(samples.length).toBe(done.samplesReceived);
    const rms = Math.sqrt(samples.reduce((sum, value) => sum + value * value, 0) / samples.length);
    expect(rms).toBeGreaterThan(0.01);
    // And what the worklet put out on the way to the speakers was not silence either.
    expect(done.peakLevel).toBeGreaterThan(0.05);
    expect(consoleErrors).toEqual([]);
    await page.context().close();
  }, 120_000);

  test("Stop mid-utterance ends playback and the server's generation (its metrics count the abort)", async () => {
    const abortedBefore = await metric(classic, ABORTED_WEBSOCKET_STREAMS);
    const { page, consoleErrors } = await openPlayground(classic);
    await page.getByRole("textbox", { name: "Text", exact: true }).fill(sentences(72));
    await page.getByRole("button", { name: "Speak", exact: true }).click();
    await waitForState(page, ["playing"]);
    // A long text sent at once: the worklet is already playing while the server is still making it.
    await page.waitForFunction(() => (window as unknown as { voxedgePlayground: PlaygroundState }).voxedgePlayground.samplesPlayed > 0, null, { polling: 20 });
    const midway = await playback(page);
    expect(midway.samplesPlayedAtSessionDone).toBeNull();
    expect(midway.samplesPlayed).toBeLessThan(midway.samplesReceived);
    await page.getByRole("button", { name: "Stop", exact: true }).click();
    const stopped = await waitForState(page, ["done"]);
    expect(stopped.samplesPlayedAtSessionDone).toBeNull();
    await eventually("the server counts the aborted stream", async () => ((await metric(classic, ABORTED_WEBSOCKET_STREAMS)) > abortedBefore ? true : undefined));
    // The sentences still queued were never generated: far fewer started than the text holds.
    expect(await page.locator("#sentences li").count()).toBeLessThan(72);
    const playedThen = (await playback(page)).samplesPlayed;
    await Bun.sleep(300);
    expect((await playback(page)).samplesPlayed).toBe(playedThen);
    expect(consoleErrors).toEqual([]);
    await page.context().close();
  }, 90_000);

  test("a bad upload (a text file named .wav) shows the server's own message", async () => {
    const { page } = await openPlayground(classic);
    const notAudio = { name: "notes.wav", mimeType: "audio/wav", buffer: Buffer.from("these are my notes, not audio\n".repeat(20)) };
    const form = new FormData();
    form.append("name", "notes");
    form.append("consent", "consent-1");
    form.append("audio_sample", new File([notAudio.buffer], notAudio.name, { type: notAudio.mimeType }));
    const direct = await fetch(`${classic.url}/v1/audio/voices`, { method: "POST", body: form });
    expect(direct.status).toBe(400);
    const serverMessage = ((await direct.json()) as { error: { message: string } }).error.message;

    await page.getByLabel("Voice sample", { exact: true }).setInputFiles(notAudio);
    await page.getByRole("textbox", { name: "Voice name", exact: true }).fill("notes");
    await page.getByRole("textbox", { name: "Consent ID", exact: true }).fill("consent-1");
    await page.getByRole("checkbox", { name: /consent/i }).check();
    await page.getByRole("button", { name: "Upload", exact: true }).click();
    await expect(page.getByRole("alert").filter({ hasText: serverMessage }).waitFor()).resolves.toBeUndefined();
    expect(await page.locator("#voice-list li").count()).toBe(0);
    await page.context().close();
  }, 60_000);

  test("upload needs the consent box ticked, and says so", async () => {
    const { page } = await openPlayground(classic);
    await page.getByLabel("Voice sample", { exact: true }).setInputFiles({ name: "ada.wav", mimeType: "audio/wav", buffer: Buffer.from(await wavFile(2).arrayBuffer()) });
    await page.getByRole("textbox", { name: "Voice name", exact: true }).fill("ada");
    await page.getByRole("textbox", { name: "Consent ID", exact: true }).fill("consent-2");
    await page.getByRole("button", { name: "Upload", exact: true }).click();
    await expect(page.getByRole("alert").filter({ hasText: "consent" }).waitFor()).resolves.toBeUndefined();
    const listing = (await (await fetch(`${classic.url}/v1/audio/voices`)).json()) as { uploaded_voices: unknown[] };
    expect(listing.uploaded_voices).toEqual([]);
    await page.context().close();
  }, 60_000);

  test("an uploaded WAV voice appears in the list, is selected, speaks, and can be deleted", async () => {
    const { page, consoleErrors } = await openPlayground(pocket);
    await page.getByLabel("Voice sample", { exact: true }).setInputFiles({ name: "ada.wav", mimeType: "audio/wav", buffer: Buffer.from(await wavFile(2, 220).arrayBuffer()) });
    await page.getByRole("textbox", { name: "Voice name", exact: true }).fill("Ada");
    await page.getByRole("textbox", { name: "Consent ID", exact: true }).fill("rec-0042");
    await page.getByRole("checkbox", { name: /consent/i }).check();
    await page.getByRole("button", { name: "Upload", exact: true }).click();
    await page.getByRole("button", { name: "Delete Ada" }).waitFor();
    expect(await page.getByRole("combobox", { name: "Voice", exact: true }).inputValue()).toBe("ada");
    const uploaded = pocket.voices.list().map((voice) => voice.name);
    expect(uploaded).toContain("Ada");

    await page.getByRole("textbox", { name: "Text", exact: true }).fill("Hello in my own voice.");
    await page.getByRole("button", { name: "Speak", exact: true }).click();
    await waitForState(page, ["playing", "error"]);
    await page.waitForFunction(() => (window as unknown as { voxedgePlayground: PlaygroundState }).voxedgePlayground.samplesPlayed > 4800, null, { timeout: 30_000 });
    const speaking = await playback(page);
    expect(speaking.lastError).toBeNull();
    await page.getByRole("button", { name: "Stop", exact: true }).click();
    await waitForState(page, ["done"]);

    await page.getByRole("button", { name: "Delete Ada" }).click();
    await page.getByRole("button", { name: "Delete Ada" }).waitFor({ state: "detached" });
    expect(pocket.voices.list().map((voice) => voice.name)).not.toContain("Ada");
    expect(consoleErrors).toEqual([]);
    await page.context().close();
  }, 90_000);

  test("a voice recorded from the microphone (MediaRecorder, webm/opus) uploads and clones without uploading", async () => {
    const { page, consoleErrors } = await openPlayground(pocket);
    await page.getByRole("button", { name: "Record", exact: true }).click();
    await page.getByRole("button", { name: "Finish recording" }).waitFor();
    await Bun.sleep(2_000);
    await page.getByRole("button", { name: "Finish recording" }).click();
    await page.waitForFunction(() => /recording\.webm/.test(document.getElementById("sample-note")?.textContent ?? ""));

    // Cloning from the clip itself: ref_audio as a data URL in session.config.
    await page.getByRole("checkbox", { name: /chosen clip/ }).check();
    await page.getByRole("textbox", { name: "Text", exact: true }).fill("Cloned on the fly.");
    await page.getByRole("button", { name: "Speak", exact: true }).click();
    await page.waitForFunction(() => (window as unknown as { voxedgePlayground: PlaygroundState }).voxedgePlayground.samplesPlayed > 0, null, { timeout: 30_000 });
    expect((await playback(page)).lastError).toBeNull();
    await page.getByRole("button", { name: "Stop", exact: true }).click();
    await waitForState(page, ["done"]);

    await page.getByRole("textbox", { name: "Voice name", exact: true }).fill("mic");
    await page.getByRole("textbox", { name: "Consent ID", exact: true }).fill("rec-mic");
    await page.getByRole("checkbox", { name: /consent/i }).check();
    await page.getByRole("button", { name: "Upload", exact: true }).click();
    await page.getByRole("button", { name: "Delete mic" }).waitFor();
    expect(pocket.voices.list().find((voice) => voice.name === "mic")?.mime_type).toContain("webm");
    expect(consoleErrors).toEqual([]);
    await page.context().close();
  }, 90_000);

  test("speaking an uploaded voice on the offline engine shows the server's refusal as it words it", async () => {
    const form = new FormData();
    form.append("name", "bea");
    form.append("consent", "consent-3");
    form.append("audio_sample", wavFile(2));
    expect((await fetch(`${classic.url}/v1/audio/voices`, { method: "POST", body: form })).status).toBe(200);
    const { page } = await openPlayground(classic);
    expect(await page.getByRole("checkbox", { name: /chosen clip/ }).isDisabled()).toBe(true);
    await page.getByRole("combobox", { name: "Voice", exact: true }).selectOption("bea");
    await page.getByRole("button", { name: "Speak", exact: true }).click();
    const failed = await waitForState(page, ["error", "done"]);
    expect(failed.state).toBe("error");
    expect(failed.lastError).toContain("cannot clone voices");
    expect(await page.getByRole("alert").filter({ hasText: failed.lastError! }).count()).toBe(1);
    expect(failed.samplesPlayed).toBe(0);
    await fetch(`${classic.url}/v1/audio/voices/bea`, { method: "DELETE" });
    await page.context().close();
  }, 30_000);

  test("a server at capacity: the page says it is busy, tries again after the server's retry_after, and then speaks", async () => {
    // One place, held by a long raw stream; no queueing: the page's speech is refused (429, close 1013).
    const busy = await startTestServer(new ToneModel({ frameDelayMs: 20, framesPerChar: 4 }), { flags: { "max-streams": "1", "max-queue-wait": "0" } });
    try {
      const holder = new AbortController();
      const held = await fetch(`${busy.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "x".repeat(40), stream_format: "audio", response_format: "pcm" }), signal: holder.signal });
      expect(held.status).toBe(200);
      const { page, consoleErrors } = await openPlayground(busy);
      await page.getByRole("textbox", { name: "Text", exact: true }).fill("Hello there.");
      await page.getByRole("button", { name: "Speak", exact: true }).click();
      await page.waitForFunction(() => (window as unknown as { voxedgePlayground: { busyRetries: number } }).voxedgePlayground.busyRetries >= 1, null, { polling: 20, timeout: 15_000 });
      expect(await page.getByText(/The server is busy; trying again in \d+ s/).count()).toBe(1);
      // The place frees: the next try speaks.
      holder.abort();
      await held.body?.cancel().catch(() => {});
      const spoken = await waitForState(page, ["done", "error"], 30_000);
      expect(spoken.state).toBe("done");
      expect(spoken.samplesReceived).toBeGreaterThan(0);
      expect(spoken.lastError).toBeNull();
      expect(consoleErrors).toEqual([]);
      await page.context().close();
    } finally {
      await busy.stop();
    }
  }, 60_000);

  test("a server that asks for a key: the page says so, opens the key field, and with the key speaks and uploads", async () => {
    const keyed = await startTestServer(await createClassicModel(), { flags: { "api-key": "sk-playground" } });
    try {
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(`${keyed.url}/`);
      await page.waitForFunction(() => /API key/.test(document.getElementById("model")?.textContent ?? ""));
      const keyField = page.getByLabel("API key", { exact: true });
      expect(await keyField.isVisible()).toBe(true);
      await keyField.fill("sk-playground");
      await keyField.press("Enter");
      await page.waitForFunction(() => document.querySelectorAll("#voice option").length > 1);
      expect(await page.textContent("#model")).toContain("offline classic fallback");
      expect(await page.textContent("#snippet-curl")).toContain("$VOXEDGE_API_KEY");
      expect(await page.textContent("#snippet-curl")).not.toContain("sk-playground");

      await page.getByRole("textbox", { name: "Text", exact: true }).fill("With the key.");
      await page.getByRole("button", { name: "Speak", exact: true }).click();
      const done = await waitForState(page, ["done", "error"]);
      expect(done).toMatchObject({ state: "done", lastError: null });
      expect(done.samplesPlayed).toBeGreaterThan(0);

      await page.getByLabel("Voice sample", { exact: true }).setInputFiles({ name: "kay.wav", mimeType: "audio/wav", buffer: Buffer.from(await wavFile(2).arrayBuffer()) });
      await page.getByRole("textbox", { name: "Voice name", exact: true }).fill("kay");
      await page.getByRole("textbox", { name: "Consent ID", exact: true }).fill("consent-k");
      await page.getByRole("checkbox", { name: /consent/i }).check();
      await page.getByRole("button", { name: "Upload", exact: true }).click();
      await page.getByRole("button", { name: "Delete kay" }).waitFor();
      await context.close();
    } finally {
      await keyed.stop();
    }
  }, 60_000);

  test("a phone-sized window has no horizontal scroll", async () => {
    const { page, consoleErrors } = await openPlayground(classic, { width: 375, height: 740 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(ARTIFACTS, "phone.png"), fullPage: true });
    expect(consoleErrors).toEqual([]);
    await page.context().close();
  }, 30_000);
});
