/**
 * What the browser build of the pipeline gets for `node:fs` and `node:fs/promises` (build.ts maps both here):
 * a read-only file system of the model's files, mounted by the page's worker from what it fetched (or will
 * fetch on first read). The pipeline's modules (bundle loaders, sessions, tokenizer, conformance harness) read
 * files by path as they do on the server; here each path resolves to a mounted file. Only the calls those
 * modules make exist; a write fails as it would on a read-only volume.
 */

/** One mounted file: its size, and its bytes now (`bytes`) or on demand (`load`, asked at each read). */
export interface MountedFile {
  size: number;
  bytes?: Uint8Array;
  load?: () => Promise<Uint8Array>;
}

const files = new Map<string, MountedFile>();
const directories = new Set<string>(["/"]);

function normalize(path: string | URL): string {
  const text = typeof path === "string" ? path : path.pathname;
  const parts: string[] = [];
  for (const part of text.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") parts.pop();
    else parts.push(part);
  }
  return `/${parts.join("/")}`;
}

/** Mounts `entries` (relative names such as `voices/alba.safetensors`) under the folder `root`. */
export function mountFiles(root: string, entries: ReadonlyMap<string, MountedFile>): void {
  const base = normalize(root);
  for (const [name, file] of entries) {
    const path = normalize(`${base}/${name}`);
    files.set(path, file);
    for (let parent = path.slice(0, path.lastIndexOf("/")) || "/"; ; parent = parent.slice(0, parent.lastIndexOf("/")) || "/") {
      directories.add(parent);
      if (parent === "/") break;
    }
  }
  directories.add(base);
}

/** Forgets every file under `root` (a model switched out), so their bytes can be collected. */
export function unmountFiles(root: string): void {
  const base = normalize(root);
  for (const path of [...files.keys()]) if (path.startsWith(`${base}/`)) files.delete(path);
  for (const path of [...directories]) if (path === base || path.startsWith(`${base}/`)) directories.delete(path);
}

class FileSystemError extends Error {
  constructor(
    readonly code: string,
    syscall: string,
    readonly path: string,
  ) {
    super(`${code}: ${code === "ENOENT" ? "no such file or directory" : code === "EROFS" ? "read-only file system" : "not a directory"}, ${syscall} '${path}'`);
  }
}

function fileAt(path: string | URL, syscall: string): MountedFile {
  const file = files.get(normalize(path));
  if (!file) throw new FileSystemError("ENOENT", syscall, String(path));
  return file;
}

function decoded(bytes: Uint8Array, encoding: unknown): Uint8Array | string {
  const name = typeof encoding === "string" ? encoding : (encoding as { encoding?: string } | undefined)?.encoding;
  return name ? new TextDecoder(name === "utf8" ? "utf-8" : name).decode(bytes) : bytes;
}

async function bytesOf(file: MountedFile): Promise<Uint8Array> {
  if (file.bytes) return file.bytes;
  if (!file.load) throw new Error("a mounted file has neither bytes nor a loader");
  return file.load();
}

class Stats {
  constructor(
    readonly size: number,
    private readonly directory: boolean,
  ) {}
  readonly mtimeMs = 0;
  readonly mtime = new Date(0);
  isFile(): boolean {
    return !this.directory;
  }
  isDirectory(): boolean {
    return this.directory;
  }
  isSymbolicLink(): boolean {
    return false;
  }
}

function statOf(path: string | URL, syscall: string): Stats {
  const normalized = normalize(path);
  if (directories.has(normalized)) return new Stats(0, true);
  return new Stats(fileAt(path, syscall).size, false);
}

function listing(path: string | URL, syscall: string): string[] {
  const normalized = normalize(path);
  if (!directories.has(normalized)) throw new FileSystemError(files.has(normalized) ? "ENOTDIR" : "ENOENT", syscall, String(path));
  const prefix = normalized === "/" ? "/" : `${normalized}/`;
  const names = new Set<string>();
  for (const entry of [...files.keys(), ...directories]) {
    if (entry.startsWith(prefix) && entry.length > prefix.length) names.add(entry.slice(prefix.length).split("/")[0]!);
  }
  return [...names].sort();
}

// node:fs

export function existsSync(path: string | URL): boolean {
  const normalized = normalize(path);
  return files.has(normalized) || directories.has(normalized);
}

export function statSync(path: string | URL): Stats {
  return statOf(path, "stat");
}

export function readdirSync(path: string | URL): string[] {
  return listing(path, "scandir");
}

/** Only files mounted with their bytes can be read synchronously (the worker mounts those it reads so). */
export function readFileSync(path: string | URL, encoding?: unknown): Uint8Array | string {
  const file = fileAt(path, "open");
  if (!file.bytes) throw new Error(`${String(path)} is read synchronously but was mounted to load on demand`);
  return decoded(file.bytes, encoding);
}

// node:fs/promises

export async function readFile(path: string | URL, encoding?: unknown): Promise<Uint8Array | string> {
  return decoded(await bytesOf(fileAt(path, "open")), encoding);
}

export async function stat(path: string | URL): Promise<Stats> {
  return statOf(path, "stat");
}

export async function readdir(path: string | URL): Promise<string[]> {
  return listing(path, "scandir");
}

/** A handle that reads at positions, as proto.ts and safetensors.ts read headers without the whole file. */
export async function open(path: string | URL, flags = "r"): Promise<FileHandle> {
  if (flags !== "r") throw new FileSystemError("EROFS", "open", String(path));
  const file = fileAt(path, "open");
  return new FileHandle(file);
}

export class FileHandle {
  #bytes: Promise<Uint8Array> | undefined;
  constructor(private readonly file: MountedFile) {}
  async stat(): Promise<Stats> {
    return new Stats(this.file.size, false);
  }
  async read(buffer: Uint8Array, offset: number, length: number, position: number): Promise<{ bytesRead: number; buffer: Uint8Array }> {
    this.#bytes ??= bytesOf(this.file);
    const bytes = await this.#bytes;
    const end = Math.min(bytes.length, position + length);
    const bytesRead = Math.max(0, end - position);
    buffer.set(bytes.subarray(position, position + bytesRead), offset);
    return { bytesRead, buffer };
  }
  async close(): Promise<void> {
    this.#bytes = undefined;
  }
}

function readOnly(syscall: string) {
  return async (path: string | URL): Promise<never> => {
    throw new FileSystemError("EROFS", syscall, String(path));
  };
}

export const mkdir = readOnly("mkdir");
export const writeFile = readOnly("write");
export const rename = readOnly("rename");
export const unlink = readOnly("unlink");
export const rm = readOnly("rm");

export const promises = { readFile, stat, readdir, open, mkdir, writeFile, rename, unlink, rm };
export default { existsSync, statSync, readdirSync, readFileSync, promises };
