/**
 * The model's files in the page: the server's listing (GET /v1/models/{model}/files), each file fetched from
 * the server or, for a pulled bundle, from the hub it came from, and kept in the browser's Cache Storage
 * under its URL with the ETag it was fetched at. A file whose cached ETag is the listing's is read from the
 * cache and never fetched again; any other is fetched, and replaces the cached copy.
 *
 * Cache Storage exists only in secure contexts (https, or http on localhost / 127.0.0.1): elsewhere every
 * load fetches everything. Nothing here uses @huggingface/transformers' hub helpers: a hub file is one GET of
 * `{hub}/{repo}/resolve/{revision}/{path}` (the listing's `hub_url`, the URL `models pull` fetched it from),
 * and that package would bring a second onnxruntime-web build and its own native dependencies with it.
 */
import type { MountedFile } from "./platform/fs.ts";

/** One entry of the server's listing (src/http/model-files.ts). */
export interface ListedFile {
  name: string;
  size: number;
  etag: string;
  url: string;
  hub_url?: string;
  sha256?: string;
}

export type FileSource = "server" | "hub";

export interface FileProgress {
  file: string;
  /** Bytes of this file so far. */
  loadedBytes: number;
  totalBytes: number;
  /** Read from Cache Storage rather than fetched. */
  cached: boolean;
  /** Where the bytes came from. */
  from: "cache" | "server" | "hub";
}

export interface FileLoadTotals {
  fetchedBytes: number;
  cachedBytes: number;
  files: number;
}

const CACHE_NAME = "voxedge-model-files";
const CACHED_ETAG_HEADER = "X-Voxedge-Etag";
/** Progress messages for one file at most this often, besides its first and last. */
const PROGRESS_INTERVAL_MS = 100;

export async function fetchListing(url: string, headers: HeadersInit): Promise<ListedFile[]> {
  const response = await fetch(url, { headers });
  if (!response.ok) throw new Error(`${url} answered ${response.status}: ${await response.text()}`);
  const body = (await response.json()) as { data?: ListedFile[] };
  if (!Array.isArray(body.data)) throw new Error(`${url} did not answer a file listing`);
  return body.data;
}

async function openCache(): Promise<Cache | null> {
  if (typeof caches === "undefined") return null;
  try {
    return await caches.open(CACHE_NAME);
  } catch {
    return null;
  }
}

/** Reads a body, reporting its bytes as they arrive. */
async function readWithProgress(response: Response, total: number, report: (loaded: number) => void): Promise<Uint8Array> {
  if (!response.body) return new Uint8Array(await response.arrayBuffer());
  const reader = response.body.getReader();
  const bytes = new Uint8Array(total);
  let loaded = 0;
  let reportedAt = 0;
  const parts: Uint8Array[] = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (loaded + value.length <= bytes.length) bytes.set(value, loaded);
    else parts.push(value);
    loaded += value.length;
    const now = performance.now();
    if (now - reportedAt >= PROGRESS_INTERVAL_MS) {
      reportedAt = now;
      report(loaded);
    }
  }
  report(loaded);
  if (loaded === total && parts.length === 0) return bytes;
  // Not the listed size: the listing is stale or the transfer was cut; the caller checks.
  const all = new Uint8Array(loaded);
  all.set(bytes.subarray(0, Math.min(loaded, total)));
  let offset = Math.min(loaded, total);
  for (const part of parts) {
    all.set(part, offset);
    offset += part.length;
  }
  return all;
}

/**
 * The model's files as a file system sees them: each file loads on first read (from the cache, else the
 * network) and is held in memory until `release()`, since a load reads some graphs more than once (FlowLM's
 * is rewritten twice, then opened). `eager` files are loaded now, with their bytes, for synchronous reads.
 */
export class ModelFiles {
  readonly #listing: ListedFile[];
  readonly #held = new Map<string, Promise<Uint8Array>>();
  readonly totals: FileLoadTotals = { fetchedBytes: 0, cachedBytes: 0, files: 0 };
  #cache: Promise<Cache | null> | undefined;

  constructor(
    listing: readonly ListedFile[],
    /** `base`: the app's root URL, which the listing's file URLs are relative to. */
    private readonly options: { base: string; headers: HeadersInit; source: FileSource; onProgress?: (progress: FileProgress) => void },
  ) {
    this.#listing = [...listing];
  }

  /** name → MountedFile, for platform/fs.ts mountFiles. */
  async mountable(eager: (name: string) => boolean = () => false): Promise<Map<string, MountedFile>> {
    const entries = new Map<string, MountedFile>();
    for (const file of this.#listing) {
      entries.set(file.name, eager(file.name) ? { size: file.size, bytes: await this.bytes(file) } : { size: file.size, load: () => this.bytes(file) });
    }
    return entries;
  }

  /** Lets go of every file's bytes (the sessions have their own copies); later reads come from the cache. */
  release(): void {
    this.#held.clear();
  }

  bytes(file: ListedFile): Promise<Uint8Array> {
    let held = this.#held.get(file.name);
    if (!held) {
      held = this.#load(file);
      this.#held.set(file.name, held);
      held.catch(() => this.#held.delete(file.name));
    }
    return held;
  }

  async #load(file: ListedFile): Promise<Uint8Array> {
    this.#cache ??= openCache();
    const cache = await this.#cache;
    // The listing's URLs start at the app's root: resolved against it, they hold behind a path prefix too.
    const serverUrl = new URL(file.url.replace(/^\/+/, ""), this.options.base).href;
    const cached = await cache?.match(serverUrl);
    if (cached && cached.headers.get(CACHED_ETAG_HEADER) === file.etag) {
      const bytes = await readWithProgress(cached, file.size, (loaded) => this.#report(file, loaded, "cache"));
      if (bytes.length === file.size) {
        this.totals.cachedBytes += bytes.length;
        this.totals.files += 1;
        return bytes;
      }
    }
    const bytes = await this.#fetch(file, serverUrl);
    this.totals.fetchedBytes += bytes.length;
    this.totals.files += 1;
    if (cache) {
      const headers = { "Content-Type": "application/octet-stream", "Content-Length": String(bytes.length), [CACHED_ETAG_HEADER]: file.etag };
      // A full quota only costs the next load a fetch.
      await cache.put(serverUrl, new Response(bytes as BodyInit, { headers })).catch(() => undefined);
    }
    return bytes;
  }

  async #fetch(file: ListedFile, serverUrl: string): Promise<Uint8Array> {
    if (this.options.source === "hub" && file.hub_url) {
      try {
        return await this.#fetchFrom(file, file.hub_url, {}, "hub");
      } catch {
        // The hub is unreachable from this page (offline, blocked): the server has the same bytes.
      }
    }
    return this.#fetchFrom(file, serverUrl, this.options.headers, "server");
  }

  async #fetchFrom(file: ListedFile, url: string, headers: HeadersInit, from: "server" | "hub"): Promise<Uint8Array> {
    const response = await fetch(url, { headers });
    if (!response.ok) throw new Error(`${url} answered ${response.status}`);
    const bytes = await readWithProgress(response, file.size, (loaded) => this.#report(file, loaded, from));
    if (bytes.length !== file.size) throw new Error(`${url} sent ${bytes.length} bytes; the listing says ${file.size}`);
    if (file.sha256) {
      const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as BufferSource));
      const hex = Array.from(digest, (byte) => byte.toString(16).padStart(2, "0")).join("");
      if (hex !== file.sha256) throw new Error(`${url} does not have the listed SHA-256`);
    }
    return bytes;
  }

  #report(file: ListedFile, loadedBytes: number, from: FileProgress["from"]): void {
    this.options.onProgress?.({ file: file.name, loadedBytes, totalBytes: file.size, cached: from === "cache", from });
  }
}
