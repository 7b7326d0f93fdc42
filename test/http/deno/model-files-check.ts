/**
 * Run by test/http/model-files.test.ts under Deno: serves the model-file routes over a bundle folder (argv[2])
 * on Deno's own server and prints one JSON line with what a client saw: a whole file streamed in chunks, a
 * byte range, a HEAD, a revalidation.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Hono } from "hono";
import { registerModelFileRoutes } from "../../../src/http/model-files.ts";
import { loadRuntime } from "../../../src/runtime/serve.ts";

const directory = process.argv[2]!;
const app = new Hono();
const service = { model: () => ({ filesDirectory: directory, capabilities: { kind: "neural" } }) };
registerModelFileRoutes(app, { service: service as never, checkModel: () => {}, pulledFiles: async () => new Map() });
const runtime = await loadRuntime();
const server = runtime.serve(app.fetch, "127.0.0.1", 0);
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

const listing = await (await fetch(`${server.url}/v1/models/m/files`)).json();
const entry = listing.data.find((file: { name: string }) => file.name === "flow_lm_main_int8.onnx");
const whole = await fetch(`${server.url}${entry.url}`);
const wholeBytes = new Uint8Array(await whole.arrayBuffer());
const ranged = await fetch(`${server.url}${entry.url}`, { headers: { Range: "bytes=-5" } });
const rangedBytes = [...new Uint8Array(await ranged.arrayBuffer())];
const head = await fetch(`${server.url}${entry.url}`, { method: "HEAD" });
const revalidated = await fetch(`${server.url}${entry.url}`, { headers: { "If-None-Match": entry.etag } });
await revalidated.body?.cancel();
await server.stop();

console.log(
  JSON.stringify({
    runtime: "Deno" in globalThis ? "deno" : "other",
    names: listing.data.map((file: { name: string }) => file.name),
    whole: { status: whole.status, contentLength: whole.headers.get("content-length"), sha256: sha256(wholeBytes), expectedSha256: sha256(readFileSync(join(directory, entry.name))) },
    ranged: { status: ranged.status, contentRange: ranged.headers.get("content-range"), bytes: rangedBytes },
    head: { status: head.status, contentLength: head.headers.get("content-length"), body: (await head.arrayBuffer()).byteLength },
    revalidated: revalidated.status,
  }),
);
