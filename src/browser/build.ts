/**
 * The browser build of the speech pipeline (`/playground/engine.js`): the page's worker, bundled by Bun.build
 * from the same modules the server runs (models/pocket, onnx, gpu, text, conformance), not from a copy.
 *
 * Those modules import a few of the runtime's built-ins. In the page:
 * - `node:fs` and `node:fs/promises` are page/platform/fs.ts, a read-only file system of the model's files that
 *   the worker mounts from what it fetched, so the bundle loaders and sessions read them by path as usual;
 * - what is imported only dynamically, where the caller already copes with its absence (onnxruntime-node,
 *   whose failure makes "auto" take onnxruntime-web; bun-webgpu and bun:ffi, Bun's WebGPU binding), is a
 *   module that fails to load;
 * - `node:worker_threads` is page/platform/worker-threads.ts, its Worker and parentPort over Web Workers, so the
 *   Mimi decoder's worker and its client run in the page as on the server (page/decoder-worker.ts);
 * - `node:path` is Bun's browser polyfill (POSIX paths, as the mounted files have);
 * - every other built-in (os, util, crypto, url) is a module with the same export
 *   names whose functions throw when called: the browser's code paths never call them, and one that did would
 *   fail with the name of what it reached for rather than with a missing export at load.
 *
 * onnxruntime-web is built with its "use extern wasm" condition: its loader (.mjs) and .wasm are then fetched
 * from `wasmPaths` (served by the server beside the engine) rather than inlined, so its thread workers start
 * from that loader's own URL instead of from this bundle.
 */
import { fileURLToPath } from "node:url";
import { bunBundler } from "../runtime/detect.ts";

const ENGINE_ENTRY = fileURLToPath(new URL("./page/engine-worker.ts", import.meta.url));
const DECODER_ENTRY = fileURLToPath(new URL("./page/decoder-worker.ts", import.meta.url));
const FILE_SYSTEM = fileURLToPath(new URL("./page/platform/fs.ts", import.meta.url));
const WORKER_THREADS = fileURLToPath(new URL("./page/platform/worker-threads.ts", import.meta.url));

const LOAD_FAILS = new Set(["onnxruntime-node", "bun-webgpu", "bun:ffi"]);
const FILE_SYSTEM_MODULES = new Set(["node:fs", "fs", "node:fs/promises", "fs/promises"]);
const WORKER_THREADS_MODULES = new Set(["node:worker_threads", "worker_threads"]);
/** Bun's own browser polyfill serves these (path-browserify's POSIX paths, which the mounted files use). */
const POLYFILLED = new Set(["node:path", "path"]);
const BUILT_IN = /^(node:|bun:)|^(worker_threads|os|util|crypto|url|bun-webgpu|onnxruntime-node)$/;

/** The module a built-in becomes in the page: same export names, each a function that throws when called. */
async function unavailableModule(specifier: string): Promise<string> {
  if (LOAD_FAILS.has(specifier)) return `throw new Error(${JSON.stringify(`${specifier} is not available in the browser`)});`;
  const names = Object.keys((await import(specifier)) as object).filter((name) => /^[A-Za-z_$][\w$]*$/.test(name) && name !== "default");
  const message = (name: string) => JSON.stringify(`${specifier} ${name}() is not available in the browser`);
  return [
    ...names.map((name) => `export function ${name}() { throw new Error(${message(name)}); }`),
    `export default new Proxy({}, { get(_, name) { throw new Error(${JSON.stringify(specifier)} + " " + String(name) + " is not available in the browser"); } });`,
  ].join("\n");
}

const browserBuiltIns = {
  name: "browser built-ins",
  setup(build: { onResolve: Function; onLoad: Function }) {
    build.onResolve({ filter: BUILT_IN }, (args: { path: string }) => {
      if (POLYFILLED.has(args.path)) return undefined;
      if (FILE_SYSTEM_MODULES.has(args.path)) return { path: FILE_SYSTEM };
      if (WORKER_THREADS_MODULES.has(args.path)) return { path: WORKER_THREADS };
      return { path: args.path, namespace: "unavailable-in-browser" };
    });
    build.onLoad({ filter: /.*/, namespace: "unavailable-in-browser" }, async (args: { path: string }) => ({ contents: await unavailableModule(args.path), loader: "js" }));
  },
};

export interface BuiltModule {
  /** The module's source. */
  source: string;
  /** A strong validator of the source (part of its SHA-256), for ETag. */
  etag: string;
}

export interface BrowserEngineBuild {
  /** The engine's worker (page/engine-worker.ts). */
  engine: BuiltModule;
  /** The Mimi decoder's worker, which the engine starts (page/decoder-worker.ts). */
  decoder: BuiltModule;
  buildSeconds: number;
}

async function builtModule(source: string): Promise<BuiltModule> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(source)));
  return { source, etag: `"${Array.from(digest.subarray(0, 16), (byte) => byte.toString(16).padStart(2, "0")).join("")}"` };
}

/** Bundles the workers, each whole. Needs Bun (Bun.build); other runtimes get an Error saying so. */
export async function buildBrowserEngine(options: { minify?: boolean } = {}): Promise<BrowserEngineBuild> {
  const bundle = bunBundler();
  if (!bundle) throw new Error("the browser engine is built with Bun.build: serve with Bun (`bun run voxedge serve`) to offer it");
  const started = performance.now();
  const result = await bundle({
    entrypoints: [ENGINE_ENTRY, DECODER_ENTRY],
    target: "browser",
    format: "esm",
    minify: options.minify ?? true,
    conditions: ["onnxruntime-web-use-extern-wasm"],
    plugins: [browserBuiltIns as never],
    throw: false,
  });
  if (!result.success) throw new Error(`the browser engine did not build: ${result.logs.map(String).join("; ")}`);
  const output = (name: string) => {
    const found = result.outputs.find((candidate) => candidate.kind === "entry-point" && candidate.path.endsWith(`/${name}.js`));
    if (!found) throw new Error(`the browser build made no ${name}.js`);
    return found.text();
  };
  return { engine: await builtModule(await output("engine-worker")), decoder: await builtModule(await output("decoder-worker")), buildSeconds: (performance.now() - started) / 1000 };
}

let built: Promise<BrowserEngineBuild> | undefined;

/** The build, made once per process on first use (about a second). */
export function browserEngine(): Promise<BrowserEngineBuild> {
  built ??= buildBrowserEngine();
  built.catch(() => (built = undefined));
  return built;
}

/** onnxruntime-web's loaders and .wasm files the worker fetches (`/playground/ort/<name>`), by name. */
export const ONNX_RUNTIME_FILES = [
  "ort-wasm-simd-threaded.mjs",
  "ort-wasm-simd-threaded.wasm",
  "ort-wasm-simd-threaded.jsep.mjs",
  "ort-wasm-simd-threaded.jsep.wasm",
  "ort-wasm-simd-threaded.asyncify.mjs",
  "ort-wasm-simd-threaded.asyncify.wasm",
] as const;

/** Where an onnxruntime-web file lies in node_modules. */
export function onnxRuntimeFilePath(name: (typeof ONNX_RUNTIME_FILES)[number]): string {
  return fileURLToPath(new URL(name, new URL(".", import.meta.resolve("onnxruntime-web"))));
}
