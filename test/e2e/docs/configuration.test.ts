/**
 * docs/configuration.md is generated from src/config.ts's option tables (scripts/configuration-doc.ts):
 * it must be what the generator makes now, and name every option `voxedge --help` prints.
 */
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { configurationDoc } from "../../../scripts/configuration-doc.ts";
import { REPO_ROOT } from "../../support/repo.ts";

const ROOT = REPO_ROOT;
const BUN = join(ROOT, "node_modules", ".bin", "bun");
const DOC = join(ROOT, "docs", "configuration.md");

test("docs/configuration.md is what scripts/configuration-doc.ts makes from src/config.ts (else: bun run docs:config)", () => {
  expect(readFileSync(DOC, "utf-8")).toBe(configurationDoc());
});

test("the generated file does not depend on the machine it was made on", () => {
  const generate = (home: string) => spawnSync(BUN, ["scripts/configuration-doc.ts"], { cwd: ROOT, env: { ...process.env, HOME: home } });
  const one = generate("/tmp/voxedge-home-one");
  const other = generate("/tmp/voxedge-home-other");
  expect(one.status).toBe(0);
  expect(one.stdout.toString()).toBe(other.stdout.toString());
  expect(one.stdout.toString()).not.toContain("/tmp/voxedge-home-one");
});

test("every flag and environment variable that `voxedge --help` prints is in docs/configuration.md", () => {
  const help = spawnSync(BUN, ["src/main.ts", "--help"], { cwd: ROOT });
  expect(help.status).toBe(0);
  const printed = help.stdout.toString();
  const flags = new Set(printed.match(/(?<![\w-])--[a-z][a-z0-9-]*/g) ?? []);
  const shortFlags = new Set(printed.match(/(?<![\w-])-[a-z](?=[\s,\]])/g) ?? []);
  const variables = new Set(printed.match(/\b(?:VOXEDGE|SPEAKER)_[A-Z0-9_]+\b/g) ?? []);
  // The parse itself is checked: an empty match would make the loops below pass on nothing.
  expect(flags.size).toBeGreaterThan(40);
  expect(flags).toContain("--provider");
  expect(shortFlags).toContain("-o");
  expect(variables).toContain("SPEAKER_SAMPLES_DIR");

  const doc = readFileSync(DOC, "utf-8");
  const documented = new Set(doc.match(/`-{1,2}[a-z][a-z0-9-]*`/g)?.map((quoted) => quoted.slice(1, -1)));
  const missing = [...flags, ...shortFlags].filter((flag) => !documented.has(flag));
  expect(missing).toEqual([]);
  expect([...variables].filter((variable) => !doc.includes(`\`${variable}\``))).toEqual([]);
});
