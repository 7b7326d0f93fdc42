/**
 * Which of src/'s folders may import which: {openai, elevenlabs, wyoming} → http → speech → engine → models → {onnx, gpu, text, formats}, with
 * voices and weights on formats, audio and storage (the S3 client, which imports nothing of ours but lib/), and api/, log/, async/, system/, config.ts and metrics.ts shared by every layer
 * but audio and formats, which import nothing of ours but lib/ and runtime/. lib/ and runtime/ are under everything: every
 * layer may import them; lib/ imports nothing of ours, runtime/ only lib/. Each layer lists what it may import (anything else of ours is a
 * violation), so a new edge against the direction fails test/e2e/architecture.test.ts. browser/ (the page's engine) sits beside
 * the server's layers, split by where its code runs: browser/page/ runs models' modules in a page; build.ts and routes.ts
 * bundle and serve it, imported by the composition root and by chromium/, the development tooling that drives a
 * headless Chromium (`conformance --browser`). The composition root
 * (main.ts, app.ts, server.ts, deploy.ts) may import anything. A folder or top-level file of src/ that is
 * none of these is a violation itself: no rule would see its imports.
 *
 * The parser is swc (TypeScript 7 has no JavaScript API for dependency-cruiser's tsc parser, the only one
 * that reads types, through tsPreCompilationDeps and detectJSDocImports). swc reads the source as written,
 * so `import type` declarations count as edges (cycles of types included), but its extraction does not look
 * inside types: an `import("…")` type expression is an edge none of these rules sees. test/e2e/architecture.test.ts
 * therefore fails any `import("./…")` type in src/ (write `import type` instead), so that every edge of ours
 * is one these rules check.
 */
// lib/: generic helpers (chunk concatenation, lazy loading, durable file writes). runtime/: the only code that
// knows which JS runtime runs us (detect.ts: Bun or Deno, their collectors; serve.ts: their servers). Both are
// under everything: every layer may import them, and they import nothing of ours but lib/.
const leaf = "^src/(lib|runtime)/";
// system/: facts and settings of the machine the process runs on (its memory limit, the allocator).
const shared = "^src/(api|log|async|system)/|^src/(config|metrics)\\.ts$";
const compositionRoot = "^src/(main|app|server|deploy|services)\\.ts$";
const layers = ["lib", "api", "log", "async", "system", "runtime", "cli", "http", "openai", "elevenlabs", "wyoming", "speech", "engine", "models", "onnx", "gpu", "text", "formats", "audio", "voices", "weights", "storage", "conformance", "browser", "chromium"];
const known = [`^src/(${layers.join("|")})/`, shared, compositionRoot];
const onlyTo = (...allowed) => ({ path: "^src/", pathNot: [leaf, shared, ...allowed] });

module.exports = {
  forbidden: [
    {
      name: "known-layer",
      comment: "Every module of src/ is in a layer named above: a new folder must get its rule before it gets its files.",
      severity: "error",
      from: { path: "^src/", pathNot: known },
      to: {},
    },
    {
      name: "known-layer",
      severity: "error",
      from: {},
      to: { path: "^src/", pathNot: known },
    },
    {
      name: "known-layer",
      severity: "error",
      from: { path: "^src/", pathNot: known, orphan: true },
      to: {},
    },
    {
      name: "lib-imports-nothing-of-ours",
      comment: "Every layer imports lib/, so it imports none of them.",
      severity: "error",
      from: { path: "^src/lib/" },
      to: { path: "^src/", pathNot: "^src/lib/" },
    },
    {
      name: "no-file-cycle",
      comment: "No import cycle between files, type-only imports included.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "no-folder-cycle",
      comment: "No import cycle between folders (a folder counts every file under it).",
      severity: "error",
      scope: "folder",
      from: { path: "^src/" },
      to: { circular: true },
    },
    {
      name: "resolvable",
      comment: "Every import resolves: an edge the resolver cannot follow is an edge no rule can check.",
      severity: "error",
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: "shared-modules-import-no-layer",
      comment: "api/, log/, async/, system/, config.ts and metrics.ts are imported by every layer, so they import none.",
      severity: "error",
      from: { path: shared },
      to: onlyTo(),
    },
    {
      name: "audio-imports-nothing-of-ours",
      severity: "error",
      from: { path: "^src/audio/" },
      to: { path: "^src/", pathNot: ["^src/audio/", leaf] },
    },
    {
      name: "storage-imports-nothing-of-ours",
      comment: "storage/ is an S3 client: it knows nothing of voices or models.",
      severity: "error",
      from: { path: "^src/storage/" },
      to: { path: "^src/", pathNot: ["^src/storage/", leaf] },
    },
    {
      name: "formats-import-nothing-of-ours",
      severity: "error",
      from: { path: "^src/formats/" },
      to: { path: "^src/", pathNot: ["^src/formats/", leaf] },
    },
    {
      name: "runtime-knows-no-layer",
      comment: "The only runtime-specific code: every layer may ask it which runtime runs, so it imports only lib/.",
      severity: "error",
      from: { path: "^src/runtime/" },
      to: { path: "^src/", pathNot: "^src/(lib|runtime)/" },
    },
    {
      name: "infrastructure-below-models",
      comment: "onnx, gpu and text serve the models: they use formats and audio, never a model or a layer above.",
      severity: "error",
      from: { path: "^src/(onnx|gpu|text)/" },
      to: onlyTo("^src/(onnx|gpu|text|formats|audio)/"),
    },
    {
      name: "voices-and-weights-use-formats-and-audio",
      severity: "error",
      from: { path: "^src/(voices|weights)/" },
      to: onlyTo("^src/$1/", "^src/(formats|audio|storage)/"),
    },
    {
      name: "models-below-engine",
      comment: "A model never imports the engine, speech, http, voices or the composition root.",
      severity: "error",
      from: { path: "^src/models/" },
      to: onlyTo("^src/(models|onnx|gpu|text|formats|audio|weights)/"),
    },
    {
      name: "models-independent",
      comment: "One model never imports another: what they share lives in models/contract.ts or below.",
      severity: "error",
      from: { path: "^src/models/([^/]+)/" },
      to: { path: "^src/models/[^/]+/", pathNot: "^src/models/$1/" },
    },
    {
      name: "contract-names-no-model",
      comment: "The contract is what every model gives the engine, so it depends on none of them.",
      severity: "error",
      from: { path: "^src/models/contract\\.ts$" },
      to: onlyTo(),
    },
    {
      name: "engine-sees-only-the-contract",
      comment: "The engine runs any model through models/contract.ts; which model is the composition root's choice.",
      severity: "error",
      from: { path: "^src/engine/" },
      to: onlyTo("^src/(engine|audio)/", "^src/models/contract\\.ts$"),
    },
    {
      name: "speech-above-engine",
      comment: "The speech service turns requests into jobs for the engine; it never reaches into a model.",
      severity: "error",
      from: { path: "^src/speech/" },
      to: onlyTo("^src/(speech|engine|voices|audio|text)/", "^src/models/contract\\.ts$"),
    },
    {
      name: "http-only-routes-and-framing",
      comment: "Routes call the speech service, the voice store and the engine's lifecycle; never a model.",
      severity: "error",
      from: { path: "^src/http/" },
      to: onlyTo("^src/(http|speech|engine|voices|audio|runtime)/"),
    },
    {
      name: "openai-over-the-core",
      comment:
        "OpenAI's protocol (with vLLM-Omni's extensions): its dialect, routes and WebSocket codec, over the shared HTTP framing, the speech core, the voice catalog and the engine's lifecycle; never a model.",
      severity: "error",
      from: { path: "^src/openai/" },
      to: onlyTo("^src/(openai|http|speech|engine|voices|audio|text|runtime)/", "^src/models/contract\\.ts$"),
    },
    {
      name: "elevenlabs-over-the-core",
      comment:
        "ElevenLabs' protocol: its schema, its app and its socket codec, over the same core; it answers to OpenAI's model names and shares the voice upload form, so it may read openai/, which never reads it.",
      severity: "error",
      from: { path: "^src/elevenlabs/" },
      to: onlyTo("^src/(elevenlabs|openai|http|speech|engine|voices|audio|text|runtime)/", "^src/models/contract\\.ts$"),
    },
    {
      name: "wyoming-beside-http",
      comment:
        "The Wyoming server is a transport like the HTTP routes, beside them: it calls the speech service and lists the voice store and the model's voices (the contract), segments streamed text, and never reaches into a model or the routes.",
      severity: "error",
      from: { path: "^src/wyoming/" },
      to: onlyTo("^src/(wyoming|speech|engine|voices|text|audio|runtime)/", "^src/models/contract\\.ts$"),
    },
    {
      name: "conformance-beside-models",
      comment: "The golden-case harness drives a model's stages directly, and its end-to-end runs through the server's engine, never through the service.",
      severity: "error",
      from: { path: "^src/conformance/" },
      to: onlyTo("^src/(conformance|engine|models|onnx|gpu|text|formats|audio|weights)/"),
    },
    {
      name: "cli-draws-what-layers-report",
      comment: "The command line's display shows what a layer reports (a pull's progress); only the composition root uses it.",
      severity: "error",
      from: { path: "^src/cli/" },
      to: onlyTo("^src/(cli|weights)/"),
    },
    {
      name: "page-runs-a-model",
      comment:
        "The code that runs in the page (browser/page/: the engine's and the decoder's workers, their file system and worker threads) runs a model's own modules under the server's engine (core.ts, with the frame cap of request.ts; not host.ts, which reads the machine's memory): the model and its stages, onnxruntime and the kernels, the speech core's job builder and text normalization as it applies them, the voice catalog's rule for built-in voice names, and the golden-case harness for `conformance --browser`. It never reaches back to the server's side of browser/ or to the Chromium tooling that drives it.",
      severity: "error",
      from: { path: "^src/browser/page/" },
      to: onlyTo("^src/browser/page/", "^src/(models|onnx|gpu|text)/", "^src/engine/(core|request)\\.ts$", "^src/conformance/", "^src/speech/(job|text-normalization)\\.ts$", "^src/voices/catalog\\.ts$"),
    },
    {
      name: "chromium-drives-the-page",
      comment:
        "Development tooling, beside the page rather than in it: headless Chromium (launch.ts) for the tests, the browser benchmark and `conformance --browser` (conformance.ts), whose loopback server offers the page's engine with the server's routes, lends the fixture with the model files route's code and isolates its page as the playground is; the report is the harness's (conformance/report.ts). Only the composition root imports it. It lives outside conformance/ because the page imports the harness: conformance/ importing browser/ would make a folder cycle.",
      severity: "error",
      from: { path: "^src/chromium/" },
      to: onlyTo("^src/chromium/", "^src/browser/routes\\.ts$", "^src/http/(model-files|isolation)\\.ts$", "^src/conformance/report\\.ts$"),
    },
    {
      name: "server-builds-and-serves-the-page",
      comment:
        "The server's side of browser/ (build.ts bundles the page's workers from their paths, routes.ts serves them) imports none of the page's modules, lends files with the model files route's code and describes its routes with the parts every route's OpenAPI shares. Nothing but the composition root and chromium/ (`conformance --browser`) import it.",
      severity: "error",
      from: { path: "^src/browser/[^/]+$" },
      to: onlyTo("^src/browser/[^/]+$", "^src/http/(model-files|route-docs)\\.ts$"),
    },
    {
      name: "conformance-only-from-the-cli",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/(main\\.ts$|conformance/|browser/page/|chromium/)" },
      to: { path: "^src/conformance/" },
    },
  ],
  options: {
    parser: "swc",
    doNotFollow: { path: "node_modules" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["bun", "import", "node", "default"],
      mainFields: ["module", "main", "types"],
    },
  },
};
