import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { ICruiseResult } from "dependency-cruiser";

const repoRoot = join(import.meta.dir, "..");
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
  return summary.violations.map((violation) => {
    const path = violation.cycle?.length ? violation.cycle.map((step) => step.name).join(" → ") : violation.to;
    return `${violation.rule.name}: ${violation.from} → ${path}`;
  });
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
