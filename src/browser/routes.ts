/**
 * The browser engine's files: `/playground/engine.js` and `/playground/decoder.js` (its workers, built on first request by build.ts)
 * and `/playground/ort/<name>` (onnxruntime-web's loaders and .wasm files, from a fixed list, so no request
 * path reaches the file system). Like the playground page, they need no API key: they are code, not speech.
 */
import { readFile } from "node:fs/promises";
import type { Hono } from "hono";
import { browserEngine, ONNX_RUNTIME_FILES, onnxRuntimeFilePath, type BrowserEngineBuild } from "./build.ts";
import { ApiError } from "../api/errors.ts";

type OnnxRuntimeFile = (typeof ONNX_RUNTIME_FILES)[number];
const isOnnxRuntimeFile = (name: string): name is OnnxRuntimeFile => (ONNX_RUNTIME_FILES as readonly string[]).includes(name);

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
      return c.body(built.source, 200, { "Content-Type": "text/javascript; charset=utf-8", ETag: built.etag, "Cache-Control": "no-cache" });
    });
  }
  app.get("/playground/ort/:file", async (c) => {
    const name = c.req.param("file");
    if (!isOnnxRuntimeFile(name)) return c.notFound();
    const bytes = await readFile(onnxRuntimeFilePath(name));
    const type = name.endsWith(".wasm") ? "application/wasm" : "text/javascript; charset=utf-8";
    // onnxruntime-web's files change only with the package: a day's caching saves the ~25 MB .wasm per load.
    return c.body(new Uint8Array(bytes), 200, { "Content-Type": type, "Cache-Control": "public, max-age=86400", "Cross-Origin-Resource-Policy": "same-origin" });
  });
}
