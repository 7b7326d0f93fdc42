/**
 * Voices survive a restart and a kill -9: real server processes over a shared speaker folder. The server
 * is started as `bun src/main.ts` itself, not through `bun run`, so the signal reaches the server process.
 */
import { expect, test } from "bun:test";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeWav } from "../../../src/audio/wav.ts";
import { silentLogger } from "../../../src/log/logger.ts";
import { FolderVoiceStore } from "../../../src/voices/folder-store.ts";
import { multipartBody, sine } from "../../support/uploads.ts";
import { REPO_ROOT } from "../../support/repo.ts";

const ROOT = REPO_ROOT;
const BUN = join(ROOT, "node_modules", ".bin", "bun");

interface RunningServer {
  child: ChildProcess;
  base: string;
}

async function startServer(speakerDir: string): Promise<RunningServer> {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const child = spawn(BUN, ["src/main.ts", "serve", "--port", String(port), "--host", "127.0.0.1", "--speaker-dir", speakerDir, "--log-level", "warn"], { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr!.on("data", (chunk) => (log += chunk));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited: ${log}`);
    if ((await fetch(`${base}/health`).catch(() => undefined))?.status === 200) return { child, base };
    if (Date.now() > deadline) throw new Error(`server not healthy: ${log}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function stopServer(server: RunningServer, signal: NodeJS.Signals): Promise<void> {
  const exited = new Promise((resolve) => server.child.once("exit", resolve));
  server.child.kill(signal);
  await exited;
}

async function uploadVoice(base: string, name: string, seconds: number, sampleRateHz: number) {
  const audio = new File([encodeWav(sine(seconds, 200 + name.length, sampleRateHz), sampleRateHz) as Uint8Array<ArrayBuffer>], `${name}.wav`, { type: "audio/wav" });
  const { body, contentType } = await multipartBody({ name, consent: `consent-${name}`, audio_sample: audio, ref_text: `text of ${name}` });
  return fetch(`${base}/v1/audio/voices`, { method: "POST", headers: { "content-type": contentType }, body });
}

async function listVoices(base: string) {
  return ((await (await fetch(`${base}/v1/audio/voices`)).json()) as any).uploaded_voices as any[];
}

test("uploaded voices are restored after a restart with the same metadata", async () => {
  const speakerDir = mkdtempSync(join(tmpdir(), "voxedge-persist-"));
  const first = await startServer(speakerDir);
  for (const name of ["Ada", "Grace", "Linus"]) expect((await uploadVoice(first.base, name, 2, 16000)).status).toBe(200);
  const before = await listVoices(first.base);
  await stopServer(first, "SIGTERM");

  const second = await startServer(speakerDir);
  try {
    expect(await listVoices(second.base)).toEqual(before);
    expect(before.map((voice) => voice.name)).toEqual(["Ada", "Grace", "Linus"]);
    // created_at keeps increasing above the restored ones.
    await uploadVoice(second.base, "Later", 2, 16000);
    const after = await listVoices(second.base);
    expect(after.at(-1)!.created_at).toBeGreaterThan(before.at(-1)!.created_at);
  } finally {
    await stopServer(second, "SIGTERM");
  }
}, 90_000);

test("kill -9 during 50 concurrent uploads: every acknowledged voice survives, no partial or orphan files", async () => {
  const speakerDir = mkdtempSync(join(tmpdir(), "voxedge-kill-"));
  const server = await startServer(speakerDir);
  const acknowledged: string[] = [];
  let killed: Promise<void> | undefined;
  const names = Array.from({ length: 50 }, (_, i) => `voice-${i}`);
  await Promise.all(
    names.map(async (name) => {
      // 20 s at 48 kHz: ~1.9 MB each, so the kill lands while many uploads are still in flight.
      const response = await uploadVoice(server.base, name, 20, 48000).catch(() => undefined);
      if (response?.status === 200) {
        acknowledged.push(name);
        if (acknowledged.length === 3) killed = stopServer(server, "SIGKILL");
      }
    }),
  );
  await killed;
  expect(acknowledged.length).toBeGreaterThanOrEqual(3);
  expect(acknowledged.length).toBeLessThan(50);

  const restarted = await startServer(speakerDir);
  try {
    const restored = (await listVoices(restarted.base)).map((voice) => voice.name);
    for (const name of acknowledged) expect(restored).toContain(name);
    // Only finished voice files remain: one per restored voice, no temp files.
    const files = readdirSync(speakerDir);
    expect(files.filter((file) => !file.endsWith(".safetensors"))).toEqual([]);
    expect(files.length).toBe(restored.length);
  } finally {
    await stopServer(restarted, "SIGTERM");
  }
  // Every restored voice reads back whole.
  const store = await FolderVoiceStore.open({ dir: speakerDir, maxVoices: 100, logger: silentLogger });
  for (const voice of store.list()) {
    const loaded = await store.loadAudio(voice.name);
    expect(loaded!.samples.length).toBe(20 * 48000);
    expect(loaded!.voice.ref_text).toBe(`text of ${voice.name}`);
  }
}, 120_000);
