/**
 * A local stand-in for the Hugging Face hub, on 127.0.0.1 only, for `models pull` tests.
 *
 * It mimics what the real hub does on `/{repo}/resolve/{revision}/{path}`:
 * - an LFS file (`lfs: true`) answers 302 to a CDN URL (here `/cdn/<sha256>` on the same server) and carries
 *   `X-Linked-Size` and `X-Linked-Etag: "<sha256>"`; the CDN URL serves the bytes;
 * - a file kept in git answers 200 directly with `ETag: "<git blob sha1>"`;
 * - byte serving honours `Range: bytes=N-` / `bytes=N-M` with 206 and `Content-Range`, 416 when unsatisfiable.
 *
 * Every answer carries the hub's CORS headers (any origin), as a page fetching from it needs.
 *
 * Knobs: drop the connection or stall after N bytes (once), serve corrupted bytes, ignore Range; every request
 * is logged with its method, the repository path it concerns, and its Range header.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { CatalogEntry, CatalogFile } from "../../src/weights/catalog.ts";

export interface HubFile {
  /** Path inside the repository. */
  path: string;
  bytes: Uint8Array<ArrayBuffer>;
  /** Stored in LFS (served through a redirect with X-Linked-* headers) rather than in git. */
  lfs: boolean;
}

export interface HubRequest {
  method: string;
  /** Request path as sent. */
  urlPath: string;
  /** The repository path it concerns (for CDN requests too), when it concerns a known file. */
  file?: string;
  range?: string;
  status: number;
}

export interface HubServer {
  /** Base URL, e.g. http://127.0.0.1:40123 — what pullBundle takes as hubUrl. */
  url: string;
  requests: HubRequest[];
  /** The next byte transfer of `path` sends `afterBytes` bytes (of what was asked) and then drops the connection. */
  failOnce(path: string, afterBytes: number): void;
  /** The next byte transfer of `path` sends `afterBytes` bytes and then nothing until the client gives up. */
  stallOnce(path: string, afterBytes: number): void;
  /** While on, `path` is served with one byte flipped (same length and headers as the genuine file). */
  corrupt(path: string, enabled: boolean): void;
  /** While on, Range headers are ignored (200 with the whole file), as some mirrors do. */
  ignoreRanges(enabled: boolean): void;
  stop(): Promise<void>;
}

interface ServedFile extends HubFile {
  sha256: string;
  gitBlobSha1: string;
}

interface Interruption {
  afterBytes: number;
  kind: "fail" | "stall";
}

/** Time for the bytes sent before a dropped connection to reach the client first. */
const DROP_DELAY_MS = 30;

export function startHubServer(options: { repo: string; revision: string; files: readonly HubFile[] }): HubServer {
  const files = new Map<string, ServedFile>(options.files.map((file) => [file.path, { ...file, sha256: sha256Hex(file.bytes), gitBlobSha1: gitBlobSha1Hex(file.bytes) }]));
  const bySha256 = new Map([...files.values()].map((file) => [file.sha256, file]));
  const interruptions = new Map<string, Interruption>();
  const corrupted = new Set<string>();
  let rangesIgnored = false;
  const requests: HubRequest[] = [];
  const resolvePrefix = `/${options.repo}/resolve/${options.revision}/`;

  const serveBytes = (request: Request, file: ServedFile, headers: Record<string, string>): Response => {
    const body = corrupted.has(file.path) ? flipOneByte(file.bytes) : file.bytes;
    const total = body.byteLength;
    const rangeHeader = rangesIgnored ? null : request.headers.get("range");
    let start = 0;
    let end = total - 1;
    let status = 200;
    const responseHeaders: Record<string, string> = { ...headers, "accept-ranges": "bytes" };
    if (rangeHeader !== null) {
      const match = /^bytes=(\d+)-(\d*)$/.exec(rangeHeader);
      const first = match ? Number(match[1]) : NaN;
      const last = match?.[2] ? Math.min(Number(match[2]), total - 1) : total - 1;
      if (!match || first >= total || first > last) {
        return new Response(null, { status: 416, headers: { ...responseHeaders, "content-range": `bytes */${total}` } });
      }
      start = first;
      end = last;
      status = 206;
      responseHeaders["content-range"] = `bytes ${start}-${end}/${total}`;
    }
    const slice = body.subarray(start, end + 1);
    if (request.method === "HEAD") {
      return new Response(null, { status, headers: { ...responseHeaders, "content-length": String(slice.byteLength) } });
    }
    const interruption = interruptions.get(file.path);
    if (interruption) {
      interruptions.delete(file.path);
      return new Response(interruptedBody(slice.subarray(0, interruption.afterBytes), interruption.kind), { status, headers: responseHeaders });
    }
    return new Response(slice, { status, headers: responseHeaders });
  };

  const route = (request: Request, url: URL): { response: Response; file?: string } => {
    if (request.method !== "GET" && request.method !== "HEAD") return { response: new Response(null, { status: 405 }) };
    if (url.pathname.startsWith("/cdn/")) {
      const file = bySha256.get(url.pathname.slice("/cdn/".length));
      if (!file) return { response: new Response("no such blob", { status: 404 }) };
      return { response: serveBytes(request, file, {}), file: file.path };
    }
    if (!url.pathname.startsWith(resolvePrefix)) return { response: new Response("Repository not found", { status: 404, headers: { "x-error-code": "RepoNotFound" } }) };
    const path = decodeURIComponent(url.pathname.slice(resolvePrefix.length));
    const file = files.get(path);
    if (!file) return { response: new Response("Entry not found", { status: 404, headers: { "x-error-code": "EntryNotFound" } }) };
    const commit = { "x-repo-commit": options.revision };
    if (file.lfs) {
      const headers = { ...commit, location: `/cdn/${file.sha256}`, "x-linked-size": String(file.bytes.byteLength), "x-linked-etag": `"${file.sha256}"`, etag: `"${file.sha256}"` };
      return { response: new Response(null, { status: 302, headers }), file: path };
    }
    return { response: serveBytes(request, file, { ...commit, etag: `"${file.gitBlobSha1}"` }), file: path };
  };

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(request) {
      const url = new URL(request.url);
      const { response, file } = route(request, url);
      requests.push({ method: request.method, urlPath: url.pathname, file, range: request.headers.get("range") ?? undefined, status: response.status });
      // As the hub does, so a page on another origin (the in-browser engine) may fetch from it.
      response.headers.set("access-control-allow-origin", "*");
      response.headers.set("access-control-expose-headers", "etag, content-length, content-range, x-linked-size, x-linked-etag");
      return response;
    },
  });

  return {
    url: `http://127.0.0.1:${server.port}`,
    requests,
    failOnce: (path, afterBytes) => interruptions.set(path, { afterBytes, kind: "fail" }),
    stallOnce: (path, afterBytes) => interruptions.set(path, { afterBytes, kind: "stall" }),
    corrupt: (path, enabled) => void (enabled ? corrupted.add(path) : corrupted.delete(path)),
    ignoreRanges: (enabled) => void (rangesIgnored = enabled),
    stop: () => server.stop(true),
  };
}

/** Sends `head`, then either errors the stream (the client sees a reset connection) or waits for cancellation. */
function interruptedBody(head: Uint8Array<ArrayBuffer>, kind: Interruption["kind"]): ReadableStream<Uint8Array<ArrayBuffer>> {
  let sent = false;
  let release: () => void = () => {};
  return new ReadableStream<Uint8Array<ArrayBuffer>>({
    async pull(controller) {
      if (!sent) {
        sent = true;
        controller.enqueue(head);
        return;
      }
      if (kind === "fail") {
        await Bun.sleep(DROP_DELAY_MS);
        // An error without a reason drops the connection without Bun printing an error report.
        controller.error(undefined);
        return;
      }
      await new Promise<void>((resolve) => (release = resolve));
    },
    cancel() {
      release();
    },
  });
}

function flipOneByte(bytes: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  const copy = bytes.slice();
  const middle = copy.byteLength >> 1;
  copy[middle] = (copy[middle] ?? 0) ^ 0xff;
  return copy;
}

export function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

function gitBlobSha1Hex(bytes: Uint8Array): string {
  return createHash("sha1").update(`blob ${bytes.byteLength}\0`).update(bytes).digest("hex");
}

// --- the pocket-tiny fixture as a hub repository -------------------------------------------------------------

export const POCKET_TINY_DIR = join(import.meta.dir, "../../../shared/fixtures/pocket-tiny");
export const TINY_REPO = "voxedge-test/pocket-tiny-onnx";
export const TINY_REVISION = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c";
const TINY_FOLDER = "onnx/tiny";

/**
 * The fixture's files in the order the test entry lists them. bundle.json is served from git (git blob ETag),
 * the rest through LFS, as on the real hub.
 */
export const TINY_FILE_NAMES = [
  "bundle.json",
  "tokenizer.model",
  "bos_before_voice.npy",
  "text_conditioner.onnx",
  "mimi_encoder.onnx",
  "flow_lm_main.onnx",
  "flow_lm_flow.onnx",
  "mimi_decoder.onnx",
] as const;

export type TinyFileName = (typeof TINY_FILE_NAMES)[number];

export const tinyRepoPath = (name: TinyFileName) => `${TINY_FOLDER}/${name}`;

export function readTinyFixture(name: TinyFileName): Uint8Array<ArrayBuffer> {
  return new Uint8Array(readFileSync(join(POCKET_TINY_DIR, name)));
}

/**
 * A catalog entry for the fixture that exercises every way of knowing a file's checksum: tokenizer.model is
 * pinned (size and sha256), bos_before_voice.npy pins only its size (sha256 from the hub), the graphs rely on
 * the hub's X-Linked-* metadata, and bundle.json on the git blob ETag.
 */
export function pocketTinyCatalogEntry(overrides: Partial<Record<TinyFileName, Omit<CatalogFile, "path">>> = {}): CatalogEntry {
  const tokenizer = readTinyFixture("tokenizer.model");
  const pins: Partial<Record<TinyFileName, Omit<CatalogFile, "path">>> = {
    "tokenizer.model": { sizeBytes: tokenizer.byteLength, sha256: sha256Hex(tokenizer) },
    "bos_before_voice.npy": { sizeBytes: readTinyFixture("bos_before_voice.npy").byteLength },
    ...overrides,
  };
  return {
    name: "pocket-tiny",
    repo: TINY_REPO,
    revision: TINY_REVISION,
    licence: "test fixture",
    description: "random-weight pocket-tiny fixture",
    defaultLanguage: "english",
    defaultPrecision: "fp32",
    languages: { english: { fp32: TINY_FILE_NAMES.map((name) => ({ path: tinyRepoPath(name), ...pins[name] })) } },
  };
}

/** The hub serving pocket-tiny under the test entry's repository, revision and paths. */
export function startPocketTinyHub(): HubServer {
  return startHubServer({
    repo: TINY_REPO,
    revision: TINY_REVISION,
    files: TINY_FILE_NAMES.map((name) => ({ path: tinyRepoPath(name), bytes: readTinyFixture(name), lfs: name !== "bundle.json" })),
  });
}
