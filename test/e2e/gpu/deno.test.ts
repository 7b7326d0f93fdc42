import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { REPO_ROOT } from "../../support/repo.ts";

const ROOT = REPO_ROOT;
const DENO = join(ROOT, "node_modules/.bin/deno");
const FIXTURE = join(ROOT, "../shared/fixtures/pocket-tiny");

test("under Deno, navigator.gpu runs the WGSL decoder and matches the golden audio", () => {
  const result = spawnSync(DENO, ["run", "--allow-read", "--allow-env", "--allow-ffi", "--allow-sys", "test/gpu/deno/decode-check.ts", FIXTURE], { cwd: ROOT, maxBuffer: 1 << 22, timeout: 120_000 });
  const output = result.stdout.toString().trim().split("\n").at(-1) ?? "";
  if (result.status !== 0) throw new Error(`deno exited with ${result.status}: ${result.stderr.toString().slice(-2000)}`);
  const report = JSON.parse(output);
  expect(report).toMatchObject({ runtime: "deno", backend: "navigator.gpu", samples: 3 * 1920 });
  expect(report.adapter).not.toContain("null-backend");
  expect(report.relRms).toBeLessThanOrEqual(1e-4);
}, 180_000);
