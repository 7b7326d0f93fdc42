/**
 * A production install as a user makes one: the repository's files in a fresh folder, `npm ci --omit=dev`,
 * the server started with the Bun that install brought, and a FLAC, an MP3 and an Ogg-Opus voice uploaded.
 * Everything the server loads at run time must be a dependency: a decoder left in devDependencies makes its
 * upload format a 500 there, and a runtime left there leaves nothing to start the server with.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { encodeAudio, type ResponseFormat } from "../../../src/audio/encoders.ts";
import { multipartBody, sine } from "../../support/uploads.ts";
import { REPO_ROOT } from "../../support/repo.ts";

const REPO = REPO_ROOT;
// npm ci with a warm cache takes seconds; a cold one downloads ~700 MB of runtime packages.
const INSTALL_TIMEOUT_MS = 300_000;
const SERVER_START_TIMEOUT_MS = 60_000;

let scratch: string;
let install: ReturnType<typeof spawnSync>;
let server: ChildProcess | undefined;
let serverLog = "";
let baseUrl: string;

/** The files a clone has, as they are in the working tree (uncommitted edits and new files included). */
function copyRepository(target: string): void {
  const listed = spawnSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], { cwd: REPO, encoding: "utf8" });
  if (listed.status !== 0) throw new Error(`git ls-files failed: ${listed.stderr}`);
  for (const path of listed.stdout.split("\0")) {
    const source = join(REPO, path);
    // Listed but deleted in the working tree, or a submodule folder.
    if (!path || !existsSync(source) || !statSync(source).isFile()) continue;
    mkdirSync(dirname(join(target, path)), { recursive: true });
    copyFileSync(source, join(target, path));
  }
}

/** Starts the installed server on a port the kernel picks and resolves with its URL, read from the log. */
function startServer(cwd: string, speakerDir: string): Promise<string> {
  const bun = join(cwd, "node_modules", ".bin", "bun");
  const child = spawn(bun, ["src/main.ts", "serve", "--host", "127.0.0.1", "--port", "0", "--engine", "classic", "--speaker-dir", speakerDir], { cwd, env: { ...process.env, VOXEDGE_LOG_LEVEL: "info" } });
  server = child;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not listen within ${SERVER_START_TIMEOUT_MS} ms: ${serverLog}`)), SERVER_START_TIMEOUT_MS);
    const onOutput = (chunk: Buffer) => {
      serverLog += chunk;
      const listening = serverLog.match(/"message":"listening","url":"([^"]+)"/);
      if (listening) {
        clearTimeout(timer);
        resolve(listening[1]!);
      }
    };
    child.stdout!.on("data", onOutput);
    child.stderr!.on("data", onOutput);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`${bun} could not start: ${error.message}`));
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (code ${code}) before listening: ${serverLog}`));
    });
  });
}

async function waitForModel(): Promise<void> {
  for (;;) {
    const health = await fetch(`${baseUrl}/health`);
    if (health.status === 200) return;
    const body = await health.text();
    if (health.status !== 503 || !body.includes('"status":"loading"')) throw new Error(`/health answered ${health.status}: ${body}`);
    await Bun.sleep(100);
  }
}

async function uploadVoice(name: string, format: ResponseFormat, mimeType: string, sampleRateHz: number): Promise<{ status: number; body: string }> {
  const bytes = await encodeAudio(sine(2, 300, sampleRateHz), sampleRateHz, format);
  const { body, contentType } = await multipartBody({ name, consent: "packaging-test", audio_sample: new File([bytes as Uint8Array<ArrayBuffer>], `${name}.${format === "opus" ? "ogg" : format}`, { type: mimeType }) });
  const response = await fetch(`${baseUrl}/v1/audio/voices`, { method: "POST", headers: { "content-type": contentType }, body: body as Uint8Array<ArrayBuffer> });
  return { status: response.status, body: await response.text() };
}

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), "voxedge-production-install-"));
  const app = join(scratch, "app");
  copyRepository(app);
  install = spawnSync("npm", ["ci", "--omit=dev", "--no-audit", "--no-fund", "--prefer-offline"], { cwd: app, encoding: "utf8", timeout: INSTALL_TIMEOUT_MS });
  if (install.status !== 0) return;
  baseUrl = await startServer(app, join(scratch, "speakers"));
  await waitForModel();
}, INSTALL_TIMEOUT_MS + SERVER_START_TIMEOUT_MS * 2);

afterAll(() => {
  server?.kill();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe("a production install (npm ci --omit=dev)", () => {
  test("installs from the lock file", () => {
    expect({ status: install.status, signal: install.signal, output: install.status === 0 ? "" : `${install.stdout}\n${install.stderr}` }).toEqual({ status: 0, signal: null, output: "" });
  });

  test("has none of the devDependencies", () => {
    const { devDependencies } = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { devDependencies: Record<string, string> };
    expect(Object.keys(devDependencies)).toContain("typescript");
    const installed = Object.keys(devDependencies).filter((name) => existsSync(join(scratch, "app", "node_modules", name)));
    expect(installed).toEqual([]);
  });

  test("serves, and accepts a FLAC, an MP3 and an Ogg-Opus voice", async () => {
    expect(baseUrl).toBeDefined();
    const uploads = {
      flac: await uploadVoice("packaged-flac", "flac", "audio/flac", 24000),
      mp3: await uploadVoice("packaged-mp3", "mp3", "audio/mpeg", 24000),
      opus: await uploadVoice("packaged-opus", "opus", "audio/ogg", 48000),
    };
    const statuses = Object.fromEntries(Object.entries(uploads).map(([format, { status, body }]) => [format, status === 200 ? 200 : `${status} ${body}`]));
    expect(statuses).toEqual({ flac: 200, mp3: 200, opus: 200 });
    const listed = (await (await fetch(`${baseUrl}/v1/audio/voices`)).json()) as { uploaded_voices: { name: string; mime_type: string }[] };
    expect(listed.uploaded_voices.map(({ name, mime_type }) => `${name} ${mime_type}`).sort()).toEqual(["packaged-flac audio/flac", "packaged-mp3 audio/mpeg", "packaged-opus audio/ogg"]);
  });
});
