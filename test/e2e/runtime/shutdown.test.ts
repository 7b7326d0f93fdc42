/**
 * SIGTERM on a real `bun src/main.ts serve` process with work in progress: readiness turns 503 while it
 * drains, new work is refused, a stream in progress completes (or, past --shutdown-grace, ends cleanly), a
 * WebSocket session finishes what it had flushed and closes 1001, voice uploads leave no partial files, and
 * the process exits 0.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeWav } from "../../../src/audio/wav.ts";
import { silentLogger } from "../../../src/log/logger.ts";
import { FolderVoiceStore } from "../../../src/voices/folder-store.ts";
import { BUN, startBunServer, startServerProcess } from "../../support/server-process.ts";
import { multipartBody, sine } from "../../support/uploads.ts";
import { RecordingSocket } from "../../support/ws-client.ts";

/** A hundred short sentences: the offline engine speaks one per step, so the stream lasts many steps. */
const LONG_TEXT = Array.from({ length: 100 }, (_, index) => `This is sentence number ${index + 1}.`).join(" ");

const streamRequest = (base: string) =>
  fetch(`${base}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: LONG_TEXT, stream_format: "audio", response_format: "pcm" }) });

async function readAll(reader: ReadableStreamDefaultReader<Uint8Array>, alreadyRead: number): Promise<{ bytes: number; ended: "done" | "error" }> {
  let bytes = alreadyRead;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { bytes, ended: "done" };
      bytes += value.byteLength;
    }
  } catch {
    return { bytes, ended: "error" };
  }
}

async function upload(base: string, name: string) {
  const audio = new File([encodeWav(sine(3, 220, 16000), 16000) as Uint8Array<ArrayBuffer>], `${name}.wav`, { type: "audio/wav" });
  const { body, contentType } = await multipartBody({ name, consent: `consent-${name}`, audio_sample: audio });
  return fetch(`${base}/v1/audio/voices`, { method: "POST", headers: { "content-type": contentType }, body: body as Uint8Array<ArrayBuffer> });
}

test("SIGTERM during a stream, a WebSocket session and uploads: 503 readiness while draining, the stream completes, the socket closes 1001, no partial voice files, exit 0", async () => {
  const speakerDir = mkdtempSync(join(tmpdir(), "voxedge-shutdown-"));
  const server = await startBunServer(speakerDir, ["--shutdown-grace", "60"]);
  // The whole stream, read without interruption, for comparison.
  const fullBytes = (await (await streamRequest(server.base)).arrayBuffer()).byteLength;

  const stream = await streamRequest(server.base);
  expect(stream.status).toBe(200);
  const reader = stream.body!.getReader();
  const first = await reader.read();
  expect(first.done).toBe(false);

  const socket = new RecordingSocket(`${server.base.replace("http", "ws")}/v1/audio/speech/stream`);
  await socket.opened;
  socket.send({ type: "session.config", voice: "default", stream_audio: true });
  socket.send({ type: "input.text", text: "Flushed before the signal. Spoken in full." });
  socket.send({ type: "input.done" });
  await socket.waitFor((received) => received.some((entry) => entry.kind === "binary"));

  // Uploads racing the signal: each is either stored whole or refused, never left half-written.
  const uploads = Array.from({ length: 4 }, (_, index) => upload(server.base, `racer-${index}`).then((response) => response.status));
  server.child.kill("SIGTERM");

  // Draining: readiness 503 (the stream above is still open, so the process is still serving), liveness 200.
  let ready: Response;
  do ready = await fetch(`${server.base}/health/ready`);
  while (ready.status === 200);
  expect(ready.status).toBe(503);
  expect(((await ready.json()) as { status: string }).status).toBe("draining");
  expect((await fetch(`${server.base}/health`)).status).toBe(200);
  const refused = await streamRequest(server.base);
  expect(refused.status).toBe(503);
  expect(((await refused.json()) as any).error).toMatchObject({ code: 503, type: "ServiceUnavailableError" });

  // The stream in progress runs to its end.
  const { bytes, ended } = await readAll(reader, first.value!.byteLength);
  expect(ended).toBe("done");
  expect(bytes).toBe(fullBytes);

  // The session speaks what was flushed, then the server goes away with 1001.
  await socket.closedPromise;
  expect(socket.closeCode).toBe(1001);
  const messages = socket.json().map((message) => message.type);
  expect(messages).toContain("session.done");
  expect(messages.filter((type) => type === "audio.done")).toHaveLength(2);

  expect(await server.exited).toBe(0);
  const statuses = await Promise.all(uploads.map((status) => status.catch(() => "no answer")));
  for (const status of statuses) expect([200, 503, "no answer"]).toContain(status);
  const files = readdirSync(speakerDir);
  expect(files.filter((file) => !file.endsWith(".safetensors"))).toEqual([]);
  // Every stored voice reads back whole, and every acknowledged one is there.
  const store = await FolderVoiceStore.open({ dir: speakerDir, maxVoices: 10, logger: silentLogger });
  expect(store.list().length).toBe(files.length);
  for (const voice of store.list()) expect((await store.loadAudio(voice.name))!.samples.length).toBe(3 * 16000);
  const acknowledged = statuses.map((status, index) => (status === 200 ? `racer-${index}` : undefined)).filter((name) => name !== undefined);
  expect(store.list().map((voice) => voice.name).sort()).toEqual(expect.arrayContaining(acknowledged));
}, 90_000);

test("past --shutdown-grace, a stream nobody reads is ended short and the process still exits 0", async () => {
  const speakerDir = mkdtempSync(join(tmpdir(), "voxedge-shutdown-"));
  const server = await startBunServer(speakerDir, ["--shutdown-grace", "0.5"]);
  const fullBytes = (await (await streamRequest(server.base)).arrayBuffer()).byteLength;
  const stream = await streamRequest(server.base);
  const reader = stream.body!.getReader();
  const first = await reader.read();
  server.child.kill("SIGTERM");
  // Not reading until the process has stopped: the grace runs out with the stream unfinished.
  expect(await server.exited).toBe(0);
  const { bytes, ended } = await readAll(reader, first.value!.byteLength);
  expect(bytes).toBeLessThan(fullBytes);
  expect(["done", "error"]).toContain(ended);
  expect(server.logLines().some((line) => line.message === "shutdown grace is over: ending the streams still running")).toBe(true);
}, 90_000);

test("`bun run voxedge serve` signalled as a terminal's Ctrl-C, systemd or docker stop do (the whole process group): one drain, the stream completes, exit 0", async () => {
  const speakerDir = mkdtempSync(join(tmpdir(), "voxedge-shutdown-"));
  // Through the package script: a `bun run` parent with the server as its child, both in one group.
  const server = await startServerProcess([BUN, "run", "voxedge", "serve", "--engine", "classic", "--host", "127.0.0.1", "--port", "0", "--speaker-dir", speakerDir, "--shutdown-grace", "60"], {}, 45_000, true);
  const fullBytes = (await (await streamRequest(server.base)).arrayBuffer()).byteLength;
  const stream = await streamRequest(server.base);
  const reader = stream.body!.getReader();
  const first = await reader.read();
  process.kill(-server.child.pid!, "SIGTERM");
  const { bytes, ended } = await readAll(reader, first.value!.byteLength);
  expect(ended).toBe("done");
  expect(bytes).toBe(fullBytes);
  expect(await server.exited).toBe(0);
  const log = server.logLines();
  expect(log.filter((line) => line.message === "shutting down")).toHaveLength(1);
  expect(log.some((line) => line.message === "second stop signal: ending the grace now")).toBe(false);
}, 90_000);
