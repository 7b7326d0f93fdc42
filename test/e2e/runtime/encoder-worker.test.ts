/**
 * The encoder worker (node:worker_threads started from a .ts URL) in a real server process under each runtime
 * the server runs on: every file codec and a streamed mp3 come back whole, and SIGTERM afterwards still exits 0
 * (an idle worker does not hold the process).
 */
import { expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DENO, startBunServer, startServerProcess, type ServerProcess } from "../../support/server-process.ts";

const FILE_FORMATS = ["mp3", "opus", "aac", "flac", "wav"] as const;

async function speak(server: ServerProcess, format: string, stream: boolean): Promise<{ status: number; bytes: Uint8Array; body: string }> {
  const response = await fetch(`${server.base}/v1/audio/speech`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input: "Encoded off the main thread.", response_format: format, ...(stream ? { stream_format: "audio" } : {}) }),
  });
  const bytes = new Uint8Array(await response.arrayBuffer());
  return { status: response.status, bytes, body: response.status === 200 ? "" : new TextDecoder().decode(bytes) };
}

async function checkEncodingAndExit(server: ServerProcess): Promise<void> {
  try {
    for (const format of FILE_FORMATS) {
      const file = await speak(server, format, false);
      expect({ format, status: file.status, body: file.body }).toEqual({ format, status: 200, body: "" });
      expect(file.bytes.byteLength).toBeGreaterThan(1000);
    }
    const streamed = await speak(server, "mp3", true);
    expect(streamed.status).toBe(200);
    expect(streamed.bytes.byteLength).toBeGreaterThan(1000);
  } catch (error) {
    server.child.kill("SIGKILL");
    throw error;
  }
  expect(await server.stop("SIGTERM")).toBe(0);
}

test("bun: files in every codec and an mp3 stream are encoded by the worker, then SIGTERM exits 0", async () => {
  const server = await startBunServer(mkdtempSync(join(tmpdir(), "voxedge-encoder-bun-")));
  await checkEncodingAndExit(server);
}, 60_000);

test("deno serve: files in every codec and an mp3 stream are encoded by the worker, then SIGTERM exits 0", async () => {
  const speakerDir = mkdtempSync(join(tmpdir(), "voxedge-encoder-deno-"));
  const server = await startServerProcess([DENO, "serve", "-A", "--host", "127.0.0.1", "--port", "0", "src/deploy.ts"], { VOXEDGE_ENGINE: "classic", SPEAKER_SAMPLES_DIR: speakerDir, VOXEDGE_HOST: "127.0.0.1" });
  await checkEncodingAndExit(server);
}, 60_000);
