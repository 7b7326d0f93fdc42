/**
 * The browser engine's files: `/playground/engine.js` (the worker, built on first request by browser/build.ts)
 * and `/playground/ort/<name>` (onnxruntime-web's loaders and .wasm files, from a fixed list, so no request
 * path reaches the file system). Like the playground page, they need no API key: they are code, not speech.
 */
import { readFile } from "node:fs/promises";
import type { Hono } from "hono";
import { browserEngine, ONNX_RUNTIME_FILES, onnxRuntimeFilePath } from "./build.ts";
import { ApiError } from "../api/errors.ts";

type OnnxRuntimeFile = (typeof ONNX_RUNTIME_FILES)[number];
const isOnnxRuntimeFile = (name: string): name is OnnxRuntimeFile => (ONNX_RUNTIME_FILES as readonly string[]).includes(name);

export function registerBrowserEngineRoutes(app: Hono): void {
  app.get("/playground/engine.js", async (c) => {
    let build;
    try {
      build = await browserEngine();
    } catch (error) {
      throw new ApiError(503, `the in-browser engine is unavailable: ${(error as Error).message}`);
    }
    if (c.req.header("If-None-Match") === build.etag) return c.body(null, 304, { ETag: build.etag });
    return c.body(build.source, 200, { "Content-Type": "text/javascript; charset=utf-8", ETag: build.etag, "Cache-Control": "no-cache" });
  });
  app.get("/playground/ort/:file", async (c) => {
    const name = c.req.param("file");
    if (!isOnnxRuntimeFile(name)) return c.notFound();
    const bytes = await readFile(onnxRuntimeFilePath(name));
    const type = name.endsWith(".wasm") ? "application/wasm" : "text/javascript; charset=utf-8";
    // onnxruntime-web's files change only with the package: a day's caching saves the ~25 MB .wasm per load.
    return c.body(new Uint8Array(bytes), 200, { "Content-Type": type, "Cache-Control": "public, max-age=86400", "Cross-Origin-Resource-Policy": "same-origin" });
  });
}
