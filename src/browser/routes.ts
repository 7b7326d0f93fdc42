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
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import type { Hono } from "hono";
import { z } from "zod";
import { browserEngine, ONNX_RUNTIME_FILES, onnxRuntimeFilePath, type BrowserEngineBuild, type BuiltModule } from "./build.ts";
import { ApiError } from "../api/errors.ts";
import { serveFile } from "../http/model-files.ts";
import { errorResponses, open } from "../http/route-docs.ts";

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

export function describeBrowserEngineRoutes(registry: OpenAPIRegistry): void {
  const javascript = { "text/javascript": { schema: { type: "string" as const } } };
  registry.registerPath({
    method: "get",
    path: "/playground/engine.js",
    summary: "The in-browser engine: a module worker running the served Pocket TTS model in the page (built with Bun; 503 under other runtimes)",
    security: open,
    responses: { 200: { description: "JavaScript, with an ETag", content: javascript }, 304: { description: "the ETag in If-None-Match is current" }, ...errorResponses(503) },
  });
  registry.registerPath({
    method: "get",
    path: "/playground/decoder.js",
    summary: "The in-browser engine's Mimi decoder worker, which the engine starts so decoding overlaps sampling (built with Bun; 503 under other runtimes)",
    security: open,
    responses: { 200: { description: "JavaScript, with an ETag", content: javascript }, 304: { description: "the ETag in If-None-Match is current" }, ...errorResponses(503) },
  });
  registry.registerPath({
    method: "get",
    path: "/playground/ort/{file}",
    summary: "onnxruntime-web's loaders and .wasm files for the in-browser engine, by name; any other name is a 404",
    security: open,
    request: { params: z.object({ file: z.string().describe("an onnxruntime-web build file, e.g. ort-wasm-simd-threaded.wasm or ort-wasm-simd-threaded.jsep.mjs") }) },
    responses: { 200: { description: "JavaScript or WebAssembly", content: { "application/wasm": { schema: { type: "string", format: "binary" } }, ...javascript } }, 404: { description: "not one of onnxruntime-web's files" } },
  });
}

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
