/** The browser build's read-only file system (src/browser/page/platform/fs.ts), as the pipeline's modules call it. */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mountFiles, open, readdir, readdirSync, readFile, readFileSync, stat, statSync, unmountFiles, writeFile, mkdir, type MountedFile } from "../../../../src/browser/page/platform/fs.ts";

const bytes = (...values: number[]) => new Uint8Array(values);

afterEach(() => unmountFiles("/bundle"));

describe("the page's file system", () => {
  test("mounted files and their folders exist, with their sizes, and list like a folder", async () => {
    mountFiles("/bundle", new Map<string, MountedFile>([["bundle.json", { size: 2, bytes: bytes(123, 125) }], ["voices/alba.safetensors", { size: 3, bytes: bytes(1, 2, 3) }]]));
    expect(existsSync("/bundle")).toBe(true);
    expect(existsSync("/bundle/voices")).toBe(true);
    expect(existsSync("/bundle/voices/alba.safetensors")).toBe(true);
    expect(existsSync("/bundle/missing.onnx")).toBe(false);
    expect(statSync("/bundle").isDirectory()).toBe(true);
    expect(statSync("/bundle/voices/alba.safetensors").isFile()).toBe(true);
    expect((await stat("/bundle/voices/alba.safetensors")).size).toBe(3);
    expect(readdirSync("/bundle")).toEqual(["bundle.json", "voices"]);
    expect(await readdir("/bundle/voices")).toEqual(["alba.safetensors"]);
    // Paths as the loaders build them (join, resolve, "./", "..").
    expect(await readFile("/bundle/./voices/../bundle.json", "utf8")).toBe("{}");
    expect(readFileSync("/bundle/bundle.json", "utf-8")).toBe("{}");
  });

  test("a file mounted to load on demand is fetched at each read, and cannot be read synchronously", async () => {
    let loads = 0;
    mountFiles("/bundle", new Map<string, MountedFile>([["graph.onnx", { size: 4, load: async () => (loads++, bytes(9, 8, 7, 6)) }]]));
    expect(loads).toBe(0);
    expect(await readFile("/bundle/graph.onnx")).toEqual(bytes(9, 8, 7, 6));
    expect(await readFile("/bundle/graph.onnx")).toEqual(bytes(9, 8, 7, 6));
    expect(loads).toBe(2);
    expect(() => readFileSync("/bundle/graph.onnx")).toThrow("mounted to load on demand");
  });

  test("a handle reads at positions, short at the end of the file", async () => {
    mountFiles("/bundle", new Map<string, MountedFile>([["data.bin", { size: 5, bytes: bytes(10, 11, 12, 13, 14) }]]));
    const handle = await open("/bundle/data.bin", "r");
    expect((await handle.stat()).size).toBe(5);
    const buffer = new Uint8Array(4);
    expect((await handle.read(buffer, 1, 2, 3)).bytesRead).toBe(2);
    expect(buffer).toEqual(bytes(0, 13, 14, 0));
    expect((await handle.read(buffer, 0, 4, 5)).bytesRead).toBe(0);
    await handle.close();
  });

  test("missing files are ENOENT, writes are EROFS, and unmounting forgets the files", async () => {
    mountFiles("/bundle", new Map<string, MountedFile>([["a.bin", { size: 1, bytes: bytes(1) }]]));
    await expect(readFile("/bundle/b.bin")).rejects.toMatchObject({ code: "ENOENT" });
    expect(() => statSync("/bundle/b.bin")).toThrow("ENOENT");
    await expect(open("/bundle/a.bin", "w")).rejects.toMatchObject({ code: "EROFS" });
    await expect(writeFile("/bundle/a.bin")).rejects.toMatchObject({ code: "EROFS" });
    await expect(mkdir("/bundle/cache")).rejects.toMatchObject({ code: "EROFS" });
    expect(() => readdirSync("/bundle/a.bin")).toThrow("ENOTDIR");
    unmountFiles("/bundle");
    expect(existsSync("/bundle/a.bin")).toBe(false);
    expect(existsSync("/bundle")).toBe(false);
  });
});
