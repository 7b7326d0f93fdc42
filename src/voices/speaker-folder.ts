/**
 * The speaker folder on disk, as the voice store reads and changes it: crash-safe, and shared by replicas.
 *
 * Writes go through lib/durable-write.ts (a `.tmp-` file in the same folder, fsynced, renamed into place,
 * the folder fsynced): after a crash a voice file is either the old one or the new one, and leftover temp
 * files are removed by the next scan. Readers never see half a file: writers only rename complete, fsynced
 * files into place. A `.tmp-` file of another live process or host is removed only once it is older than
 * STALE_TEMP_FILE_MS: a younger one may be that replica's save in progress.
 *
 * A file counts as changed when its inode, size or mtime differ from what was read (its FileStamp), so a scan
 * reads again only the headers of changed files. No watcher: inotify sees no writes made by other hosts on
 * NFS or SMB, so a watcher would work in a test and not on the volumes replicas share. Saves take turns across
 * replicas through a lock file in the folder (underWriteLock).
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { link, mkdir, open, readdir, readFile, stat, unlink, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { ApiError } from "../api/errors.ts";
import { Semaphore } from "../async/semaphore.ts";
import { MalformedSafetensorsError, readSafetensorsHeaderFromFile, type SafetensorsHeader } from "../formats/safetensors.ts";
import { currentTempFileWriter, FolderSyncError, fsyncDirectory, TEMP_FILE_PREFIX, tempFileWriter, writeFileDurably } from "../lib/durable-write.ts";
import type { Logger } from "../log/logger.ts";
import { InvalidVoiceFileError, VOICE_FILE_SUFFIX, voiceFromFileHeader, voiceKey, type StoredVoice } from "./voice-file.ts";

/** What identifies one version of a file: a rename over it changes the inode, a rewrite in place the size or mtime. */
export interface FileStamp {
  ino: number;
  size: number;
  mtimeMs: number;
}

/** A voice in memory and the file it is read from; older files of the same name go when it does. */
export interface VoiceEntry {
  voice: StoredVoice;
  fileName: string;
  supersededFileNames: string[];
  /** The file as it was when its header was read. */
  stamp: FileStamp | undefined;
}

/** A temp file older than this is a save that will never finish, whoever wrote it; a younger one of a live writer may be in progress. */
const STALE_TEMP_FILE_MS = 15 * 60 * 1000;
/** Header reads in flight while scanning: enough to hide file-open latency, few enough to spare descriptors. */
const RESTORE_CONCURRENCY = 16;
/** The write lock of a speaker folder (see underWriteLock); not a voice file, so scans pass it by. */
const WRITE_LOCK_FILE = ".voxedge-write.lock";
/** A save holds the lock for milliseconds (one file written and fsynced); this old, its holder is gone. */
const STALE_LOCK_MS = 30_000;
/** A lock with no holder's name in it, this old, was left by a process killed right after creating it. */
const NAMELESS_LOCK_STALE_MS = 2_000;
/** How long a save waits for another replica's before a 503. */
const LOCK_WAIT_MS = 10_000;

export class SpeakerFolder {
  constructor(
    readonly dir: string,
    private readonly logger: Logger,
  ) {}

  /** Creates the folder if need be and makes sure a file can be created in it; throws the file-system error. */
  async prepare(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    await probeWritable(this.dir);
  }

  async stampOf(fileName: string): Promise<FileStamp | undefined> {
    try {
      const { ino, size, mtimeMs } = await stat(join(this.dir, fileName));
      return { ino, size, mtimeMs };
    } catch (error) {
      if (errorCode(error) === "ENOENT") return undefined;
      throw error;
    }
  }

  readWholeFile(fileName: string): Promise<Uint8Array> {
    return readFile(join(this.dir, fileName));
  }

  /**
   * The voice of `key` as its candidate files now hold it (another replica may have written or removed any
   * of them), or undefined when none does; a file that cannot be read is skipped.
   */
  async readName(key: string, fileNames: Iterable<string>): Promise<VoiceEntry | undefined> {
    const found = new Map<string, VoiceEntry>();
    for (const fileName of fileNames) {
      try {
        const read = await this.readVoiceFile(fileName);
        if (read === undefined || voiceKey(read.voice.name) !== key) continue;
        adoptInto(found, key, read.voice, fileName, read.stamp);
      } catch (error) {
        this.logger.debug("Skipped unreadable voice file", { file: fileName, reason: skipReason(error) });
      }
    }
    return found.get(key);
  }

  /**
   * Every voice file in the folder, keyed by voiceKey, headers reused from `known` (by file name) for files
   * whose stamp has not changed, and `.tmp-` files of saves that will never finish removed.
   */
  async scan(known: Map<string, VoiceEntry>, skippedLevel: "warn" | "debug"): Promise<{ voices: Map<string, VoiceEntry>; skipped: number; removedTempFiles: number }> {
    const entries = await readdir(this.dir, { withFileTypes: true });
    let removedTempFiles = 0;
    let skipped = 0;
    const voiceFileNames: string[] = [];
    for (const entry of entries) {
      if (!entry.isFile()) continue;
      if (entry.name.startsWith(TEMP_FILE_PREFIX)) {
        if (await this.removeIfStaleTempFile(entry.name)) removedTempFiles++;
      } else if (entry.name.endsWith(VOICE_FILE_SUFFIX)) {
        voiceFileNames.push(entry.name);
      }
    }

    const voices = new Map<string, VoiceEntry>();
    const restoreOne = async (fileName: string) => {
      try {
        const previous = known.get(fileName);
        const stamp = await this.stampOf(fileName);
        // Gone between the listing and the stat: deleted by another replica.
        if (stamp === undefined) return;
        const read = previous !== undefined && sameStamp(previous.stamp, stamp) ? { voice: previous.voice, stamp } : await this.readVoiceFile(fileName);
        if (read === undefined) return;
        adoptInto(voices, voiceKey(read.voice.name), read.voice, fileName, read.stamp);
      } catch (error) {
        skipped++;
        this.logger[skippedLevel]("Skipped unreadable voice file", { file: fileName, reason: skipReason(error) });
      }
    };
    const reads = new Semaphore(RESTORE_CONCURRENCY);
    await Promise.all(voiceFileNames.map((fileName) => reads.run(() => restoreOne(fileName))));
    return { voices, skipped, removedTempFiles };
  }

  /** A voice file's checked header and stamp, or undefined when it is not there (any more). */
  private async readVoiceFile(fileName: string): Promise<{ voice: StoredVoice; stamp: FileStamp } | undefined> {
    let header: SafetensorsHeader;
    try {
      header = await readSafetensorsHeaderFromFile(join(this.dir, fileName));
    } catch (error) {
      if (errorCode(error) === "ENOENT") return undefined;
      throw error;
    }
    const stamp = await this.stampOf(fileName);
    if (stamp === undefined) return undefined;
    return { voice: voiceFromFileHeader(fileName, header), stamp };
  }

  /**
   * A save interrupted before its rename is never a voice, only its unfinished copy. Removed: files of this
   * process (a rescan runs between this store's saves, never beside one) or of a dead process on this host
   * (a restart after a crash), files in no writer's format, and any file older than STALE_TEMP_FILE_MS.
   * Kept: a young file of a live process, or of another host, which may be a save in progress there.
   */
  private async removeIfStaleTempFile(fileName: string): Promise<boolean> {
    try {
      const writer = tempFileWriter(fileName);
      const us = currentTempFileWriter();
      const abandoned = writer === undefined || (writer.hostHex === us.hostHex && (writer.pid === us.pid || !isProcessAlive(writer.pid)));
      if (!abandoned && Date.now() - (await stat(join(this.dir, fileName))).mtimeMs < STALE_TEMP_FILE_MS) return false;
      await unlink(join(this.dir, fileName));
      return true;
    } catch (error) {
      if (errorCode(error) !== "ENOENT") this.logger.warn("Could not remove leftover voice temp file", { file: fileName, reason: errorCode(error) });
      return false;
    }
  }

  /**
   * Replaces `fileName` with `fileBytes`, durably. Throws when the file is not in place; resolves to the
   * FolderSyncError when it is, but the folder fsync after the rename failed (a crash may still lose it).
   */
  async writeVoiceFile(fileName: string, fileBytes: Uint8Array): Promise<FolderSyncError | undefined> {
    try {
      await writeFileDurably(join(this.dir, fileName), fileBytes, { mode: 0o600 });
      return undefined;
    } catch (error) {
      if (error instanceof FolderSyncError) return error;
      throw error;
    }
  }

  /** Removes a file; one already gone is no error. */
  async removeFile(fileName: string): Promise<void> {
    try {
      await unlink(join(this.dir, fileName));
    } catch (error) {
      if (errorCode(error) !== "ENOENT") throw error;
    }
  }

  /** Makes the removals so far durable (lib/durable-write.ts's policy). */
  syncRemovals(): Promise<void> {
    return fsyncDirectory(this.dir);
  }

  /**
   * Runs a save with the folder's write lock held, so replicas sharing the folder take turns: the rescan, the
   * cap check, created_at and the commit of one save all see every other replica's finished saves. The lock is
   * a file made with an exclusive create (O_EXCL, atomic on local file systems and on NFSv3+); a lock older
   * than STALE_LOCK_MS was left by a process that died holding it and is broken.
   */
  async underWriteLock<T>(save: () => Promise<T>): Promise<T> {
    const lockPath = join(this.dir, WRITE_LOCK_FILE);
    const deadline = Date.now() + LOCK_WAIT_MS;
    for (;;) {
      try {
        await this.createLock(lockPath);
        break;
      } catch (error) {
        if (errorCode(error) !== "EEXIST") throw this.failure(error, "the voice was not saved");
        if (await this.removeStaleLock()) continue;
        if (Date.now() > deadline) throw new ApiError(503, `The voice store folder is busy with other replicas' saves (lock held for ${LOCK_WAIT_MS / 1000} s); retry`);
        await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 20));
      }
    }
    try {
      return await save();
    } finally {
      await unlink(lockPath).catch((error) => this.logger.error("could not remove the voice folder lock", { code: errorCode(error) }));
    }
  }

  /**
   * Makes the lock with its holder's name already in it: the name is written to a claim file of this process,
   * which is then hard-linked as the lock (atomic, EEXIST when another holds it), so a lock is never seen
   * nameless, whenever its maker is killed. A file system without hard links gets an exclusive create instead.
   */
  private async createLock(lockPath: string): Promise<void> {
    const holder = JSON.stringify({ host: hostname(), pid: process.pid });
    const claim = `${lockPath}.${process.pid}.${randomUUID()}`;
    await writeFile(claim, holder, { mode: 0o600 });
    try {
      await link(claim, lockPath);
    } catch (error) {
      if (!["EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS"].includes(errorCode(error) ?? "")) throw error;
      const handle = await open(lockPath, "wx", 0o600);
      await handle.writeFile(holder);
      await handle.close();
    } finally {
      await unlink(claim).catch(() => undefined);
    }
  }

  /** Claim files of processes of this host that are gone (killed between making one and removing it). */
  async removeDeadClaims(): Promise<void> {
    const prefix = `${WRITE_LOCK_FILE}.`;
    for (const name of await readdir(this.dir).catch(() => [] as string[])) {
      if (!name.startsWith(prefix)) continue;
      const pid = Number(name.slice(prefix.length).split(".")[0]);
      const text = await readFile(join(this.dir, name), "utf-8").catch(() => "");
      const sameHost = text.includes(JSON.stringify(hostname()));
      if (Number.isInteger(pid) && sameHost && pid !== process.pid && !processRuns(pid)) await unlink(join(this.dir, name)).catch(() => undefined);
    }
  }

  /**
   * Removes the write lock when its holder is gone: a process of this host that no longer runs (killed while
   * saving), or any holder after STALE_LOCK_MS (another host's crash). True when there is no lock left.
   */
  async removeStaleLock(): Promise<boolean> {
    const lockPath = join(this.dir, WRITE_LOCK_FILE);
    const [info, text] = await Promise.all([stat(lockPath).catch(() => undefined), readFile(lockPath, "utf-8").catch(() => undefined)]);
    if (!info) return true;
    let holder: { host?: unknown; pid?: unknown } | undefined;
    try {
      holder = JSON.parse(text ?? "");
    } catch {
      // Empty or cut: its holder was killed between creating it and writing its name, or is writing it now.
    }
    const ageMs = Date.now() - info.mtimeMs;
    // A live holder names itself within microseconds of the create, so a nameless lock this old is a dead one's.
    const holderGone = holder === undefined ? ageMs > NAMELESS_LOCK_STALE_MS : holder.host === hostname() && typeof holder.pid === "number" && !processRuns(holder.pid);
    if (!holderGone && ageMs <= STALE_LOCK_MS) return false;
    this.logger.warn("removing a stale voice folder lock", { ageMs: Math.round(ageMs), holderGone });
    await unlink(lockPath).catch(() => undefined);
    return true;
  }

  /** A file-system error as the client's ApiError 507 (what is wrong, no path) and a log line (with the path); any other error as it is. */
  failure(error: unknown, outcome: string): unknown {
    const code = errorCode(error);
    if (code === undefined) return error;
    this.logger.error("voice store folder failed", { dir: this.dir, code });
    return new ApiError(507, `The voice store folder (--speaker-dir) ${describeFolderProblem(code)} (${code}); ${outcome}`);
  }
}

function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: it runs, as another user.
    return errorCode(error) === "EPERM";
  }
  // A process killed but not yet reaped by its parent still answers signal 0: on Linux its state says "zombie".
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf-8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return true;
  }
}

function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, under another user.
    return errorCode(error) === "EPERM";
  }
}

/** Files are read in any order; the newer `created_at` (then the later file name, so any order agrees) holds the name. */
function adoptInto(voices: Map<string, VoiceEntry>, key: string, voice: StoredVoice, fileName: string, stamp: FileStamp): void {
  const existing = voices.get(key);
  if (existing === undefined) {
    voices.set(key, { voice: Object.freeze(voice), fileName, supersededFileNames: [], stamp });
    return;
  }
  const isNewer = voice.created_at > existing.voice.created_at || (voice.created_at === existing.voice.created_at && fileName > existing.fileName);
  if (!isNewer) {
    existing.supersededFileNames.push(fileName);
    return;
  }
  voices.set(key, { voice: Object.freeze(voice), fileName, supersededFileNames: [...existing.supersededFileNames, existing.fileName], stamp });
}

export function sameStamp(a: FileStamp | undefined, b: FileStamp | undefined): boolean {
  return a !== undefined && b !== undefined && a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs;
}

/** Our own errors name only keys and sizes; fs errors carry the full path, so only their code is kept. */
function skipReason(error: unknown): string {
  return error instanceof MalformedSafetensorsError || error instanceof InvalidVoiceFileError ? error.message : (errorCode(error) ?? "unreadable");
}

/** Finishes "the folder …" for the errors creating, writing or listing a folder can give. */
export function describeFolderProblem(code: string): string {
  switch (code) {
    case "ENOENT":
      return "does not exist";
    case "ENOTDIR":
      return "is not a folder, or a part of its path is a file";
    case "EEXIST":
      return "exists but is not a folder";
    case "EACCES":
    case "EPERM":
      return "is not writable (permission denied)";
    case "EROFS":
      return "is on a read-only file system";
    case "ENOSPC":
      return "is on a full disk";
    case "EDQUOT":
      return "is over its disk quota";
    default:
      return "could not be written";
  }
}

/** Creating a file is what a save does first; EACCES or EROFS shows up here rather than on the first upload. */
async function probeWritable(dir: string): Promise<void> {
  // In the writers' format, so a replica starting beside this one leaves it alone.
  const writer = currentTempFileWriter();
  const probePath = join(dir, `${TEMP_FILE_PREFIX}${writer.hostHex}-${writer.pid}-probe-${randomUUID()}`);
  const handle = await open(probePath, "wx", 0o600);
  await handle.close();
  await unlink(probePath);
}

export function errorCode(error: unknown): string | undefined {
  return typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : undefined;
}
