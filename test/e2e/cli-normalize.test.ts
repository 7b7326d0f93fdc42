/** `voxedge normalize` as a user runs it (src/main.ts over src/cli/line-filter.ts): a child process, lines on stdin, lines on stdout. */
import { expect, test } from "bun:test";
import { spawn, spawnSync } from "node:child_process";
import { join } from "node:path";
import { REPO_ROOT } from "../support/repo.ts";
import { normalizeText } from "../../src/text/normalize/index.ts";

const BUN = join(REPO_ROOT, "node_modules", ".bin", "bun");

test("one normalized line out per line in; empty lines stay empty", () => {
  const lines = ["It costs $19.99 today.", "", "We met on 03/04/2026 at 10:30 pm.", "Nothing to rewrite here.", ""];
  const result = spawnSync(BUN, ["run", "--silent", "voxedge", "normalize"], { cwd: REPO_ROOT, input: lines.join("\n") + "\n" });
  expect(result.stderr.toString()).toBe("");
  expect(result.status).toBe(0);
  const expected = lines.map((line) => normalizeText(line, { language: "en" }));
  expect(expected[0]).not.toMatch(/\d/);
  expect(result.stdout.toString()).toBe(expected.join("\n") + "\n");
});

test("--language is passed on to the rules", () => {
  const line = "The year 1999 cost $5.";
  const result = spawnSync(BUN, ["run", "--silent", "voxedge", "normalize", "--language", "en"], { cwd: REPO_ROOT, input: `${line}\n` });
  expect(result.status).toBe(0);
  expect(result.stdout.toString()).toBe(`${normalizeText(line, { language: "en" })}\n`);
});

test("each line is answered before the next is written, so it works in a pipe", async () => {
  const child = spawn(BUN, ["run", "--silent", "voxedge", "normalize"], { cwd: REPO_ROOT, stdio: ["pipe", "pipe", "inherit"] });
  let received = "";
  const waitForLines = (count: number) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer in time; got ${JSON.stringify(received)}`)), 20_000);
      const check = () => {
        if (received.split("\n").length > count) {
          clearTimeout(timer);
          child.stdout.off("data", onData);
          resolve();
        }
      };
      const onData = (chunk: Buffer) => {
        received += chunk.toString();
        check();
      };
      child.stdout.on("data", onData);
      check();
    });
  try {
    child.stdin.write("Pay $19.99 now.\n");
    await waitForLines(1);
    expect(received).toBe(`${normalizeText("Pay $19.99 now.")}\n`);
    child.stdin.write("See you on 03/04/2026.\n");
    await waitForLines(2);
    expect(received.split("\n")[1]).toBe(normalizeText("See you on 03/04/2026."));
  } finally {
    child.stdin.end();
  }
  const exitCode = await new Promise<number | null>((resolve) => child.once("close", resolve));
  expect(exitCode).toBe(0);
});

test("a bad flag exits 2 with a message naming it", () => {
  const unknown = spawnSync(BUN, ["run", "--silent", "voxedge", "normalize", "--lang", "en"], { cwd: REPO_ROOT, input: "x\n" });
  expect(unknown.status).toBe(2);
  expect(unknown.stderr.toString()).toContain("--lang");
  expect(unknown.stdout.toString()).toBe("");
  const missingValue = spawnSync(BUN, ["run", "--silent", "voxedge", "normalize", "--language"], { cwd: REPO_ROOT, input: "x\n" });
  expect(missingValue.status).toBe(2);
  expect(missingValue.stderr.toString()).toContain("--language");
});
