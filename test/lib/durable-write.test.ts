import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fsyncDirectory, TEMP_FILE_PREFIX, writeFileDurably } from "../../src/lib/durable-write.ts";

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "voxedge-durable-write-"));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const tempFiles = () => readdirSync(dir).filter((name) => name.startsWith(TEMP_FILE_PREFIX));

describe("writeFileDurably", () => {
  test("creates the file, or replaces it whole, and leaves no temporary file", async () => {
    const path = join(dir, "complete.json");
    await writeFileDurably(path, "first\n");
    expect(readFileSync(path, "utf8")).toBe("first\n");
    await writeFileDurably(path, Uint8Array.of(1, 2, 3));
    expect(Array.from(readFileSync(path))).toEqual([1, 2, 3]);
    expect(readdirSync(dir)).toEqual(["complete.json"]);
  });

  test("gives the file the mode asked for", async () => {
    const path = join(dir, "voice.safetensors");
    await writeFileDurably(path, Uint8Array.of(0), { mode: 0o600 });
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  test("a failure before the rename leaves the target as it was and removes the temporary file", async () => {
    // A folder in the target's place: the rename over it fails after the temporary file was written.
    const path = join(dir, "taken");
    mkdirSync(path);
    writeFileSync(join(path, "inside"), "kept");
    await expect(writeFileDurably(path, "new contents")).rejects.toMatchObject({ code: expect.stringMatching(/^(EISDIR|ENOTEMPTY|EEXIST|EPERM)$/) });
    expect(readFileSync(join(path, "inside"), "utf8")).toBe("kept");
    expect(tempFiles()).toEqual([]);
  });

  test("a folder that does not exist is an error, not a silent success", async () => {
    await expect(writeFileDurably(join(dir, "missing", "file"), "x")).rejects.toMatchObject({ code: "ENOENT" });
  });
});

describe("fsyncDirectory", () => {
  test("fsyncs a folder", async () => {
    await expect(fsyncDirectory(dir)).resolves.toBeUndefined();
  });

  test("a folder that cannot be opened for a reason other than the platform's is an error, not ignored", async () => {
    await expect(fsyncDirectory(join(dir, "gone"))).rejects.toMatchObject({ code: "ENOENT" });
  });
});
