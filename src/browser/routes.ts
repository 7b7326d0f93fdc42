/**
 * The browser engine's files: `/playground/engine.js` and `/playground/decoder.js` (its workers, built on first request by build.ts)
 * and `/playground/ort/<name>` (onnxruntime-web's loaders and .wasm files, from a fixed list, so no request
 * path reaches the file system). Like the playground page, they need no API key: they are code, not speech.
 *
 * Nothing here is copied per request: a .wasm is 14-28 MB, and any client may ask for it without reading the
 * answer. onnxruntime-web's files are served from disk as the model files are (HEAD and 304 from a stat, the
 * body read as it is sent); each built worker is one Blob that every response shares.
 */
import { stat } from "node:fs/promises";
import type { Hono } from "hono";
import { browserEngine, ONNX_RUNTIME_FILES, onnxRuntimeFilePath, type BrowserEngineBuild, type BuiltModule } from "./build.ts";
import { ApiError } from "../api/errors.ts";
import { serveFile } from "../http/model-files.ts";

type OnnxRuntimeFile = (typeof ONNX_RUNTIME_FILES)[number];
const isOnnxRuntimeFile = (name: string): name is OnnxRuntimeFile => (ONNX_RUNTIME_FILES as readonly string[]).includes(name);

const JAVASCRIPT = "text/javascript; charset=utf-8";
/** The built workers' bytes, encoded once per build. */
const builtBodies = new WeakMap<BuiltModule, Blob>();
const bodyOf = (built: BuiltModule): Blob => {
  let body = builtBodies.get(built);
  if (!body) builtBodies.set(built, (body = new Blob([built.source], { type: JAVASCRIPT })));
  return body;
};

export function registerBrowserEngineRoutes(app: Hono): void {
  // The engine's worker, and the Mimi decoder's worker it starts.
  for (const [path, pick] of [
    ["/playground/engine.js", (build: BrowserEngineBuild) => build.engine],
    ["/playground/decoder.js", (build: BrowserEngineBuild) => build.decoder],
  ] as const) {
    app.get(path, async (c) => {
      let built;
      try {
        built = pick(await browserEngine());
      } catch (error) {
        throw new ApiError(503, `the in-browser engine is unavailable: ${(error as Error).message}`);
      }
      if (c.req.header("If-None-Match") === built.etag) return c.body(null, 304, { ETag: built.etag });
      const headers = { "Content-Type": JAVASCRIPT, ETag: built.etag, "Cache-Control": "no-cache" };
      if (c.req.method === "HEAD") return c.body(null, 200, { ...headers, "Content-Length": String(bodyOf(built).size) });
      return new Response(bodyOf(built), { headers });
    });
  }
  app.get("/playground/ort/:file", async (c) => {
    const name = c.req.param("file");
    if (!isOnnxRuntimeFile(name)) return c.notFound();
    const path = onnxRuntimeFilePath(name);
    const stats = await stat(path);
    const modifiedAtMs = Math.floor(stats.mtimeMs);
    const response = serveFile(c, { name, path, sizeBytes: stats.size, modifiedAtMs, etag: `W/"${stats.size.toString(16)}-${modifiedAtMs.toString(16)}"` });
    response.headers.set("Content-Type", name.endsWith(".wasm") ? "application/wasm" : JAVASCRIPT);
    // onnxruntime-web's files change only with the package: a day's caching saves the 14-28 MB .wasm per load.
    response.headers.set("Cache-Control", "public, max-age=86400");
    return response;
  });
}
