/**
 * The Deno Deploy-style entry, run as the README says: `deno serve -A src/deploy.ts`, configured from the
 * environment, on the offline engine. It answers speech and a WebSocket session, and a SIGTERM drains it
 * to exit 0.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeWav } from "../src/audio/wav.ts";
import { DENO, startServerProcess, type ServerProcess } from "./support/server-process.ts";
import { RecordingSocket } from "./support/ws-client.ts";

let server: ServerProcess;
beforeAll(async () => {
  const speakerDir = mkdtempSync(join(tmpdir(), "voxedge-deploy-"));
  server = await startServerProcess([DENO, "serve", "-A", "--host", "127.0.0.1", "--port", "0", "src/deploy.ts"], { VOXEDGE_ENGINE: "classic", SPEAKER_SAMPLES_DIR: speakerDir, VOXEDGE_API_KEY: "sk-deploy" });
}, 60_000);
afterAll(async () => {
  if (server.child.exitCode === null) await server.stop("SIGKILL");
});

test("POST /v1/audio/speech answers a WAV of speech, with the key from VOXEDGE_API_KEY", async () => {
  const refused = await fetch(`${server.base}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "No key." }) });
  expect(refused.status).toBe(401);
  const response = await fetch(`${server.base}/v1/audio/speech`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer sk-deploy", "x-request-id": "deploy-check-1" },
    body: JSON.stringify({ input: "Served by deno serve.", response_format: "wav" }),
  });
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toBe("audio/wav");
  expect(response.headers.get("x-request-id")).toBe("deploy-check-1");
  const wav = decodeWav(new Uint8Array(await response.arrayBuffer()));
  expect(wav.channels[0]!.length / wav.sampleRateHz).toBeGreaterThan(0.5);
});

test("a WebSocket session on /v1/audio/speech/stream (key as ?api_key=) speaks", async () => {
  const socket = new RecordingSocket(`${server.base.replace("http", "ws")}/v1/audio/speech/stream?api_key=sk-deploy`);
  await socket.opened;
  socket.send({ type: "session.config", voice: "default", stream_audio: true });
  socket.send({ type: "input.text", text: "Hello over a socket. " });
  socket.send({ type: "input.done" });
  await socket.waitFor((received) => received.some((entry) => entry.kind === "json" && entry.value.type === "session.done"));
  const audioBytes = socket.received.filter((entry) => entry.kind === "binary").reduce((sum, entry) => sum + (entry as { bytes: Uint8Array }).bytes.byteLength, 0);
  expect(audioBytes).toBeGreaterThan(8000);
  expect(socket.json().map((message) => message.type)).toContain("audio.done");
  socket.close();
  await socket.closedPromise;
});

test("SIGTERM: it drains and exits 0", async () => {
  expect(await server.stop("SIGTERM")).toBe(0);
  expect(server.logLines().some((line) => line.message === "stopped")).toBe(true);
});
