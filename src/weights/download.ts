/**
 * `models pull`: downloads one catalog bundle from a Hugging Face style hub into
 * `<cacheDir>/<bundle id>/<revision>/`, a flat folder the bundle loader reads.
 *
 * Every file is checked for size and checksum before it is used. The expected values come from the catalog's
 * pins or, where the catalog has none, from the hub's metadata: a HEAD on `/{repo}/resolve/{revision}/{path}`
 * answers with `X-Linked-Size`/`X-Linked-Etag` (the sha256 of an LFS file) or, for a small file kept in git
 * itself, `ETag` = its git blob id (sha1 of `"blob <size>\0" + bytes`). Both are checkable, so nothing is
 * accepted on trust. Where a pin and the hub disagree the pull stops before downloading anything: the pinned
 * revision and the hub do not describe the same bytes.
 *
 * Crash and interruption safety, in the order things happen on disk:
 *   name.part   bytes arrive here; an interrupted transfer keeps it and the next attempt (in this call, after a
 *               short back-off, or in a later pull) asks for the rest with `Range: bytes=<part size>-`
 *   name        the part is verified, fsynced and renamed; a file that fails verification is deleted, so a
 *               retry fetches it from scratch
 *   complete.json  written durably (durable-write.ts) only after every file is in place and the folder fsynced
 *               (a folder that cannot be fsynced stops the pull before it): a folder without it is a
 *               half-pulled bundle and is never used (findCachedBundle ignores it)
 * A re-pull of a complete bundle re-hashes the local files against complete.json and touches the network only
 * if one of them changed; a re-pull of a partial bundle re-hashes files already present and downloads the rest.
 */
import { createHash, type Hash } from "node:crypto";
import { mkdir, open, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { fsyncDirectory, writeFileDurably } from "../lib/durable-write.ts";
import type { S3Bucket } from "../storage/s3.ts";
import { DEFAULT_HUB_URL, PRECISIONS, resolveBundle, resolveUrl, type BundleFile, type CatalogEntry, type Precision, type ResolvedBundle } from "./catalog.ts";

export const COMPLETE_MARKER_FILE = "complete.json";
const PART_SUFFIX = ".part";
/** Tries per file (and per metadata request) when the connection drops, stalls or the hub answers 5xx/429. */
const MAX_ATTEMPTS = 4;
const RETRY_DELAYS_MS = [250, 1000, 3000] as const;
const DEFAULT_IDLE_TIMEOUT_MS = 60_000;
const HASH_READ_BYTES = 1 << 20;
/** huggingface_hub follows only same-origin redirects on HEAD: a cross-origin CDN URL is presigned for GET. */
const MAX_SAME_ORIGIN_REDIRECTS = 5;
const SHA256_HEX = /^[0-9a-f]{64}$/;
const GIT_SHA1_HEX = /^[0-9a-f]{40}$/;

export interface PullOptions {
  /** Catalog entry name; the catalog's first entry when omitted. */
  name?: string;
  language?: string;
  precision?: Precision;
  /** Hub base URL (`VOXEDGE_HUB_URL`); https://huggingface.co when omitted. */
  hubUrl?: string;
  cacheDir: string;
  signal?: AbortSignal;
  onProgress?: (progress: PullProgress) => void;
  /** Bundles to choose from; the built-in Pocket catalog when omitted. */
  catalog?: readonly CatalogEntry[];
  /** A transfer that receives nothing for this long is dropped and resumed. */
  idleTimeoutMs?: number;
  /**
   * An S3 mirror of a model cache (`models pull --from s3://BUCKET/PREFIX`), read instead of the hub: the bundle's
   * folder as a pull leaves it, under PREFIX/<bundle>/<revision>/, its complete.json giving each file's size
   * and sha256 (which must agree with the catalog's pins).
   */
  mirror?: { bucket: S3Bucket; prefix: string };
}

/**
 * downloading: bytes are arriving; verifying: hashing a finished download or a file found on disk;
 * verified: downloaded and checked; cached: already on disk and checked, nothing downloaded.
 */
export type PullFileState = "downloading" | "verifying" | "verified" | "cached";

export interface PullProgress {
  bundle: string;
  /** Name of the file in the bundle folder. */
  file: string;
  /** 0-based position of the file in the bundle; files are fetched one after another in this order. */
  fileIndex: number;
  fileCount: number;
  state: PullFileState;
  fileBytes: number;
  fileTotalBytes: number;
  /** Bytes of the whole bundle on disk and accounted for so far. */
  bytes: number;
  totalBytes: number;
}

/** A pull that cannot succeed as asked; the message names the file and says what to do. */
export class PullError extends Error {
  override name = "PullError";
}

/** A transfer that broke in a way another attempt may fix (dropped connection, stall, 5xx, 429). */
class TransferInterrupted extends Error {}

const manifestFileSchema = z.object({
  name: z.string().regex(/^(?!\.\.?$)[^/\\\0]+$/, "a plain file name"),
  repoPath: z.string(),
  sizeBytes: z.number().int().nonnegative(),
  sha256: z.string().regex(SHA256_HEX),
});

const manifestSchema = z.object({
  format: z.literal("voxedge-bundle-1"),
  bundle: z.string(),
  catalogName: z.string(),
  repo: z.string(),
  revision: z.string(),
  language: z.string(),
  precision: z.enum(PRECISIONS),
  hubUrl: z.string(),
  completedAt: z.string(),
  files: z.array(manifestFileSchema).min(1),
});

/** Contents of `complete.json`: what was pulled, from where, and each file's verified size and sha256. */
export type BundleManifest = z.infer<typeof manifestSchema>;

/** Downloads (or confirms) every file of the requested bundle; resolves to the bundle folder. */
export async function pullBundle(options: PullOptions): Promise<string> {
  const bundle = resolveBundle(options, options.catalog);
  const hubUrl = options.hubUrl ?? DEFAULT_HUB_URL;
  const { signal } = options;
  const dir = join(options.cacheDir, bundle.id, bundle.revision);
  signal?.throwIfAborted();
  await mkdir(dir, { recursive: true });

  if (await confirmCompleteBundle(dir, bundle, options.onProgress, signal)) return dir;
  await rm(join(dir, COMPLETE_MARKER_FILE), { force: true });

  const expectedFiles: ExpectedFile[] = [];
  if (options.mirror !== undefined) expectedFiles.push(...(await mirrorExpectations(options.mirror, bundle, signal)));
  else for (const file of bundle.files) expectedFiles.push(await expectationFor(file, bundle, hubUrl, signal));
  const download = options.mirror === undefined ? fetch : (url: string, init: RequestInit) => options.mirror!.bucket.signedFetch(url, init);
  const progress = new ProgressReporter(bundle.id, expectedFiles.map((expected) => expected.sizeBytes), options.onProgress);
  const idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;

  const pulledFiles: BundleManifest["files"] = [];
  for (const [index, expected] of expectedFiles.entries()) {
    const report = (state: PullFileState, fileBytes: number) => progress.report(index, expected.file.localName, state, fileBytes);
    pulledFiles.push(await pullFile(dir, expected, { signal, idleTimeoutMs, report, fetch: download }));
  }

  await fsyncDirectory(dir);
  const manifest: BundleManifest = {
    format: "voxedge-bundle-1",
    bundle: bundle.id,
    catalogName: bundle.catalogName,
    repo: bundle.repo,
    revision: bundle.revision,
    language: bundle.language,
    precision: bundle.precision,
    hubUrl: options.mirror === undefined ? hubUrl : `s3://${options.mirror.bucket.bucket}/${options.mirror.prefix}`,
    completedAt: new Date().toISOString(),
    files: pulledFiles,
  };
  await writeFileDurably(join(dir, COMPLETE_MARKER_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
  return dir;
}

/**
 * The folder of a completely pulled bundle whose name or catalog name is `name` (any bundle when omitted), the
 * most recently completed one when several match. Checks that every listed file exists with its recorded size;
 * hashes are checked by pullBundle, not here, so a server start stays fast.
 */
export async function findCachedBundle(cacheDir: string, name?: string): Promise<string | undefined> {
  const candidates: { dir: string; completedAt: string }[] = [];
  for (const bundleDir of await subdirectories(cacheDir)) {
    for (const dir of await subdirectories(bundleDir)) {
      const manifest = await readBundleManifest(dir);
      if (!manifest) continue;
      if (name !== undefined && manifest.bundle !== name && manifest.catalogName !== name) continue;
      if (await allFilesPresent(dir, manifest)) candidates.push({ dir, completedAt: manifest.completedAt });
    }
  }
  candidates.sort((a, b) => b.completedAt.localeCompare(a.completedAt) || a.dir.localeCompare(b.dir));
  return candidates[0]?.dir;
}

/** The parsed `complete.json` of a bundle folder, or undefined when it is missing or malformed. */
export async function readBundleManifest(dir: string): Promise<BundleManifest | undefined> {
  let text: string;
  try {
    text = await readFile(join(dir, COMPLETE_MARKER_FILE), "utf8");
  } catch {
    return undefined;
  }
  try {
    const parsed = manifestSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

interface ExpectedFile {
  file: BundleFile;
  url: string;
  sizeBytes: number;
  /** Exactly one of sha256 / gitBlobSha1 is set. */
  sha256?: string;
  gitBlobSha1?: string;
  /** Where the checksum came from, for error messages. */
  checksumSource: string;
}

interface FileDigest {
  sizeBytes: number;
  sha256: string;
  gitBlobSha1?: string;
}

/** Size and checksum a file must have: pins first, hub metadata (one HEAD) for whatever is not pinned. */
async function expectationFor(file: BundleFile, bundle: ResolvedBundle, hubUrl: string, signal: AbortSignal | undefined): Promise<ExpectedFile> {
  const url = resolveUrl(hubUrl, bundle.repo, bundle.revision, file.path);
  if (file.sha256 !== undefined && file.sizeBytes !== undefined) {
    return { file, url, sizeBytes: file.sizeBytes, sha256: file.sha256, checksumSource: "pinned in the catalog" };
  }
  const label = describeFile(file);
  const hub = await withRetries(label, signal, () => headMetadata(url, label, signal));
  const hubSha256 = hub.etag !== undefined && SHA256_HEX.test(hub.etag) ? hub.etag : undefined;
  const hubGitSha1 = hub.etag !== undefined && GIT_SHA1_HEX.test(hub.etag) ? hub.etag : undefined;
  const disagreement = (what: string, pinned: string | number, reported: string | number) =>
    new PullError(`${label}: the catalog pins ${what} ${pinned} but the hub reports ${reported} for revision ${bundle.revision}; refusing to pull a file that does not match its pin`);
  if (file.sizeBytes !== undefined && hub.sizeBytes !== undefined && hub.sizeBytes !== file.sizeBytes) throw disagreement("size", file.sizeBytes, hub.sizeBytes);
  if (file.sha256 !== undefined && hubSha256 !== undefined && hubSha256 !== file.sha256) throw disagreement("sha256", file.sha256, hubSha256);
  const sizeBytes = file.sizeBytes ?? hub.sizeBytes;
  if (sizeBytes === undefined) throw new PullError(`${label}: the hub sent no size (X-Linked-Size or Content-Length) at ${url}`);
  if (file.sha256 !== undefined) return { file, url, sizeBytes, sha256: file.sha256, checksumSource: "pinned in the catalog" };
  if (hubSha256 !== undefined) return { file, url, sizeBytes, sha256: hubSha256, checksumSource: "the hub's sha256 ETag" };
  if (hubGitSha1 !== undefined) return { file, url, sizeBytes, gitBlobSha1: hubGitSha1, checksumSource: "the hub's git blob ETag" };
  throw new PullError(`${label}: neither the catalog nor the hub gives a checksum (ETag ${hub.etag === undefined ? "absent" : `"${hub.etag}"`}) at ${url}; refusing to download a file that cannot be verified`);
}

/** What each file must be, from the mirror's complete.json: its files named as the catalog names them, sizes and sha256 agreeing with any pin. */
async function mirrorExpectations(mirror: { bucket: S3Bucket; prefix: string }, bundle: ResolvedBundle, signal: AbortSignal | undefined): Promise<ExpectedFile[]> {
  const folder = `${mirror.prefix === "" ? "" : `${mirror.prefix}/`}${bundle.id}/${bundle.revision}/`;
  const where = `s3://${mirror.bucket.bucket}/${folder}`;
  let answer: Awaited<ReturnType<S3Bucket["get"]>>;
  try {
    answer = await mirror.bucket.get(`${folder}${COMPLETE_MARKER_FILE}`, { signal });
  } catch (error) {
    throw signal?.aborted ? signal.reason : new PullError(`the mirror ${where} could not be read: ${errorMessage(error)}`);
  }
  if (answer === "missing" || answer === "unchanged") throw new PullError(`the mirror has no ${bundle.id} at revision ${bundle.revision}: ${where}${COMPLETE_MARKER_FILE} is missing (copy a pulled bundle's folder there, complete.json included)`);
  let parsed: ReturnType<typeof manifestSchema.safeParse>;
  try {
    parsed = manifestSchema.safeParse(JSON.parse(new TextDecoder().decode(answer.body)));
  } catch {
    throw new PullError(`${where}${COMPLETE_MARKER_FILE} is not JSON`);
  }
  if (!parsed.success) throw new PullError(`${where}${COMPLETE_MARKER_FILE} is not a bundle manifest`);
  const mirrored = parsed.data;
  if (mirrored.repo !== bundle.repo || mirrored.revision !== bundle.revision) throw new PullError(`${where}${COMPLETE_MARKER_FILE} describes ${mirrored.repo}@${mirrored.revision}, not ${bundle.repo}@${bundle.revision}`);
  return bundle.files.map((file) => {
    const entry = mirrored.files.find((candidate) => candidate.name === file.localName);
    if (entry === undefined) throw new PullError(`${describeFile(file)} is not listed in ${where}${COMPLETE_MARKER_FILE}`);
    if ((file.sha256 !== undefined && file.sha256 !== entry.sha256) || (file.sizeBytes !== undefined && file.sizeBytes !== entry.sizeBytes)) {
      throw new PullError(`${describeFile(file)}: the catalog pins ${file.sha256 ?? "?"} (${file.sizeBytes ?? "?"} bytes) but the mirror lists ${entry.sha256} (${entry.sizeBytes} bytes); refusing a file that does not match its pin`);
    }
    return { file, url: mirror.bucket.url(`${folder}${entry.name}`), sizeBytes: entry.sizeBytes, sha256: entry.sha256, checksumSource: "the mirror's complete.json" };
  });
}

/** X-Linked-Etag/X-Linked-Size on the hub's redirect for LFS files, ETag/Content-Length on a plain answer. */
async function headMetadata(url: string, label: string, signal: AbortSignal | undefined): Promise<{ etag?: string; sizeBytes?: number }> {
  let target = url;
  let etag: string | undefined;
  let sizeBytes: number | undefined;
  for (let hop = 0; ; hop++) {
    let response: Response;
    try {
      response = await fetch(target, { method: "HEAD", redirect: "manual", headers: { "accept-encoding": "identity" }, signal });
    } catch (error) {
      throw signal?.aborted ? signal.reason : new TransferInterrupted(`HEAD ${target} failed: ${errorMessage(error)}`);
    }
    await response.body?.cancel();
    throwForStatus(response, label, target);
    etag ??= normalizeEtag(response.headers.get("x-linked-etag"));
    sizeBytes ??= parseByteCount(response.headers.get("x-linked-size"));
    const isRedirect = response.status >= 300 && response.status < 400;
    if (!isRedirect) {
      etag ??= normalizeEtag(response.headers.get("etag"));
      sizeBytes ??= parseByteCount(response.headers.get("content-length"));
      return { etag, sizeBytes };
    }
    const location = response.headers.get("location");
    const next = location === null ? undefined : new URL(location, target);
    if ((etag !== undefined && sizeBytes !== undefined) || next === undefined || next.origin !== new URL(target).origin || hop >= MAX_SAME_ORIGIN_REDIRECTS) {
      return { etag, sizeBytes };
    }
    target = next.href;
  }
}

interface TransferContext {
  /** The hub's plain fetch, or a mirror's signed one. */
  fetch: (url: string, init: RequestInit) => Promise<Response>;
  signal: AbortSignal | undefined;
  idleTimeoutMs: number;
  report: (state: PullFileState, fileBytes: number) => void;
}

/** Confirms a file already on disk, or downloads, verifies and renames it into place. */
async function pullFile(dir: string, expected: ExpectedFile, context: TransferContext): Promise<BundleManifest["files"][number]> {
  const finalPath = join(dir, expected.file.localName);
  const partPath = finalPath + PART_SUFFIX;
  const record = (digest: FileDigest) => ({ name: expected.file.localName, repoPath: expected.file.path, sizeBytes: digest.sizeBytes, sha256: digest.sha256 });

  if (await sizeOnDisk(finalPath) !== undefined) {
    context.report("verifying", 0);
    const digest = await digestFile(finalPath, expected.gitBlobSha1 !== undefined, context.signal);
    if (mismatchOf(digest, expected) === undefined) {
      await rm(partPath, { force: true });
      context.report("cached", digest.sizeBytes);
      return record(digest);
    }
    await rm(finalPath, { force: true });
  }

  await withRetries(describeFile(expected.file), context.signal, () => downloadAttempt(expected, partPath, context));
  context.report("verifying", expected.sizeBytes);
  const digest = await digestFile(partPath, expected.gitBlobSha1 !== undefined, context.signal);
  const mismatch = mismatchOf(digest, expected);
  if (mismatch !== undefined) {
    await rm(partPath, { force: true });
    throw new PullError(`${describeFile(expected.file)} failed verification: ${mismatch}. The download was deleted; run the pull again to fetch this file from scratch.`);
  }
  await rename(partPath, finalPath);
  context.report("verified", digest.sizeBytes);
  return record(digest);
}

/** One GET into the `.part` file, resuming from its current length; throws TransferInterrupted to be retried. */
async function downloadAttempt(expected: ExpectedFile, partPath: string, context: TransferContext): Promise<void> {
  const label = describeFile(expected.file);
  let offset = (await sizeOnDisk(partPath)) ?? 0;
  if (offset > expected.sizeBytes) {
    await rm(partPath, { force: true });
    offset = 0;
  }
  if (offset === expected.sizeBytes) return;

  const watchdog = new IdleWatchdog(context.idleTimeoutMs, context.signal);
  try {
    let response: Response;
    try {
      response = await context.fetch(expected.url, {
        headers: { "accept-encoding": "identity", ...(offset > 0 ? { range: `bytes=${offset}-` } : {}) },
        signal: watchdog.signal,
      });
    } catch (error) {
      throw watchdog.interruption(`GET ${expected.url} failed: ${errorMessage(error)}`);
    }
    if (response.status === 416) {
      await response.body?.cancel();
      await rm(partPath, { force: true });
      throw new TransferInterrupted(`the hub refused to resume at byte ${offset}; starting ${expected.file.localName} over`);
    }
    if (response.status !== 200 && response.status !== 206) {
      await response.body?.cancel();
      throwForStatus(response, label, expected.url);
      throw new PullError(`${label}: unexpected HTTP ${response.status} from ${expected.url}`);
    }
    let servedTotal: number | undefined;
    if (response.status === 206) {
      const range = parseContentRange(response.headers.get("content-range"));
      if (range?.start !== offset) {
        await response.body?.cancel();
        await rm(partPath, { force: true });
        throw new TransferInterrupted(`the hub answered a range starting at ${range?.start ?? "an unknown byte"} instead of ${offset}; starting over`);
      }
      servedTotal = range.total;
    } else {
      // 200 on a resume means the server ignored Range: the body is the whole file.
      offset = 0;
      servedTotal = parseByteCount(response.headers.get("content-length"));
    }
    if (servedTotal !== undefined && servedTotal !== expected.sizeBytes) {
      await response.body?.cancel();
      await rm(partPath, { force: true });
      throw new PullError(`${label} failed verification: the hub serves ${servedTotal} bytes, expected ${expected.sizeBytes}. Nothing was kept; check the catalog entry's revision and pins.`);
    }
    if (response.body === null) throw new TransferInterrupted(`GET ${expected.url} returned no body`);

    const handle = await open(partPath, offset === 0 ? "w" : "a");
    const reader = response.body.getReader();
    let received = offset;
    try {
      context.report("downloading", received);
      for (;;) {
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch (error) {
          throw watchdog.interruption(`connection lost after ${received} of ${expected.sizeBytes} bytes: ${errorMessage(error)}`);
        }
        if (chunk.done) break;
        watchdog.rearm();
        if (received + chunk.value.byteLength > expected.sizeBytes) {
          await handle.close().catch(() => {});
          await rm(partPath, { force: true });
          throw new PullError(`${label} failed verification: the hub sent more than the expected ${expected.sizeBytes} bytes. The download was deleted; run the pull again to fetch this file from scratch.`);
        }
        await writeFully(handle, chunk.value);
        received += chunk.value.byteLength;
        context.report("downloading", received);
      }
      if (received < expected.sizeBytes) throw new TransferInterrupted(`connection closed after ${received} of ${expected.sizeBytes} bytes`);
      await handle.sync();
    } finally {
      await reader.cancel().catch(() => {});
      await handle.close().catch(() => {});
    }
  } finally {
    watchdog.dispose();
  }
}

/** Runs `attempt` until it succeeds, retrying TransferInterrupted with back-off; an abort ends it at once. */
async function withRetries<T>(label: string, signal: AbortSignal | undefined, attempt: () => Promise<T>): Promise<T> {
  for (let attemptNumber = 1; ; attemptNumber++) {
    try {
      return await attempt();
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      if (!(error instanceof TransferInterrupted)) throw error;
      if (attemptNumber >= MAX_ATTEMPTS) {
        throw new PullError(`${label}: transfer failed ${attemptNumber} times (last: ${error.message}); run the pull again to resume`);
      }
      await abortableSleep(RETRY_DELAYS_MS[Math.min(attemptNumber, RETRY_DELAYS_MS.length) - 1] ?? 0, signal);
    }
  }
}

/** Aborts a transfer that receives nothing for `timeoutMs`, and merges that with the caller's signal. */
class IdleWatchdog {
  private readonly controller = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  readonly signal: AbortSignal;

  constructor(private readonly timeoutMs: number, outer: AbortSignal | undefined) {
    this.signal = outer ? AbortSignal.any([outer, this.controller.signal]) : this.controller.signal;
    this.rearm();
  }

  rearm(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.controller.abort(), this.timeoutMs);
  }

  /** The error to throw for a failed fetch or read: a stall is named as such. */
  interruption(message: string): TransferInterrupted {
    return new TransferInterrupted(this.controller.signal.aborted ? `no data for ${this.timeoutMs} ms` : message);
  }

  dispose(): void {
    clearTimeout(this.timer);
  }
}

/** Re-hashes the files a complete.json lists; true when all match, so nothing needs the network. */
async function confirmCompleteBundle(dir: string, bundle: ResolvedBundle, onProgress: PullOptions["onProgress"], signal: AbortSignal | undefined): Promise<boolean> {
  const manifest = await readBundleManifest(dir);
  if (!manifest || manifest.revision !== bundle.revision || manifest.repo !== bundle.repo) return false;
  const listed = new Map(manifest.files.map((file) => [file.name, file]));
  const files = bundle.files.map((file) => listed.get(file.localName));
  if (listed.size !== bundle.files.length || files.some((file, index) => file?.repoPath !== bundle.files[index]?.path)) return false;
  const progress = new ProgressReporter(bundle.id, files.map((file) => file?.sizeBytes ?? 0), onProgress);
  for (const [index, file] of files.entries()) {
    if (!file) return false;
    progress.report(index, file.name, "verifying", 0);
    const path = join(dir, file.name);
    if ((await sizeOnDisk(path)) !== file.sizeBytes) return false;
    const digest = await digestFile(path, false, signal);
    if (digest.sha256 !== file.sha256) return false;
    progress.report(index, file.name, "cached", file.sizeBytes);
  }
  return true;
}

class ProgressReporter {
  private readonly totalBytes: number;
  private readonly finishedBytes: number[];

  constructor(private readonly bundle: string, private readonly fileSizes: readonly number[], private readonly onProgress: PullOptions["onProgress"]) {
    this.totalBytes = fileSizes.reduce((sum, size) => sum + size, 0);
    this.finishedBytes = fileSizes.map(() => 0);
  }

  report(fileIndex: number, file: string, state: PullFileState, fileBytes: number): void {
    if (!this.onProgress) return;
    this.finishedBytes[fileIndex] = fileBytes;
    this.onProgress({
      bundle: this.bundle,
      file,
      fileIndex,
      fileCount: this.fileSizes.length,
      state,
      fileBytes,
      fileTotalBytes: this.fileSizes[fileIndex] ?? 0,
      bytes: this.finishedBytes.reduce((sum, size) => sum + size, 0),
      totalBytes: this.totalBytes,
    });
  }
}

function mismatchOf(digest: FileDigest, expected: ExpectedFile): string | undefined {
  if (digest.sizeBytes !== expected.sizeBytes) return `its size is ${digest.sizeBytes} bytes, expected ${expected.sizeBytes}`;
  if (expected.sha256 !== undefined && digest.sha256 !== expected.sha256) {
    return `its sha256 is ${digest.sha256}, expected ${expected.sha256} (${expected.checksumSource})`;
  }
  if (expected.gitBlobSha1 !== undefined && digest.gitBlobSha1 !== expected.gitBlobSha1) {
    return `its git blob sha1 is ${digest.gitBlobSha1}, expected ${expected.gitBlobSha1} (${expected.checksumSource})`;
  }
  return undefined;
}

/** sha256 of the file, and its git blob id (sha1 over `"blob <size>\0"` + bytes) when asked. */
async function digestFile(path: string, withGitBlobSha1: boolean, signal: AbortSignal | undefined): Promise<FileDigest> {
  const handle = await open(path, "r");
  try {
    const { size } = await handle.stat();
    const sha256 = createHash("sha256");
    let gitSha1: Hash | undefined;
    if (withGitBlobSha1) {
      gitSha1 = createHash("sha1");
      gitSha1.update(`blob ${size}\0`);
    }
    const buffer = new Uint8Array(HASH_READ_BYTES);
    let sizeBytes = 0;
    for (;;) {
      signal?.throwIfAborted();
      const { bytesRead } = await handle.read(buffer, 0, buffer.byteLength, null);
      if (bytesRead === 0) break;
      const chunk = buffer.subarray(0, bytesRead);
      sha256.update(chunk);
      gitSha1?.update(chunk);
      sizeBytes += bytesRead;
    }
    return { sizeBytes, sha256: sha256.digest("hex"), gitBlobSha1: gitSha1?.digest("hex") };
  } finally {
    await handle.close();
  }
}

function throwForStatus(response: Response, label: string, url: string): void {
  const { status } = response;
  if (status < 400) return;
  if (status === 401 || status === 403) {
    throw new PullError(`${label}: the hub refused access (HTTP ${status}) at ${url}; the repository is gated or private, and voxedge pulls only ungated bundles`);
  }
  if (status === 404) throw new PullError(`${label}: not found on the hub (HTTP 404) at ${url}; the repository, revision or file does not exist there`);
  if (status === 429 || status >= 500) throw new TransferInterrupted(`HTTP ${status} from ${url}`);
  throw new PullError(`${label}: HTTP ${status} from ${url}`);
}

function describeFile(file: BundleFile): string {
  return file.localName === file.path ? file.localName : `${file.localName} (${file.path})`;
}

/** `"abc"`, `W/"abc"` → `abc`, lower-cased. */
function normalizeEtag(header: string | null): string | undefined {
  if (header === null) return undefined;
  const value = header.trim().replace(/^W\//, "").replace(/^"(.*)"$/, "$1").toLowerCase();
  return value === "" ? undefined : value;
}

function parseByteCount(header: string | null): number | undefined {
  if (header === null || !/^\d+$/.test(header.trim())) return undefined;
  return Number(header.trim());
}

/** `bytes 100-199/200` → { start: 100, total: 200 }; total is undefined for `/*`. */
function parseContentRange(header: string | null): { start: number; total?: number } | undefined {
  const match = header === null ? null : /^bytes (\d+)-\d+\/(\d+|\*)$/.exec(header.trim());
  if (match?.[1] === undefined) return undefined;
  return { start: Number(match[1]), total: match[2] === "*" || match[2] === undefined ? undefined : Number(match[2]) };
}

async function writeFully(handle: Awaited<ReturnType<typeof open>>, bytes: Uint8Array): Promise<void> {
  let written = 0;
  while (written < bytes.byteLength) {
    const { bytesWritten } = await handle.write(bytes, written, bytes.byteLength - written);
    written += bytesWritten;
  }
}

async function sizeOnDisk(path: string): Promise<number | undefined> {
  try {
    const info = await stat(path);
    return info.isFile() ? info.size : undefined;
  } catch {
    return undefined;
  }
}

async function subdirectories(dir: string): Promise<string[]> {
  try {
    const entries = await readdir(dir, { withFileTypes: true });
    return entries.filter((entry) => entry.isDirectory()).map((entry) => join(dir, entry.name));
  } catch {
    return [];
  }
}

async function allFilesPresent(dir: string, manifest: BundleManifest): Promise<boolean> {
  for (const file of manifest.files) {
    if ((await sizeOnDisk(join(dir, file.name))) !== file.sizeBytes) return false;
  }
  return true;
}

function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
