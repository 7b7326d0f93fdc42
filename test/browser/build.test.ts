/**
 * The browser build (src/browser/build.ts) and the routes that serve it: the worker bundles the server's own
 * modules with no runtime built-in left to import, every WGSL kernel travels inside it, and the server hands
 * out the worker and onnxruntime-web's files by a fixed list.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { Hono } from "hono";
import { buildBrowserEngine, ONNX_RUNTIME_FILES, type BrowserEngineBuild } from "../../src/browser/build.ts";
import { KERNEL_SOURCES } from "../../src/browser/page/kernel-sources.ts";
import { registerBrowserEngineRoutes } from "../../src/browser/routes.ts";
import { REPO_ROOT } from "../support/repo.ts";

let build: BrowserEngineBuild;
beforeAll(async () => {
  build = await buildBrowserEngine({ minify: false });
});

describe("the browser build", () => {
  test("bundles the pipeline with no import left for the browser to resolve", () => {
    // Every module is inside: a bare or node: specifier would fail to load in a page.
    for (const { source } of [build.engine, build.decoder]) {
      expect(source).not.toMatch(/^\s*(import\b|export\s.*\bfrom\b)/m);
      expect(source).not.toMatch(/\bimport\s*\(\s*["'](node:|bun:)/);
    }
    // The server's own modules, not copies: the model, the loop and the harness are in it.
    for (const name of ["PocketModel", "generateTogether", "runConformance", "loadPocketBundle", "rewriteCacheWrites", "WorkerMimiDecoderPool"]) expect(build.engine.source).toContain(name);
    // The decoder's worker is the server's: its session, its states and the same messages.
    for (const name of ["openMimiDecoderSession", "the decoder worker has no open decoder"]) expect(build.decoder.source).toContain(name);
    expect(build.engine.etag).toMatch(/^"[0-9a-f]{32}"$/);
    expect(build.decoder.etag).not.toBe(build.engine.etag);
  });

  test("fails a built-in the page reached for with its name, not at load", () => {
    expect(build.engine.source).toContain("node:os availableParallelism() is not available in the browser");
    expect(build.engine.source).toContain("onnxruntime-node is not available in the browser");
  });

  test("carries every WGSL kernel of kernels/", () => {
    const files = readdirSync(join(REPO_ROOT, "kernels")).filter((name) => name.endsWith(".wgsl")).map((name) => name.slice(0, -".wgsl".length));
    expect(Object.keys(KERNEL_SOURCES).sort()).toEqual(files.sort());
    for (const source of Object.values(KERNEL_SOURCES)) expect(source).toContain("@compute");
  });
});

describe("the browser engine's routes", () => {
  const app = new Hono();
  registerBrowserEngineRoutes(app);

  test("/playground/engine.js and /playground/decoder.js are the workers, revalidated by their ETags", async () => {
    const decoder = await app.request("/playground/decoder.js");
    expect(decoder.status).toBe(200);
    expect(decoder.headers.get("Content-Type")).toContain("text/javascript");
    expect(await decoder.text()).toContain("the decoder worker has no open decoder");
    const response = await app.request("/playground/engine.js");
    expect(response.status).toBe(200);
    expect(response.headers.get("Content-Type")).toContain("text/javascript");
    const etag = response.headers.get("ETag")!;
    expect(etag).toMatch(/^"[0-9a-f]{32}"$/);
    expect((await response.text()).length).toBeGreaterThan(100_000);
    const again = await app.request("/playground/engine.js", { headers: { "If-None-Match": etag } });
    expect(again.status).toBe(304);
  });

  test("onnxruntime-web's files by name, and nothing else", async () => {
    for (const name of ONNX_RUNTIME_FILES) {
      const response = await app.request(`/playground/ort/${name}`);
      expect(response.status).toBe(200);
      expect(response.headers.get("Content-Type")).toBe(name.endsWith(".wasm") ? "application/wasm" : "text/javascript; charset=utf-8");
      const body = new Uint8Array(await response.arrayBuffer());
      if (name.endsWith(".wasm")) expect(Array.from(body.subarray(0, 4))).toEqual([0, 0x61, 0x73, 0x6d]);
    }
    for (const path of ["/playground/ort/ort.node.min.mjs", "/playground/ort/..%2Fpackage.json", "/playground/ort/ort-wasm-simd-threaded.wasm.map"]) expect((await app.request(path)).status).toBe(404);
  });
});
