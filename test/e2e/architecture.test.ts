import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, posix } from "node:path";
import { parseSync } from "@swc/core";
import type { ICruiseResult } from "dependency-cruiser";
import { REPO_ROOT } from "../support/repo.ts";

const repoRoot = REPO_ROOT;
const rulesFile = join(repoRoot, ".dependency-cruiser.cjs");
// dependency-cruiser runs under Node: under Bun its swc visitor loads as an empty class (Bun hands a
// CommonJS module with __esModule its `default` export where Node hands the whole module).
const depcruise = join(repoRoot, "node_modules/dependency-cruiser/bin/dependency-cruise.mjs");
const scratchRoots: string[] = [];

afterAll(() => {
  for (const root of scratchRoots) rmSync(root, { recursive: true, force: true });
});

async function violationsIn(baseDir: string): Promise<string[]> {
  const cruiser = Bun.spawn(["node", depcruise, "src", "--config", rulesFile, "--output-type", "json"], { cwd: baseDir, stdout: "pipe", stderr: "pipe" });
  const [report, errors] = await Promise.all([new Response(cruiser.stdout).text(), new Response(cruiser.stderr).text(), cruiser.exited]);
  if (!report.trim()) throw new Error(`dependency-cruiser printed no report: ${errors}`);
  const { summary } = JSON.parse(report) as ICruiseResult;
  const cruised = summary.violations.map((violation) => {
    const path = violation.cycle?.length ? violation.cycle.map((step) => step.name).join(" → ") : violation.to;
    return `${violation.rule.name}: ${violation.from} → ${path}`;
  });
  return [...cruised, ...importTypeExpressionsIn(baseDir)];
}

/**
 * Every `import("./…")` type expression under src/, as a violation naming the module it reaches: swc's
 * extraction skips types, so dependency-cruiser's rules never see these edges (see .dependency-cruiser.cjs).
 * A package's types (`typeof import("libflacjs/…")`) are not our layers and pass.
 */
function importTypeExpressionsIn(baseDir: string): string[] {
  const violations: string[] = [];
  for (const path of sourceFiles(baseDir, "src")) {
    const module = parseSync(readFileSync(join(baseDir, path), "utf8"), { syntax: "typescript", tsx: path.endsWith(".tsx") });
    for (const specifier of importTypeSpecifiers(module)) {
      if (specifier.startsWith(".")) violations.push(`no-import-type-expression: ${path} → ${posix.join(posix.dirname(path), specifier)}`);
    }
  }
  return violations;
}

/**
 * Every line of src/ outside runtime/ whose code reaches for Bun's or Deno's globals (`Bun.serve`,
 * `globalThis.Deno`, `(globalThis as …).Bun`, `typeof Bun`, a `Bun.Server` type), as `file:line: code`.
 * Read from swc's tree, so a comment or a message that names them passes.
 */
function runtimeGlobalUsesIn(baseDir: string): string[] {
  const uses = new Set<string>();
  for (const path of sourceFiles(baseDir, "src")) {
    if (path.startsWith("src/runtime/")) continue;
    // swc's spans are positions in its own source map, not in the file: a leading `0;` gives the file's first
    // byte a known span. A shebang becomes a comment of the same length, so lines keep their numbers.
    const source = `0;${readFileSync(join(baseDir, path), "utf8").replace(/^#!/, "//")}`;
    const bytes = Buffer.from(source);
    const module = parseSync(source, { syntax: "typescript", tsx: path.endsWith(".tsx") });
    const origin = module.body[0]!.span.start;
    for (const offset of runtimeGlobalOffsets(module)) {
      const before = bytes.subarray(0, offset - origin).toString("utf8");
      const line = before.split("\n").length;
      uses.add(`${path}:${line}: ${source.split("\n")[line - 1]!.replace(/^0;/, "").trim()}`);
    }
  }
  return [...uses].sort();
}

const RUNTIME_GLOBALS = new Set(["Bun", "Deno"]);

function runtimeGlobalOffsets(node: unknown): number[] {
  if (Array.isArray(node)) return node.flatMap(runtimeGlobalOffsets);
  if (node === null || typeof node !== "object") return [];
  const fields = node as { type?: unknown; span?: { start: number }; object?: unknown; property?: unknown; left?: unknown; exprName?: unknown };
  const named = (candidate: unknown) => {
    const identifier = candidate as { type?: unknown; value?: unknown } | undefined;
    return identifier?.type === "Identifier" && RUNTIME_GLOBALS.has(identifier.value as string);
  };
  const reaches =
    (fields.type === "MemberExpression" && (named(fields.object) || named(fields.property))) ||
    (fields.type === "TsQualifiedName" && named(fields.left)) ||
    (fields.type === "TsTypeQuery" && named(fields.exprName));
  const own = reaches && fields.span ? [fields.span.start] : [];
  return [...own, ...Object.values(node).flatMap(runtimeGlobalOffsets)];
}

function sourceFiles(baseDir: string, folder: string): string[] {
  return readdirSync(join(baseDir, folder), { withFileTypes: true }).flatMap((entry) => {
    const path = posix.join(folder, entry.name);
    if (entry.isDirectory()) return sourceFiles(baseDir, path);
    return /\.(ts|tsx|mts|cts)$/.test(entry.name) ? [path] : [];
  });
}

function importTypeSpecifiers(node: unknown): string[] {
  if (Array.isArray(node)) return node.flatMap(importTypeSpecifiers);
  if (node === null || typeof node !== "object") return [];
  const fields = node as { type?: unknown; argument?: { value?: unknown } };
  const own = fields.type === "TsImportType" && typeof fields.argument?.value === "string" ? [fields.argument.value] : [];
  return [...own, ...Object.values(node).flatMap(importTypeSpecifiers)];
}

/** A tree of one-line modules under a scratch folder: path → source. */
function scratchTree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "voxedge-architecture-"));
  scratchRoots.push(root);
  for (const [path, source] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), source);
  }
  return root;
}

test("src/ imports run one way, with no file or folder cycle", async () => {
  expect(await violationsIn(repoRoot)).toEqual([]);
});

test("a cycle of type-only imports is a file cycle", async () => {
  const root = scratchTree({
    "src/models/pocket/plan.ts": 'import type { Output } from "./output.ts";\nexport type Plan = { next?: Output };\n',
    "src/models/pocket/output.ts": 'import type { Plan } from "./plan.ts";\nexport type Output = { plan: Plan };\n',
  });
  const violations = await violationsIn(root);
  expect(violations.filter((line) => line.startsWith("no-file-cycle:"))).toEqual([
    "no-file-cycle: src/models/pocket/output.ts → src/models/pocket/plan.ts → src/models/pocket/output.ts",
  ]);
});

test("two folders that import each other through different files are a folder cycle", async () => {
  const root = scratchTree({
    "src/onnx/runtime.ts": 'export { gpuDevice } from "../gpu/device.ts";\n',
    "src/gpu/device.ts": "export const gpuDevice = 1;\n",
    "src/gpu/kernel.ts": 'export { providers } from "../onnx/providers.ts";\n',
    "src/onnx/providers.ts": "export const providers = [];\n",
  });
  const violations = await violationsIn(root);
  expect(violations.some((line) => line.startsWith("no-folder-cycle: src/gpu → "))).toBe(true);
  expect(violations.some((line) => line.startsWith("no-file-cycle:"))).toBe(false);
});

test("imports against the direction are named by the rule they break", async () => {
  const root = scratchTree({
    "src/audio/wav.ts": "export const wav = 1;\n",
    "src/formats/npy.ts": 'import { wav } from "../audio/wav.ts";\nexport const npy = wav;\n',
    "src/models/contract.ts": "export type SpeechModel = { name: string };\n",
    "src/models/pocket/model.ts": 'import type { SpeechModel } from "../contract.ts";\nimport { host } from "../../engine/host.ts";\nexport const pocket: SpeechModel = { name: String(host) };\n',
    "src/models/classic/model.ts": 'import { pocket } from "../pocket/model.ts";\nexport const classic = pocket;\n',
    "src/engine/host.ts": 'import type { SpeechModel } from "../models/contract.ts";\nexport const host = 1;\nexport type Hosted = SpeechModel;\n',
    "src/engine/scheduler.ts": 'import type { pocket } from "../models/pocket/model.ts";\nexport type Scheduled = typeof pocket;\n',
    "src/http/speech.ts": 'import { pocket } from "../models/pocket/model.ts";\nexport const route = pocket;\n',
    "src/voices/store.ts": 'import { route } from "../http/speech.ts";\nexport const store = route;\n',
  });
  const violations = await violationsIn(root);
  expect(violations.filter((line) => !/^no-(file|folder)-cycle:/.test(line)).sort()).toEqual([
    "engine-sees-only-the-contract: src/engine/scheduler.ts → src/models/pocket/model.ts",
    "formats-import-nothing-of-ours: src/formats/npy.ts → src/audio/wav.ts",
    "http-only-routes-and-framing: src/http/speech.ts → src/models/pocket/model.ts",
    "models-below-engine: src/models/pocket/model.ts → src/engine/host.ts",
    "models-independent: src/models/classic/model.ts → src/models/pocket/model.ts",
    "voices-and-weights-use-formats-and-audio: src/voices/store.ts → src/http/speech.ts",
  ]);
});

test("a folder or top-level file of src/ that no rule names is a violation, whether it imports, is imported or stands alone", async () => {
  const root = scratchTree({
    "src/queue/jobs.ts": 'import { wav } from "../audio/wav.ts";\nexport const jobs = wav;\n',
    "src/audio/wav.ts": "export const wav = 1;\n",
    "src/http/speech.ts": 'import { jobs } from "../queue/jobs.ts";\nexport const route = jobs;\n',
    "src/notes/idea.ts": "export const idea = 1;\n",
    "src/bootstrap.ts": 'import { route } from "./http/speech.ts";\nexport const app = route;\n',
  });
  const violations = await violationsIn(root);
  expect(violations.filter((line) => line.startsWith("known-layer:")).sort()).toEqual([
    "known-layer: src/bootstrap.ts → src/http/speech.ts",
    "known-layer: src/http/speech.ts → src/queue/jobs.ts",
    "known-layer: src/notes/idea.ts → src/notes/idea.ts",
    "known-layer: src/queue/jobs.ts → src/audio/wav.ts",
  ]);
});

test("lib/ is imported by every layer, the shared modules and audio included, and imports none of them", async () => {
  const root = scratchTree({
    "src/lib/concat.ts": 'import { logger } from "../log/logger.ts";\nexport const concat = logger;\n',
    "src/log/logger.ts": "export const logger = 1;\n",
    "src/async/capped-stream.ts": 'import { concat } from "../lib/concat.ts";\nexport const capped = concat;\n',
    "src/audio/wav.ts": 'import { concat } from "../lib/concat.ts";\nexport const wav = concat;\n',
    "src/formats/npy.ts": 'import { concat } from "../lib/concat.ts";\nexport const npy = concat;\n',
  });
  expect(await violationsIn(root)).toEqual(["lib-imports-nothing-of-ours: src/lib/concat.ts → src/log/logger.ts"]);
});

test("runtime/ is asked by every layer which runtime runs, and imports nothing of ours but lib/", async () => {
  const root = scratchTree({
    "src/runtime/detect.ts": 'import { concat } from "../lib/concat.ts";\nexport const isBun = concat;\n',
    "src/runtime/serve.ts": 'import { service } from "../speech/service.ts";\nexport const serve = service;\n',
    "src/lib/concat.ts": "export const concat = 1;\n",
    "src/speech/service.ts": "export const service = 1;\n",
    "src/system/allocator.ts": 'import { isBun } from "../runtime/detect.ts";\nexport const tune = isBun;\n',
    "src/gpu/device.ts": 'import { isBun } from "../runtime/detect.ts";\nexport const device = isBun;\n',
  });
  expect(await violationsIn(root)).toEqual(["runtime-knows-no-layer: src/runtime/serve.ts → src/speech/service.ts"]);
});

test("no code outside src/runtime/ reaches for Bun's or Deno's globals", () => {
  expect(runtimeGlobalUsesIn(repoRoot)).toEqual([]);
});

test("a runtime global reached outside src/runtime/ is named by file and line; comments, messages and runtime/ pass", () => {
  const root = scratchTree({
    "src/main.ts": '#!/usr/bin/env bun\n// Bun.serve is runtime/serve.ts\'s\nconst message = "built with Bun.build";\nexport const server = Bun.serve({ fetch: () => new Response(message) });\n',
    "src/browser/build.ts": "const bun = (globalThis as { Bun?: typeof Bun }).Bun;\nexport const version = globalThis.Deno?.version ?? bun;\n",
    "src/gpu/device.ts": "/** A Deno.GpuDevice in Deno. */\nexport type Served = Bun.Server;\n",
    "src/runtime/serve.ts": "export const serve = Bun.serve;\n",
  });
  expect(runtimeGlobalUsesIn(root)).toEqual([
    "src/browser/build.ts:1: const bun = (globalThis as { Bun?: typeof Bun }).Bun;",
    "src/browser/build.ts:2: export const version = globalThis.Deno?.version ?? bun;",
    "src/gpu/device.ts:2: export type Served = Bun.Server;",
    "src/main.ts:4: export const server = Bun.serve({ fetch: () => new Response(message) });",
  ]);
});

/** Longest a source file may grow: past it a file holds more than one job (split it along its seams). */
const MAX_SOURCE_LINES = 700;

function longSourceFiles(baseDir: string): string[] {
  return sourceFiles(baseDir, "src")
    .map((file) => ({ file, lines: readFileSync(join(baseDir, file), "utf8").split("\n").length - 1 }))
    .filter(({ lines }) => lines > MAX_SOURCE_LINES)
    .map(({ file, lines }) => `${file}: ${lines} lines`);
}

test(`no source file of src/ is over ${MAX_SOURCE_LINES} lines`, () => {
  expect(longSourceFiles(repoRoot)).toEqual([]);
});

test("a source file over the limit is named with its length; one at the limit passes", () => {
  const root = scratchTree({ "src/speech/service.ts": "x\n".repeat(MAX_SOURCE_LINES + 1), "src/speech/spec.ts": "x\n".repeat(MAX_SOURCE_LINES) });
  expect(longSourceFiles(root)).toEqual([`src/speech/service.ts: ${MAX_SOURCE_LINES + 1} lines`]);
});

// swc's extraction skips types, so the engine → pocket edge below is in no cruised rule's sight: the check
// fails it as an import("…") type, and any other one too, even where the layers would allow the edge.
test("an import(\"…\") type expression of ours fails the check, a package's does not", async () => {
  const root = scratchTree({
    "src/models/contract.ts": "export type SpeechModel = { name: string };\n",
    "src/models/pocket/model.ts": 'import type { SpeechModel } from "../contract.ts";\nexport type PocketModel = SpeechModel & { voices: string[] };\n',
    "src/engine/host.ts": 'export type Hosted = { model: import("../models/pocket/model.ts").PocketModel };\n',
    "src/engine/core.ts": 'export type Loaded = Promise<import("../models/contract.ts").SpeechModel>;\n',
    "src/audio/flac.ts": 'export type Flac = typeof import("libflacjs/dist/libflac.js");\n',
  });
  expect(await violationsIn(root)).toEqual([
    "no-import-type-expression: src/engine/core.ts → src/models/contract.ts",
    "no-import-type-expression: src/engine/host.ts → src/models/pocket/model.ts",
  ]);
});
