/**
 * onnxruntime-web's .wasm under /playground/ort (14-28 MB each, keyless) costs the server nothing per
 * request it does not send: many requests whose answers are never read keep its memory flat and /health
 * prompt, and HEAD answers from the file's size without reading it. Before, each GET or HEAD read the whole
 * file and copied it: 100 unread requests added 3 GB.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, statSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onnxRuntimeFilePath } from "../../../src/browser/build.ts";
import { startBunServer, type ServerProcess } from "../../support/server-process.ts";

const WASM = "ort-wasm-simd-threaded.jsep.wasm";
const UNREAD_REQUESTS = 40;
const MiB = 2 ** 20;

let server: ServerProcess;
beforeAll(async () => {
  server = await startBunServer(mkdtempSync(join(tmpdir(), "voxedge-playground-files-")));
});
afterAll(() => server.stop());

const residentBytes = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${server.child.pid}/status`, "utf8"))![1]) * 1024;

/** A request on its own connection whose answer is never read: the socket is paused from the start. */
async function unreadRequest(method: "GET" | "HEAD"): Promise<Socket> {
  const { hostname, port } = new URL(server.base);
  const socket = connect(Number(port), hostname);
  socket.pause();
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  socket.write(`${method} /playground/ort/${WASM} HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`);
  return socket;
}

for (const method of ["GET", "HEAD"] as const) {
  test(`${UNREAD_REQUESTS} unread ${method}s of a ${WASM}: the server's memory stays flat and /health answers`, async () => {
    const fileBytes = statSync(onnxRuntimeFilePath(WASM)).size;
    expect(fileBytes).toBeGreaterThan(20 * MiB);
    await fetch(`${server.base}/health`);
    const before = residentBytes();
    const sockets = await Promise.all(Array.from({ length: UNREAD_REQUESTS }, () => unreadRequest(method)));
    try {
      // Time for every request to reach its handler (one read whole took ~50 ms on 2 busy cores).
      await new Promise((resolve) => setTimeout(resolve, 3000));
      const startedMs = performance.now();
      expect((await fetch(`${server.base}/health`)).status).toBe(200);
      const healthMs = performance.now() - startedMs;
      const grownBytes = residentBytes() - before;
      console.log(`${method}: server RSS +${(grownBytes / MiB).toFixed(0)} MiB over ${UNREAD_REQUESTS} unread requests; /health ${healthMs.toFixed(0)} ms`);
      // Read whole and copied, 40 requests of this file held over 1 GB; the socket buffers take a few MiB.
      expect(grownBytes).toBeLessThan(256 * MiB);
      expect(healthMs).toBeLessThan(2000);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  }, 60_000);
}

test("HEAD answers with the file's size, validators and no body; GET sends the file whole", async () => {
  const path = onnxRuntimeFilePath(WASM);
  const head = await fetch(`${server.base}/playground/ort/${WASM}`, { method: "HEAD" });
  expect(head.status).toBe(200);
  expect(head.headers.get("content-length")).toBe(String(statSync(path).size));
  expect(head.headers.get("content-type")).toBe("application/wasm");
  const etag = head.headers.get("etag")!;
  expect(etag).toMatch(/^W\/"[0-9a-f]+-[0-9a-f]+"$/);
  expect((await head.arrayBuffer()).byteLength).toBe(0);
  const get = await fetch(`${server.base}/playground/ort/${WASM}`);
  expect(get.headers.get("etag")).toBe(etag);
  expect(get.headers.get("cache-control")).toBe("public, max-age=86400");
  expect(new Uint8Array(await get.arrayBuffer())).toEqual(new Uint8Array(readFileSync(path)));
  const revalidated = await fetch(`${server.base}/playground/ort/${WASM}`, { headers: { "If-None-Match": etag } });
  expect(revalidated.status).toBe(304);
});
