/**
 * Durable file writes, with one fsync policy for every writer (the voice store, the weight download).
 *
 * A rename is atomic but not durable: until the folder itself is fsynced, a crash may lose the new directory
 * entry. So a file is written as a temporary file in the same folder (same file system, so the rename is
 * atomic), its bytes fsynced, renamed over the target, and the folder fsynced. After a crash at any point the
 * target is the old file or the new one, never a part, plus at most a temporary file whose name starts with
 * TEMP_FILE_PREFIX, for the folder's owner to remove. The temporary name carries its writer (host and process
 * id, see tempFileWriter), so where several processes share a folder, one can tell its own leftovers, and
 * those of a dead process on its host, from a save another process is making right now.
 *
 * The policy when the folder cannot be fsynced: a platform that cannot open a directory (Windows: EISDIR) or
 * fsync one (EINVAL, or ENOTSUP on some network and FUSE file systems) offers only the rename's own
 * durability, and that is not an error. Any other failure (EIO, ENOSPC, EACCES, a folder that went away)
 * means the write may not survive a restart, and is thrown, for the caller to say so: a voice save answers
 * 507, a pull stops before it marks the bundle complete. Swallowing those would report data as safe that a
 * crash can still lose.
 */
import { randomUUID } from "node:crypto";
import { open, rename, unlink } from "node:fs/promises";
import { hostname } from "node:os";
import { dirname, join } from "node:path";

export const TEMP_FILE_PREFIX = ".tmp-";

/** Who writes a temporary file: the host name in hex (any characters, no separator clash) and the process id. */
export interface TempFileWriter {
  hostHex: string;
  pid: number;
}

export function currentTempFileWriter(): TempFileWriter {
  return { hostHex: Buffer.from(hostname(), "utf8").toString("hex"), pid: process.pid };
}

/** The writer a temporary file's name records; undefined for a name in no writer's format (an older version's). */
export function tempFileWriter(fileName: string): TempFileWriter | undefined {
  const match = /^\.tmp-([0-9a-f]+)-(\d+)-/.exec(fileName);
  return match ? { hostHex: match[1]!, pid: Number(match[2]) } : undefined;
}

/** Error codes that mean "this platform cannot fsync a directory", not "this fsync failed". */
const DIRECTORY_SYNC_UNSUPPORTED = new Set(["EISDIR", "EINVAL", "ENOTSUP"]);

/** The file was renamed into place, but its folder could not be fsynced: a crash may still lose the new file. */
export class FolderSyncError extends Error {
  override name = "FolderSyncError";
  /** The file-system error code of the failed folder fsync, e.g. "EIO". */
  readonly code: string | undefined;

  constructor(cause: unknown) {
    super(`the folder could not be fsynced (${errorCode(cause) ?? "unknown error"})`, { cause });
    this.code = errorCode(cause);
  }
}

/** Makes the renames and unlinks in `dir` durable, under the policy above. */
export async function fsyncDirectory(dir: string): Promise<void> {
  let handle;
  try {
    handle = await open(dir, "r");
    await handle.sync();
  } catch (error) {
    const code = errorCode(error);
    if (code === undefined || !DIRECTORY_SYNC_UNSUPPORTED.has(code)) throw error;
  } finally {
    await handle?.close();
  }
}

/**
 * Replaces `path` with `contents`, durably (see above). A failure before the rename leaves `path` as it was
 * and removes the temporary file; a failure of the folder fsync after it is a FolderSyncError. With
 * `durable: false` (a cache, which can be made again) the write is atomic only: no fsync, so a crash may
 * lose it or, rarely, leave it short, which its reader must check.
 */
export async function writeFileDurably(path: string, contents: Uint8Array | string, options: { mode?: number; durable?: boolean } = {}): Promise<void> {
  const durable = options.durable ?? true;
  const dir = dirname(path);
  const writer = currentTempFileWriter();
  const tempPath = join(dir, `${TEMP_FILE_PREFIX}${writer.hostHex}-${writer.pid}-${randomUUID()}`);
  try {
    const handle = await open(tempPath, "wx", options.mode ?? 0o666);
    try {
      await handle.writeFile(contents);
      if (durable) await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tempPath, path);
  } catch (error) {
    await unlink(tempPath).catch(() => undefined);
    throw error;
  }
  if (!durable) return;
  try {
    await fsyncDirectory(dir);
  } catch (error) {
    throw new FolderSyncError(error);
  }
}

function errorCode(error: unknown): string | undefined {
  return typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : undefined;
}
