/**
 * `ref_audio` → mono samples at the model's rate. Three sources: `data:` (base64), `http(s)://` through
 * the guarded fetcher (address rules, redirects, size and time caps), and `file://` below the one
 * configured folder. Resolved audio is kept in an LRU bounded by entries and bytes; local files are keyed
 * by path + mtime + size so an edited file is re-read.
 *
 * A local file is checked after it is opened, on what was opened: checking a path and then opening it
 * lets a symlink swapped in between (for the file or any folder above it) point the open outside. The
 * open handle must be a regular file whose real location is inside the folder; the read is capped in bytes
 * and time.
 */
import { createHash } from "node:crypto";
import { constants, type Stats } from "node:fs";
import { open, readlink, realpath, stat, type FileHandle } from "node:fs/promises";
import { sep } from "node:path";
import { fileURLToPath } from "node:url";
import { LRUCache } from "lru-cache";
import { badRequest } from "../api/errors.ts";
import { AudioDecodeError, AudioTooLongError, decodeAudio, downmixToMono } from "../audio/decoders.ts";
import { lazyLoad } from "../lib/lazy-load.ts";
import { resample } from "../audio/resampler.ts";
import { fetchRemoteMedia, REF_AUDIO_MAX_BYTES, type RemoteMediaOptions } from "./remote-media.ts";

export const REF_AUDIO_MIN_SECONDS = 1;
export const REF_AUDIO_MAX_SECONDS = 30;
const CACHE_MAX_ENTRIES = 256;
const CACHE_MAX_BYTES = 256 * 1024 * 1024;
/** A file rewritten (or relinked) while we open or read it is tried again, this many times at most. */
const LOCAL_READ_ATTEMPTS = 3;
/**
 * Reading at most 32 MiB from a local disk takes well under a second; a read still going after 5 s is a
 * stalled file system (a hung network or FUSE mount), and the request stops waiting for it.
 */
const LOCAL_READ_TIMEOUT_MS = 5_000;
/**
 * O_NONBLOCK: opening a FIFO returns at once (and is refused as not a regular file) instead of holding a
 * file-system thread until a writer appears; a few such opens would stall every file operation in the
 * process. It changes nothing for regular files. O_NOFOLLOW: a last path component swapped for a symlink
 * fails to open (ELOOP) rather than being followed. Platforms without these flags (Windows) get 0.
 */
const LOCAL_OPEN_FLAGS = constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | (constants.O_NOFOLLOW ?? 0);

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
  /** The allowed folder's real path; a folder that is missing now is looked up again next time. */
  readonly #allowedRoot = lazyLoad(() => realpath(this.options.allowedLocalMediaPath!));

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
    const root = await this.#allowedRoot().catch(() => {
      throw badRequest("the allowed local media folder does not exist", "ref_audio");
    });
    const read = await withinDeadline(readInsideFolder(requestedPath, root), LOCAL_READ_TIMEOUT_MS);
    const key = `file:${read.path}:${read.mtimeMs}:${read.size}@${targetRateHz}`;
    const hit = this.#cache.get(key);
    if (hit) return hit;
    const samples = await decodeReference(read.bytes, targetRateHz);
    this.#cache.set(key, samples);
    return samples;
  }
}

interface LocalFile {
  /** Where the opened file really is (no symlinks), inside the allowed folder. */
  path: string;
  bytes: Uint8Array;
  mtimeMs: number;
  size: number;
}

async function readInsideFolder(requestedPath: string, root: string): Promise<LocalFile> {
  for (let attempt = 0; attempt < LOCAL_READ_ATTEMPTS; attempt++) {
    const read = await readOnce(requestedPath, root);
    if (read !== "changed") return read;
  }
  throw badRequest("ref_audio file kept changing while it was opened or read; try again", "ref_audio");
}

/**
 * The path checks before the open refuse the ordinary cases without opening anything (a device can act
 * on open); the checks after it, on the handle, are the ones a concurrent swap cannot get past.
 */
async function readOnce(requestedPath: string, root: string): Promise<LocalFile | "changed"> {
  const realPath = await realpath(requestedPath).catch(() => {
    throw badRequest("ref_audio file does not exist or is not readable", "ref_audio");
  });
  if (!isInsideFolder(realPath, root)) throw outsideFolder();
  const found = await stat(realPath).catch(() => undefined);
  if (found === undefined) return "changed";
  if (!found.isFile()) throw notRegularFile();

  let handle: FileHandle;
  try {
    handle = await open(realPath, LOCAL_OPEN_FLAGS);
  } catch (error) {
    // ELOOP: the file became a symlink after realpath; ENOENT: it was renamed or removed meanwhile.
    const code = errorCode(error);
    if (code === "ELOOP" || code === "ENOENT") return "changed";
    throw badRequest("ref_audio file is not readable", "ref_audio");
  }
  try {
    const before = await handle.stat();
    if (!before.isFile()) throw notRegularFile();
    const openedPath = await locationOfOpenFile(handle, realPath, before);
    if (openedPath === undefined) return "changed";
    if (!isInsideFolder(openedPath, root)) throw outsideFolder();
    if (before.size > REF_AUDIO_MAX_BYTES) throw badRequest(`ref_audio file is larger than ${REF_AUDIO_MAX_BYTES / (1024 * 1024)} MiB`, "ref_audio");
    const bytes = await readExactly(handle, before.size);
    const after = await handle.stat();
    if (bytes === undefined || after.size !== before.size || after.mtimeMs !== before.mtimeMs) return "changed";
    return { path: openedPath, bytes, mtimeMs: before.mtimeMs, size: before.size };
  } finally {
    await handle.close();
  }
}

/**
 * The real path of what `handle` has open. Linux names it in /proc/self/fd: the kernel's answer, whatever
 * was swapped along the path before the open. Without procfs, the path is resolved again and must still
 * name the opened file (device + inode); that narrows the race to the gap between that realpath and stat,
 * as node:fs has no openat to walk a path without following links. Undefined: the path no longer names it.
 */
async function locationOfOpenFile(handle: FileHandle, resolvedPath: string, opened: Stats): Promise<string | undefined> {
  const kernelPath = await readlink(`/proc/self/fd/${handle.fd}`).catch(() => undefined);
  if (kernelPath !== undefined) return kernelPath;
  const again = await realpath(resolvedPath).catch(() => undefined);
  if (again === undefined) return undefined;
  const current = await stat(again).catch(() => undefined);
  return current !== undefined && current.dev === opened.dev && current.ino === opened.ino ? again : undefined;
}

/** The first byteCount bytes, or undefined if the file ends sooner; never reads further, so growth cannot pass the cap. */
async function readExactly(handle: FileHandle, byteCount: number): Promise<Uint8Array | undefined> {
  const bytes = new Uint8Array(byteCount);
  let filledBytes = 0;
  while (filledBytes < byteCount) {
    const { bytesRead } = await handle.read(bytes, filledBytes, byteCount - filledBytes, filledBytes);
    if (bytesRead === 0) return undefined;
    filledBytes += bytesRead;
  }
  return bytes;
}

/** The request stops waiting at the deadline; the stalled read finishes (and closes its handle) in the background. */
async function withinDeadline<T>(work: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(badRequest(`ref_audio file could not be read within ${timeoutMs / 1000} s`, "ref_audio")), timeoutMs);
  });
  work.catch(() => undefined);
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}

function isInsideFolder(path: string, root: string): boolean {
  return path.startsWith(root.endsWith(sep) ? root : root + sep);
}

function outsideFolder() {
  return badRequest("ref_audio file is outside the allowed local media folder", "ref_audio");
}

function notRegularFile() {
  return badRequest("ref_audio file:// must name a regular file, not a folder, device or pipe", "ref_audio");
}

function errorCode(error: unknown): string | undefined {
  return typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : undefined;
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
  const { samples, sampleRateHz } = await decodeReferenceAudio(bytes, "ref_audio");
  return resample(samples, sampleRateHz, targetRateHz);
}

/**
 * The one place the 1–30 s rule is applied, for uploads and ref_audio alike: mono at the file's own rate.
 * The upper bound is part of the decode, so a file that decodes to hours stops after ~30 s of samples.
 * Throws ApiError 400 naming `param`.
 */
export async function decodeReferenceAudio(bytes: Uint8Array, param: string): Promise<{ samples: Float32Array; sampleRateHz: number }> {
  const required = `${REF_AUDIO_MIN_SECONDS}–${REF_AUDIO_MAX_SECONDS} s of audio is required`;
  let decoded;
  try {
    decoded = await decodeAudio(bytes, { maxDurationSeconds: REF_AUDIO_MAX_SECONDS });
  } catch (error) {
    if (error instanceof AudioTooLongError) throw badRequest(`${param} is longer than the ${REF_AUDIO_MAX_SECONDS} s limit (${error.evidence}); ${required}`, param);
    if (error instanceof AudioDecodeError) throw badRequest(`${param} could not be decoded: ${error.message}`, param);
    throw error;
  }
  const samples = downmixToMono(decoded);
  const seconds = samples.length / decoded.sampleRateHz;
  if (seconds < REF_AUDIO_MIN_SECONDS) throw badRequest(`${param} is ${seconds.toFixed(2)} s long; ${required}`, param);
  return { samples, sampleRateHz: decoded.sampleRateHz };
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
