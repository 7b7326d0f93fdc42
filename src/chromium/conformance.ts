/**
 * `voxedge conformance <fixture> --browser`: the golden cases inside headless Chromium, through the page's
 * engine worker (`/playground/engine.js` and the playground's browser-engine.js client). A loopback server
 * offers the worker, onnxruntime-web's files and the fixture's files (listed and served by the model files
 * route's own code); the page is cross-origin isolated, as the playground is. The report is the harness's own, made
 * in the page by the same code (src/conformance/harness.ts), with the browser's version added.
 */
import { readFile, stat } from "node:fs/promises";
import { Hono } from "hono";
import { listFiles, listingEntries, serveFile } from "../http/model-files.ts";
import { registerCrossOriginIsolation } from "../http/isolation.ts";
import { registerBrowserEngineRoutes } from "../browser/routes.ts";
import { launchChromium, type ChromiumOptions } from "./launch.ts";
import { loadRuntime } from "../runtime/serve.ts";
import type { ConformanceReport } from "../conformance/report.ts";

export interface BrowserConformanceOptions extends ChromiumOptions {
  decoder?: "onnx" | "wgsl";
  batch?: number;
  /** Where the language-model graphs run in the page: the wasm EP (default) or the WebGPU EP. */
  ep?: "wasm" | "webgpu";
  /** Hears the page's console (warnings and errors). */
  onConsole?: (line: string) => void;
}

export type BrowserConformanceReport = ConformanceReport & { browser: string };

const PUBLIC_DIR = new URL("../../public/", import.meta.url);
const PAGE = `<!doctype html><meta charset="utf-8"><title>voxedge conformance</title>
<script type="module">
import { BrowserEngine } from "/playground/browser-engine.js";
window.runConformance = (options) => new BrowserEngine().conformance(options);
window.conformanceReady = true;
</script>`;

/** A loopback app offering the page, the engine and the fixture's files. */
async function conformanceApp(fixtureDir: string): Promise<Hono> {
  const files = await listFiles(fixtureDir);
  const app = new Hono();
  // Isolated as the playground is, so the page's engine runs as it does there.
  registerCrossOriginIsolation(app);
  app.get("/", (c) => c.html(PAGE));
  app.get("/favicon.ico", (c) => c.body(null, 204));
  registerBrowserEngineRoutes(app);
  app.get("/playground/browser-engine.js", async (c) => c.body(await readFile(new URL("browser-engine.js", PUBLIC_DIR), "utf-8"), 200, { "Content-Type": "text/javascript; charset=utf-8" }));
  // The fixture's files, listed and served as the model files route lends a bundle.
  app.get("/fixture/files", (c) => c.json({ object: "list", data: listingEntries(files, "/fixture/files/") }));
  app.get("/fixture/files/:name{.+}", (c) => {
    const file = files.find((entry) => entry.name === c.req.param("name"));
    return file ? serveFile(c, file) : c.notFound();
  });
  return app;
}

export async function runConformanceInBrowser(fixtureDir: string, options: BrowserConformanceOptions = {}): Promise<BrowserConformanceReport> {
  if (!(await stat(fixtureDir).then((info) => info.isDirectory(), () => false))) throw new Error(`${fixtureDir} is not a fixture folder`);
  const app = await conformanceApp(fixtureDir);
  // No idle deadline (Bun's idleTimeout 0, as this server always had): the page may compute for minutes between two fetches.
  const server = (await loadRuntime()).serve(app.fetch, "127.0.0.1", 0, { keepAliveTimeoutSeconds: 0 });
  const browser = await launchChromium({ ...options, webgpu: options.webgpu ?? (options.ep === "webgpu" || options.decoder === "wgsl") });
  try {
    const page = await browser.newPage();
    if (options.onConsole) page.on("console", (message) => (message.type() === "warning" || message.type() === "error" ? options.onConsole!(`${message.type()}: ${message.text()}`) : undefined));
    page.on("pageerror", (error) => options.onConsole?.(`page error: ${error.message}`));
    await page.goto(`http://127.0.0.1:${server.port}/`);
    await page.waitForFunction(() => (window as unknown as { conformanceReady?: boolean }).conformanceReady === true);
    const request = { listing: "/fixture/files", decoder: options.decoder ?? "onnx", ep: options.ep ?? "wasm", ...(options.batch !== undefined ? { batch: options.batch } : {}) };
    const report = (await page.evaluate((asked) => (window as unknown as { runConformance(options: unknown): Promise<unknown> }).runConformance(asked), request)) as ConformanceReport;
    return { ...report, browser: `Chromium ${browser.version()}` };
  } finally {
    await browser.close();
    await server.stop();
  }
}
