/**
 * `ref_audio` → mono samples at the model's rate. Three sources: `data:` (base64), `http(s)://` through
 * the guarded fetcher (address rules, redirects, size and time caps), and `file://` below the one
 * configured folder (checked on the real path, symlinks resolved). Resolved audio is kept in an LRU
 * bounded by entries and bytes; local files are keyed by path + mtime + size so an edited file is re-read.
 */
import { createHash } from "node:crypto";
import { open, realpath } from "node:fs/promises";
import { sep } from "node:path";
import { fileURLToPath } from "node:url";
import { LRUCache } from "lru-cache";
import { badRequest } from "../api/errors.ts";
import { AudioDecodeError, decodeAudio, downmixToMono } from "../audio/decoders.ts";
import { resample } from "../audio/resampler.ts";
import { fetchRemoteMedia, type RemoteMediaOptions } from "./remote-media.ts";

export const REF_AUDIO_MIN_SECONDS = 1;
export const REF_AUDIO_MAX_SECONDS = 30;
const CACHE_MAX_ENTRIES = 256;
const CACHE_MAX_BYTES = 256 * 1024 * 1024;
const MAX_LOCAL_FILE_BYTES = 32 * 1024 * 1024;
/** A file rewritten while we read it is read again, this many times at most. */
const LOCAL_READ_ATTEMPTS = 3;

export interface RefAudioResolverOptions {
  allowedDomains: readonly string[];
  /** The only folder file:// may read from; undefined refuses file:// altogether. */
  allowedLocalMediaPath?: string;
  /** Injected resolver/connector and caps of the remote fetcher (tests). */
  remote?: Omit<RemoteMediaOptions, "allowedDomains">;
  cacheMaxEntries?: number;
  cacheMaxBytes?: number;
}

export class RefAudioResolver {
  readonly #cache: LRUCache<string, Float32Array>;
  #allowedRoot: Promise<string> | undefined;

  constructor(private readonly options: RefAudioResolverOptions) {
    this.#cache = new LRUCache<string, Float32Array>({
      max: options.cacheMaxEntries ?? CACHE_MAX_ENTRIES,
      maxSize: options.cacheMaxBytes ?? CACHE_MAX_BYTES,
      sizeCalculation: (samples) => Math.max(1, samples.byteLength),
    });
  }

  get cachedEntries(): number {
    return this.#cache.size;
  }

  get cachedBytes(): number {
    return this.#cache.calculatedSize;
  }

  /** Mono samples at targetRateHz, 1–30 s long. Throws ApiError 400 (param ref_audio) on any caller mistake. */
  async resolve(reference: string, targetRateHz: number, signal: AbortSignal): Promise<Float32Array> {
    const scheme = reference.slice(0, reference.indexOf(":") + 1).toLowerCase();
    if (scheme === "data:") {
      return this.#cached(`data:${sha256(reference)}@${targetRateHz}`, () => decodeDataUrl(reference), targetRateHz);
    }
    if (scheme === "http:" || scheme === "https:") {
      return this.#cached(`url:${reference}@${targetRateHz}`, async () => {
        const fetched = await fetchRemoteMedia(reference, { allowedDomains: this.options.allowedDomains, ...this.options.remote }, signal);
        return fetched.bytes;
      }, targetRateHz);
    }
    if (scheme === "file:") return this.#resolveLocal(reference, targetRateHz);
    throw badRequest("ref_audio must be a data: URL (base64), an http(s) URL, or a file:// URL", "ref_audio");
  }

  async #cached(key: string, load: () => Promise<Uint8Array>, targetRateHz: number): Promise<Float32Array> {
    const hit = this.#cache.get(key);
    if (hit) return hit;
    const samples = await decodeReference(await load(), targetRateHz);
    this.#cache.set(key, samples);
    return samples;
  }

  async #resolveLocal(reference: string, targetRateHz: number): Promise<Float32Array> {
    if (this.options.allowedLocalMediaPath === undefined) {
      throw badRequest("file:// ref_audio is disabled: no allowed local media folder is configured", "ref_audio");
    }
    let requestedPath: string;
    try {
      const url = new URL(reference);
      if (url.hostname !== "" && url.hostname !== "localhost") throw new Error("remote file host");
      requestedPath = fileURLToPath(url);
    } catch {
      throw badRequest("ref_audio file:// URL is malformed or names a remote host", "ref_audio");
    }
    this.#allowedRoot ??= realpath(this.options.allowedLocalMediaPath);
    const root = await this.#allowedRoot.catch(() => {
      this.#allowedRoot = undefined;
      throw badRequest("the allowed local media folder does not exist", "ref_audio");
    });
    // The real path, after every symlink: a link inside the folder that points outside it is refused.
    const realPath = await realpath(requestedPath).catch(() => {
      throw badRequest("ref_audio file does not exist or is not readable", "ref_audio");
    });
    if (!realPath.startsWith(root.endsWith(sep) ? root : root + sep)) {
      throw badRequest("ref_audio file is outside the allowed local media folder", "ref_audio");
    }
    for (let attempt = 0; attempt < LOCAL_READ_ATTEMPTS; attempt++) {
      const read = await readStableFile(realPath);
      if (read === "changed") continue;
      const key = `file:${realPath}:${read.mtimeMs}:${read.size}@${targetRateHz}`;
      const hit = this.#cache.get(key);
      if (hit) return hit;
      const samples = await decodeReference(read.bytes, targetRateHz);
      this.#cache.set(key, samples);
      return samples;
    }
    throw badRequest("ref_audio file kept changing while it was read; try again", "ref_audio");
  }
}

/** Reads a file and checks it did not change meanwhile (same size and mtime before and after). */
async function readStableFile(path: string): Promise<{ bytes: Uint8Array; mtimeMs: number; size: number } | "changed"> {
  const handle = await open(path, "r").catch(() => {
    throw badRequest("ref_audio file is not readable", "ref_audio");
  });
  try {
    const before = await handle.stat();
    if (!before.isFile()) throw badRequest("ref_audio file:// must name a regular file", "ref_audio");
    if (before.size > MAX_LOCAL_FILE_BYTES) throw badRequest(`ref_audio file is larger than ${MAX_LOCAL_FILE_BYTES} bytes`, "ref_audio");
    const bytes = new Uint8Array(await handle.readFile());
    const after = await handle.stat();
    if (after.size !== before.size || after.mtimeMs !== before.mtimeMs || bytes.byteLength !== before.size) return "changed";
    return { bytes, mtimeMs: before.mtimeMs, size: before.size };
  } finally {
    await handle.close();
  }
}

function decodeDataUrl(reference: string): Promise<Uint8Array> {
  const comma = reference.indexOf(",");
  const header = comma < 0 ? "" : reference.slice(5, comma).toLowerCase();
  if (comma < 0 || !header.split(";").includes("base64")) {
    throw badRequest("ref_audio data: URL must be base64 (data:audio/…;base64,…)", "ref_audio");
  }
  const mediaType = header.split(";")[0] ?? "";
  if (mediaType !== "" && !mediaType.startsWith("audio/") && mediaType !== "application/octet-stream") {
    throw badRequest(`ref_audio data: URL has media type ${mediaType}; expected audio/…`, "ref_audio");
  }
  const payload = reference.slice(comma + 1).trim();
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(payload)) throw badRequest("ref_audio data: URL is not valid base64", "ref_audio");
  return Promise.resolve(new Uint8Array(Buffer.from(payload, "base64")));
}

/** Any supported container → mono at targetRateHz, with the 1–30 s rule checked on the source length. */
export async function decodeReference(bytes: Uint8Array, targetRateHz: number): Promise<Float32Array> {
  let decoded;
  try {
    decoded = await decodeAudio(bytes);
  } catch (error) {
    if (error instanceof AudioDecodeError) throw badRequest(`ref_audio could not be decoded: ${error.message}`, "ref_audio");
    throw error;
  }
  const mono = downmixToMono(decoded);
  checkReferenceDuration(mono.length / decoded.sampleRateHz, "ref_audio");
  return resample(mono, decoded.sampleRateHz, targetRateHz);
}

export function checkReferenceDuration(seconds: number, param: string): void {
  if (seconds < REF_AUDIO_MIN_SECONDS || seconds > REF_AUDIO_MAX_SECONDS) {
    throw badRequest(`${param} is ${seconds.toFixed(2)} s long; ${REF_AUDIO_MIN_SECONDS}–${REF_AUDIO_MAX_SECONDS} s of audio is required`, param);
  }
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
