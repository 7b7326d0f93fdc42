/**
 * Uploaded voices, one safetensors file each in the speaker folder, restored on restart (vLLM-Omni's
 * speaker storage semantics). The file holds the audio (tensor `audio`, float32 mono) or a speaker
 * embedding (tensor `speaker_embedding`), and the voice's description as string metadata in the header,
 * so restoring a folder reads only headers.
 *
 * File names are the first 128 bits of sha256(lower-case name) in hex: no user text reaches the file
 * system, and one name always maps to one file, so a re-upload is a single atomic rename over the old one.
 * Writes go through weights/durable-write.ts (a `.tmp-` file in the same folder, fsynced, renamed into place,
 * the folder fsynced): after a crash a voice is either the old one or the new one, and leftover temp files are
 * removed on open.
 * Mutations run one at a time through a SerialQueue, so `created_at` and the cap see a consistent map.
 *
 * A speaker folder written by vLLM-Omni is restored as it is: its files, named
 * `{name}_{consent}_{created_at}.safetensors` (each part passed through its `_sanitize_filename`), hold the
 * same metadata and tensor `audio` as read from the upload, float32 `[N]` or `[N, C]` at the upload's own
 * rate, which loadAudio down-mixes. Such a file is never rewritten or renamed: it is read in place until
 * its voice is replaced (the new file is ours, the old one is removed) or deleted. When two files hold the
 * same name (a crash between writing a replacement and removing the old file), the newer `created_at` wins
 * and the other is removed with it.
 *
 * Several servers may share one folder (replicas on a network volume). The folder is the truth and the map a
 * cache of its headers, checked against it where a stale answer would be wrong: a request naming a voice
 * stats that voice's file first (one stat: the file name is a hash of the name, so a voice uploaded on
 * another replica is found by its name alone, and one deleted there is gone here), a listing re-scans the
 * folder (only changed files' headers are read again), and so do saves, so the cap counts every replica's
 * voices. A file counts as changed when its inode, size or mtime differ from what was read; a changed voice
 * is evicted from every cache (onEvict) even when its created_at is the same. No watcher: inotify sees no
 * writes made by other hosts on NFS or SMB, so a watcher would work in a test and not on the volumes
 * replicas share. Readers never see half a file: writers only rename complete, fsynced files into place.
 * A `.tmp-` file of another live process or host is removed only once it is older than STALE_TEMP_FILE_MS:
 * a younger one may be that replica's save in progress.
 *
 * The folder must be creatable and writable when the store opens (a test file is written and removed), so a
 * bad --speaker-dir stops the server at start. If it breaks later, a save or a delete is a 507 (the folder cannot take the change) that
 * say what is wrong with the folder; the full path goes to the log, not to the client.
 */
import { createHash, randomUUID } from "node:crypto";
import { link, mkdir, open, readdir, readFile, stat, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { hostname } from "node:os";
import { readFileSync } from "node:fs";
import { ApiError, badRequest } from "../api/errors.ts";
import { INVALID_VOICE_NAME_MESSAGE, isValidVoiceName } from "../api/voices.ts";
import type { Logger } from "../log/logger.ts";
import { Semaphore } from "../async/semaphore.ts";
import { currentTempFileWriter, FolderSyncError, fsyncDirectory, TEMP_FILE_PREFIX, tempFileWriter, writeFileDurably } from "../lib/durable-write.ts";
import { SerialQueue } from "../async/serial-queue.ts";
import { decodeSafetensors, encodeSafetensors, MalformedSafetensorsError, readSafetensorsHeaderFromFile, type FloatTensor, type SafetensorsHeader } from "../formats/safetensors.ts";
import { downmixToMono } from "../audio/decoders.ts";

export interface StoredVoice {
  name: string;
  consent: string;
  /** Unix seconds; strictly increasing across uploads, so (name, created_at) identifies one upload. */
  created_at: number;
  mime_type: string;
  /** Bytes of the uploaded audio file, or of the stored safetensors file for a direct embedding. */
  file_size: number;
  sample_rate?: number;
  ref_text?: string;
  speaker_description?: string;
  embedding_source: "audio" | "direct";
  embedding_dim?: number;
}

export interface VoiceStoreOptions {
  dir: string;
  maxVoices: number;
  logger: Logger;
}

export interface SaveAudioInput {
  name: string;
  consent: string;
  mimeType: string;
  fileSizeBytes: number;
  samples: Float32Array;
  sampleRateHz: number;
  refText?: string;
  speakerDescription?: string;
}

export interface SaveEmbeddingInput {
  name: string;
  consent: string;
  embedding: Float32Array;
}

/** What identifies one version of a file: a rename over it changes the inode, a rewrite in place the size or mtime. */
interface FileStamp {
  ino: number;
  size: number;
  mtimeMs: number;
}

/** A voice in memory and the file it is read from; older files of the same name go when it does. */
interface VoiceEntry {
  voice: StoredVoice;
  fileName: string;
  supersededFileNames: string[];
  /** The file as it was when its header was read. */
  stamp: FileStamp | undefined;
}

/** A temp file older than this is a save that will never finish, whoever wrote it; a younger one of a live writer may be in progress. */
const STALE_TEMP_FILE_MS = 15 * 60 * 1000;
/** How often a read retries after finding its file replaced by another replica. */
const MAX_REPLACED_READ_RETRIES = 3;

const VOICE_FILE_SUFFIX = ".safetensors";
const AUDIO_TENSOR = "audio";
const EMBEDDING_TENSOR = "speaker_embedding";
const EMBEDDING_MIME_TYPE = "application/x-safetensors";
const FILE_NAME_HASH_HEX_CHARS = 32;
/** Header reads in flight while restoring: enough to hide file-open latency, few enough to spare descriptors. */
const RESTORE_CONCURRENCY = 16;
/** The write lock of a speaker folder (see underFolderLock); not a voice file, so scans pass it by. */
const WRITE_LOCK_FILE = ".voxedge-write.lock";
/** A save holds the lock for milliseconds (one file written and fsynced); this old, its holder is gone. */
const STALE_LOCK_MS = 30_000;
/** A lock with no holder's name in it, this old, was left by a process killed right after creating it. */
const NAMELESS_LOCK_STALE_MS = 2_000;
/** How long a save waits for another replica's before a 503. */
const LOCK_WAIT_MS = 10_000;

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

const INTEGER_METADATA_KEYS = ["created_at", "file_size", "sample_rate", "embedding_dim"] as const;

/** Trims and rejects names that are empty or could act as a path; the trimmed name is the voice's name. */
export function validateVoiceName(raw: string): string {
  const name = raw.trim();
  if (!isValidVoiceName(name)) throw badRequest(INVALID_VOICE_NAME_MESSAGE, "name");
  return name;
}

export class VoiceStore {
  private readonly voices = new Map<string, VoiceEntry>();
  private readonly evictListeners: ((nameLower: string) => void)[] = [];
  private readonly mutations = new SerialQueue();
  private lastCreatedAtSeconds = 0;

  private constructor(
    private readonly dir: string,
    private readonly maxVoices: number,
    private readonly logger: Logger,
  ) {}

  /** Throws VoiceStoreFolderError when the folder cannot be created, written or listed. */
  static async open(options: VoiceStoreOptions): Promise<VoiceStore> {
    try {
      await mkdir(options.dir, { recursive: true });
      await probeWritable(options.dir);
    } catch (error) {
      throw new VoiceStoreFolderError(options.dir, error);
    }
    const store = new VoiceStore(options.dir, options.maxVoices, options.logger);
    try {
      // A lock left by a save of this host's that was killed would hold every replica's saves back.
      await store.removeStaleLock();
      await store.removeDeadClaims();
      await store.restore();
    } catch (error) {
      if (errorCode(error) === undefined) throw error;
      throw new VoiceStoreFolderError(options.dir, error);
    }
    return store;
  }

  /**
   * Brings one name up to date with the folder (another replica may have uploaded, replaced or deleted it):
   * a stat of its file, and its header read again only if the file changed.
   */
  refreshName(name: string): Promise<void> {
    return this.mutations.run(() => this.servingLastRead(() => this.refreshKey(voiceKey(name))));
  }

  /** Brings every voice up to date with the folder: a listing sees the voices every replica has. */
  rescan(): Promise<void> {
    return this.mutations.run(() => this.servingLastRead(() => this.rescanFolder()));
  }

  /** A folder that cannot be read right now leaves reads with what was last read (saves and deletes still fail, saying why). */
  private async servingLastRead(read: () => Promise<void>): Promise<void> {
    try {
      await read();
    } catch (error) {
      const code = errorCode(error);
      if (code === undefined) throw error;
      this.logger.warn("voice store folder could not be re-read; serving the voices last read", { dir: this.dir, code });
    }
  }

  /** The voices as last read from the folder (refreshName or rescan first for what other replicas did since). */
  list(): StoredVoice[] {
    // Replicas may give two uploads the same second: the name breaks the tie, so every replica lists one order.
    return [...this.voices.values()].map((entry) => entry.voice).sort((a, b) => a.created_at - b.created_at || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  get(name: string): StoredVoice | undefined {
    return this.voices.get(voiceKey(name))?.voice;
  }

  /** Resolves once every save and delete queued so far has finished (a shutdown waits for it). */
  settled(): Promise<void> {
    return this.mutations.idle();
  }

  onEvict(listener: (nameLower: string) => void): void {
    this.evictListeners.push(listener);
  }

  async saveAudio(input: SaveAudioInput): Promise<StoredVoice> {
    const name = validateVoiceName(input.name);
    if (input.samples.length === 0) throw new RangeError("Cannot store a voice with no samples");
    if (!Number.isInteger(input.sampleRateHz) || input.sampleRateHz <= 0) throw new RangeError(`Invalid sample rate ${input.sampleRateHz}`);
    return this.mutations.run(() => this.underFolderLock(async () => {
      await this.rescanFolder().catch((error) => {
        throw this.folderFailure(error, 507, "the voice was not saved");
      });
      this.checkCap(name);
      const voice: StoredVoice = {
        name,
        consent: input.consent,
        created_at: this.nextCreatedAt(),
        mime_type: input.mimeType,
        file_size: input.fileSizeBytes,
        sample_rate: input.sampleRateHz,
        ...(input.refText === undefined ? {} : { ref_text: input.refText }),
        ...(input.speakerDescription === undefined ? {} : { speaker_description: input.speakerDescription }),
        embedding_source: "audio",
      };
      const fileBytes = encodeSafetensors({ [AUDIO_TENSOR]: { dtype: "F32", shape: [input.samples.length], data: input.samples } }, voiceMetadata(voice));
      await this.commit(voice, fileBytes);
      return voice;
    }));
  }

  async saveEmbedding(input: SaveEmbeddingInput): Promise<StoredVoice> {
    const name = validateVoiceName(input.name);
    if (input.embedding.length === 0) throw new RangeError("Cannot store an empty speaker embedding");
    return this.mutations.run(() => this.underFolderLock(async () => {
      await this.rescanFolder().catch((error) => {
        throw this.folderFailure(error, 507, "the voice was not saved");
      });
      this.checkCap(name);
      const createdAt = this.nextCreatedAt();
      const embeddingDim = input.embedding.length;
      // As upstream, file_size is the stored file's own size; it cannot sit in the header it measures,
      // so restore takes it from the file (see voiceFromHeader).
      const metadata = voiceMetadata({ name, consent: input.consent, created_at: createdAt, mime_type: EMBEDDING_MIME_TYPE, embedding_source: "direct", embedding_dim: embeddingDim });
      const fileBytes = encodeSafetensors({ [EMBEDDING_TENSOR]: { dtype: "F32", shape: [embeddingDim], data: input.embedding } }, metadata);
      const voice: StoredVoice = {
        name,
        consent: input.consent,
        created_at: createdAt,
        mime_type: EMBEDDING_MIME_TYPE,
        file_size: fileBytes.length,
        embedding_source: "direct",
        embedding_dim: embeddingDim,
      };
      await this.commit(voice, fileBytes);
      return voice;
    }));
  }

  delete(name: string): Promise<boolean> {
    return this.mutations.run(async () => {
      const key = voiceKey(name);
      // Another replica may have uploaded it, or deleted it already.
      await this.refreshKey(key).catch((error) => {
        throw this.folderFailure(error, 507, "the voice was not deleted");
      });
      const entry = this.voices.get(key);
      if (entry === undefined) return false;
      // Older files first: if one cannot be removed the voice is still there, rather than gone until a restart brings back an older version.
      while (entry.supersededFileNames.length > 0) {
        await this.removeFile(entry.supersededFileNames[0]!, "the voice was not deleted");
        entry.supersededFileNames.shift();
      }
      await this.removeFile(entry.fileName, "the voice was not deleted");
      this.voices.delete(key);
      this.fireEvict(key);
      await fsyncDirectory(this.dir).catch((error) => {
        throw this.folderFailure(error, 507, "the deletion may not survive a restart");
      });
      return true;
    });
  }

  /** Mono samples at the voice's own `sample_rate`: a multi-channel upload restored from vLLM-Omni is down-mixed. */
  async loadAudio(name: string): Promise<{ voice: StoredVoice; samples: Float32Array; sampleRateHz: number } | undefined> {
    const loaded = await this.loadTensor(name, "audio", AUDIO_TENSOR);
    return loaded && { voice: loaded.voice, samples: monoSamples(loaded.tensor), sampleRateHz: loaded.voice.sample_rate! };
  }

  async loadEmbedding(name: string): Promise<{ voice: StoredVoice; embedding: Float32Array } | undefined> {
    const loaded = await this.loadTensor(name, "direct", EMBEDDING_TENSOR);
    return loaded && { voice: loaded.voice, embedding: loaded.tensor.data };
  }

  /**
   * Reads without queueing behind writes. A save or delete of the same name may land while the file is
   * read: either the map entry has already changed, or the file on disk has changed but the mutation
   * has not yet reached its map update (its rename or unlink resolves after our read). Both are retried,
   * the second once the queued mutations have settled; a mismatch with nothing pending is an outside edit.
   */
  private async loadTensor(name: string, source: StoredVoice["embedding_source"], tensorName: string): Promise<{ voice: StoredVoice; tensor: FloatTensor } | undefined> {
    const key = voiceKey(name);
    let replacedReads = 0;
    for (;;) {
      const entry = this.voices.get(key);
      if (entry === undefined || entry.voice.embedding_source !== source) return undefined;
      const { voice } = entry;
      const raceWithMutation = async () => {
        if (this.voices.get(key) !== entry) return true;
        if (this.mutations.pendingCount === 0) return false;
        await this.mutations.idle();
        return true;
      };
      let fileBytes: Uint8Array;
      try {
        fileBytes = await readFile(join(this.dir, entry.fileName));
      } catch (error) {
        if (await raceWithMutation()) continue;
        // Deleted or replaced by another replica: the folder says which.
        if (errorCode(error) === "ENOENT" && replacedReads++ < MAX_REPLACED_READ_RETRIES) {
          await this.refreshName(name);
          continue;
        }
        throw new Error(`Could not read the stored file of voice '${voice.name}' (${errorCode(error) ?? "unknown error"})`);
      }
      const decoded = decodeSafetensors(fileBytes);
      if (decoded.metadata.created_at !== String(voice.created_at)) {
        if (await raceWithMutation()) continue;
        // Replaced by another replica sharing the folder: read its header, and the new version.
        if (replacedReads++ < MAX_REPLACED_READ_RETRIES) {
          await this.refreshName(name);
          continue;
        }
        throw new Error(`The stored file of voice '${voice.name}' keeps changing outside this server`);
      }
      const tensor = decoded.tensors[tensorName];
      if (tensor === undefined || !hasVoiceTensorShape(tensorName, tensor.shape)) throw new Error(`The stored file of voice '${voice.name}' has no '${tensorName}' tensor of the expected shape`);
      return { voice, tensor };
    }
  }

  /**
   * Runs a save with the folder's write lock held, so replicas sharing the folder take turns: the rescan, the
   * cap check, created_at and the commit of one save all see every other replica's finished saves. The lock is
   * a file made with an exclusive create (O_EXCL, atomic on local file systems and on NFSv3+); a lock older
   * than STALE_LOCK_MS was left by a process that died holding it and is broken.
   */
  private async underFolderLock<T>(save: () => Promise<T>): Promise<T> {
    const lockPath = join(this.dir, WRITE_LOCK_FILE);
    const deadline = Date.now() + LOCK_WAIT_MS;
    for (;;) {
      try {
        await this.createLock(lockPath);
        break;
      } catch (error) {
        if (errorCode(error) !== "EEXIST") throw this.folderFailure(error, 507, "the voice was not saved");
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
  private async removeDeadClaims(): Promise<void> {
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
  private async removeStaleLock(): Promise<boolean> {
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

  private checkCap(name: string): void {
    const key = voiceKey(name);
    const otherVoiceCount = this.voices.size - (this.voices.has(key) ? 1 : 0);
    if (otherVoiceCount >= this.maxVoices) {
      throw badRequest(`Uploaded voice limit reached (${this.maxVoices}). Delete a voice before adding another, or raise SPEAKER_MAX_UPLOADED.`, "name");
    }
  }

  /** Whole seconds like upstream, but never equal to the previous one, even within one second. */
  private nextCreatedAt(): number {
    this.lastCreatedAtSeconds = Math.max(Math.floor(Date.now() / 1000), this.lastCreatedAtSeconds + 1);
    return this.lastCreatedAtSeconds;
  }

  /**
   * Until the rename the old voice, file and map entry are untouched, so any failure before it leaves
   * the old voice intact. After the rename the new file is what a restart would see, so the map follows
   * it even when the folder fsync then fails.
   */
  private async commit(voice: StoredVoice, fileBytes: Uint8Array): Promise<void> {
    const key = voiceKey(voice.name);
    const fileName = fileNameOf(key);
    let notDurable: FolderSyncError | undefined;
    try {
      await writeFileDurably(join(this.dir, fileName), fileBytes, { mode: 0o600 });
    } catch (error) {
      if (!(error instanceof FolderSyncError)) throw this.folderFailure(error, 507, "the voice was not saved");
      notDurable = error;
    }
    const replaced = this.voices.get(key);
    this.voices.set(key, { voice: Object.freeze(voice), fileName, supersededFileNames: [], stamp: await this.stampOf(fileName) });
    if (replaced) {
      this.fireEvict(key);
      await this.removeReplacedFiles(replaced, fileName);
    }
    if (notDurable) throw this.folderFailure(notDurable, 507, "the voice is saved but may not survive a restart");
  }

  /**
   * The files a replaced voice was read from, other than the one just written (a voice restored from
   * vLLM-Omni's naming). The new voice is already saved: a file left behind is only logged, and a restart
   * still picks the new voice, whose `created_at` is newer.
   */
  private async removeReplacedFiles(replaced: VoiceEntry, newFileName: string): Promise<void> {
    for (const fileName of [replaced.fileName, ...replaced.supersededFileNames]) {
      if (fileName === newFileName) continue;
      try {
        await unlink(join(this.dir, fileName));
      } catch (error) {
        if (errorCode(error) !== "ENOENT") this.logger.warn("Could not remove the replaced voice's old file", { file: fileName, code: errorCode(error) });
      }
    }
  }

  private async removeFile(fileName: string, outcome: string): Promise<void> {
    try {
      await unlink(join(this.dir, fileName));
    } catch (error) {
      if (errorCode(error) !== "ENOENT") throw this.folderFailure(error, 507, outcome);
    }
  }

  /** A file-system error as the client's ApiError (what is wrong, no path) and a log line (with the path). */
  private folderFailure(error: unknown, status: 507, outcome: string): unknown {
    const code = errorCode(error);
    if (code === undefined) return error;
    this.logger.error("voice store folder failed", { dir: this.dir, code });
    return new ApiError(status, `The voice store folder (--speaker-dir) ${describeFolderProblem(code)} (${code}); ${outcome}`);
  }

  private fireEvict(key: string): void {
    for (const listener of this.evictListeners) {
      try {
        listener(key);
      } catch (error) {
        this.logger.error("Voice evict listener failed", { error: error instanceof Error ? error.message : String(error) });
      }
    }
  }

  private async restore(): Promise<void> {
    const { voices, skipped, removedTempFiles } = await this.scanFolder(new Map(), "warn");
    for (const [key, entry] of voices) this.voices.set(key, entry);
    let supersededFileCount = 0;
    for (const entry of this.voices.values()) {
      for (const fileName of entry.supersededFileNames) {
        supersededFileCount++;
        this.logger.warn("Voice file superseded by a newer file of the same voice; it is removed when that voice is replaced or deleted", { file: fileName, newer_file: entry.fileName });
      }
    }

    this.logger.info("Voice store opened", {
      dir: this.dir,
      max_voices: this.maxVoices,
      restored: this.voices.size,
      skipped,
      superseded: supersededFileCount,
      removed_temp_files: removedTempFiles,
    });
  }

  /**
   * The map as the folder now holds it; an entry whose file has not changed keeps its object (a read in
   * progress sees no change), and every name that changed or went is evicted.
   */
  private async rescanFolder(): Promise<void> {
    const known = new Map([...this.voices.values()].map((entry) => [entry.fileName, entry]));
    const { voices } = await this.scanFolder(known, "debug");
    const changed: string[] = [];
    for (const [key, entry] of this.voices) {
      const next = voices.get(key);
      if (next === undefined || next.fileName !== entry.fileName || !sameStamp(next.stamp, entry.stamp)) changed.push(key);
      else if (next.supersededFileNames.length === entry.supersededFileNames.length) voices.set(key, entry);
    }
    this.voices.clear();
    for (const [key, entry] of voices) this.voices.set(key, entry);
    for (const key of changed) this.fireEvict(key);
  }

  /** One name against the folder: a stat when nothing changed, its candidate files' headers when something did. */
  private async refreshKey(key: string): Promise<void> {
    const entry = this.voices.get(key);
    const hashedFileName = fileNameOf(key);
    if (entry === undefined) {
      // The common miss (a built-in voice's name): one stat, nothing there.
      if ((await this.stampOf(hashedFileName)) === undefined) return;
    } else {
      const unchanged = sameStamp(await this.stampOf(entry.fileName), entry.stamp);
      if (unchanged && (entry.fileName === hashedFileName || (await this.stampOf(hashedFileName)) === undefined)) return;
    }
    const found = new Map<string, VoiceEntry>();
    for (const fileName of new Set([hashedFileName, ...(entry ? [entry.fileName, ...entry.supersededFileNames] : [])])) {
      try {
        const read = await this.readVoiceFile(fileName);
        if (read === undefined || voiceKey(read.voice.name) !== key) continue;
        adoptInto(found, key, read.voice, fileName, read.stamp);
        this.lastCreatedAtSeconds = Math.max(this.lastCreatedAtSeconds, read.voice.created_at);
      } catch (error) {
        this.logger.debug("Skipped unreadable voice file", { file: fileName, reason: skipReason(error) });
      }
    }
    const next = found.get(key);
    if (next === undefined) this.voices.delete(key);
    else this.voices.set(key, next);
    if (entry !== undefined) this.fireEvict(key);
  }

  /**
   * Every voice file in the folder, headers reused from `known` for files whose stamp has not changed, and
   * `.tmp-` files of saves that will never finish removed.
   */
  private async scanFolder(known: Map<string, VoiceEntry>, skippedLevel: "warn" | "debug"): Promise<{ voices: Map<string, VoiceEntry>; skipped: number; removedTempFiles: number }> {
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
        this.lastCreatedAtSeconds = Math.max(this.lastCreatedAtSeconds, read.voice.created_at);
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
    const voice = voiceFromHeader(header);
    // Only the file this name hashes to, or the one vLLM-Omni named after it, can hold it; anything else is a copy.
    if (fileName !== fileNameOf(voiceKey(voice.name)) && fileName !== vllmOmniFileNameOf(voice)) {
      throw new InvalidVoiceFileError("file name does not match the voice name (neither its hash nor vLLM-Omni's {name}_{consent}_{created_at})");
    }
    return { voice, stamp };
  }

  private async stampOf(fileName: string): Promise<FileStamp | undefined> {
    try {
      const { ino, size, mtimeMs } = await stat(join(this.dir, fileName));
      return { ino, size, mtimeMs };
    } catch (error) {
      if (errorCode(error) === "ENOENT") return undefined;
      throw error;
    }
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

function sameStamp(a: FileStamp | undefined, b: FileStamp | undefined): boolean {
  return a !== undefined && b !== undefined && a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs;
}

/** Our own errors name only keys and sizes; fs errors carry the full path, so only their code is kept. */
function skipReason(error: unknown): string {
  return error instanceof MalformedSafetensorsError || error instanceof InvalidVoiceFileError ? error.message : (errorCode(error) ?? "unreadable");
}

/** The speaker folder cannot be used; the message names the folder and the reason, for the start-up error. */
export class VoiceStoreFolderError extends Error {
  constructor(readonly dir: string, cause: unknown) {
    const code = errorCode(cause);
    super(`voice store folder ${dir} cannot be used: ${code === undefined ? String(cause) : `it ${describeFolderProblem(code)} (${code})`}`);
    this.name = "VoiceStoreFolderError";
    this.cause = cause;
  }
}

/** Finishes "the folder …" for the errors creating, writing or listing a folder can give. */
function describeFolderProblem(code: string): string {
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

class InvalidVoiceFileError extends Error {
  constructor(reason: string) {
    super(`Invalid voice file: ${reason}`);
    this.name = "InvalidVoiceFileError";
  }
}

function voiceKey(name: string): string {
  return name.trim().toLowerCase();
}

function fileNameOf(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex").slice(0, FILE_NAME_HASH_HEX_CHARS) + VOICE_FILE_SUFFIX;
}

/** vLLM-Omni's `{_sanitize_filename(name)}_{_sanitize_filename(consent)}_{created_at}.safetensors`. */
function vllmOmniFileNameOf(voice: StoredVoice): string {
  return `${sanitizeAsVllmOmni(voice.name)}_${sanitizeAsVllmOmni(voice.consent)}_${voice.created_at}${VOICE_FILE_SUFFIX}`;
}

/**
 * vLLM-Omni's `_sanitize_filename`: the POSIX basename, each code point outside [A-Za-z0-9_.-] replaced by
 * `_` (hence the `u` flag: one `_` per code point, as in Python), "file" if empty, at most 255 characters.
 */
function sanitizeAsVllmOmni(text: string): string {
  const sanitized = text.slice(text.lastIndexOf("/") + 1).replace(/[^a-zA-Z0-9_.\-]/gu, "_");
  return sanitized === "" ? "file" : sanitized.slice(0, 255);
}

/** Audio is `[N]` mono, or `[N, C]` frames × channels as vLLM-Omni stores an upload; an embedding is `[D]`. */
function hasVoiceTensorShape(tensorName: string, shape: readonly number[]): boolean {
  if (shape.length === 0 || shape.some((dimension) => dimension === 0)) return false;
  return shape.length === 1 || (tensorName === AUDIO_TENSOR && shape.length === 2);
}

/** `[N]` as is; `[N, C]` (interleaved frames) split into channels and averaged like any decoded upload. */
function monoSamples(tensor: FloatTensor): Float32Array {
  if (tensor.shape.length === 1) return tensor.data;
  const [frameCount, channelCount] = tensor.shape as [number, number];
  const channels = Array.from({ length: channelCount }, () => new Float32Array(frameCount));
  for (let frame = 0; frame < frameCount; frame++) {
    for (let channel = 0; channel < channelCount; channel++) channels[channel]![frame] = tensor.data[frame * channelCount + channel]!;
  }
  return downmixToMono({ channels, sampleRateHz: 0 });
}

/** safetensors metadata is string → string: every present field as a string, plus the lookup key. */
function voiceMetadata(voice: Omit<StoredVoice, "file_size"> & { file_size?: number }): Record<string, string> {
  const metadata: Record<string, string> = { voice_name_lower: voiceKey(voice.name) };
  for (const [key, value] of Object.entries(voice)) {
    if (value !== undefined) metadata[key] = String(value);
  }
  return metadata;
}

/** The reverse of voiceMetadata, checking everything a StoredVoice promises; never echoes metadata values. */
function voiceFromHeader(header: SafetensorsHeader): StoredVoice {
  const metadata = header.metadata;
  const integers: Partial<Record<(typeof INTEGER_METADATA_KEYS)[number], number>> = {};
  for (const key of INTEGER_METADATA_KEYS) {
    const text = metadata[key];
    if (text === undefined) continue;
    const value = Number(text);
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(value)) throw new InvalidVoiceFileError(`metadata '${key}' is not a non-negative integer`);
    integers[key] = value;
  }
  for (const key of ["name", "consent", "mime_type"] as const) {
    if (metadata[key] === undefined) throw new InvalidVoiceFileError(`metadata '${key}' is missing`);
  }
  if (integers.created_at === undefined) throw new InvalidVoiceFileError("metadata 'created_at' is missing");
  let name: string;
  try {
    name = validateVoiceName(metadata.name!);
  } catch {
    throw new InvalidVoiceFileError("metadata 'name' is not a valid voice name");
  }

  const source = metadata.embedding_source;
  const tensorName = source === "audio" ? AUDIO_TENSOR : source === "direct" ? EMBEDDING_TENSOR : undefined;
  if (tensorName === undefined) throw new InvalidVoiceFileError("metadata 'embedding_source' is not 'audio' or 'direct'");
  const tensor = header.tensors[tensorName];
  if (tensor === undefined || tensor.dtype !== "F32" || !hasVoiceTensorShape(tensorName, tensor.shape)) {
    throw new InvalidVoiceFileError(`no non-empty F32 '${tensorName}' tensor of shape ${tensorName === AUDIO_TENSOR ? "[N] or [N, C]" : "[D]"}`);
  }
  if (source === "audio" && (integers.sample_rate === undefined || integers.sample_rate === 0)) throw new InvalidVoiceFileError("audio voice without a positive 'sample_rate'");
  if (source === "audio" && integers.file_size === undefined) throw new InvalidVoiceFileError("metadata 'file_size' is missing");
  if (source === "direct" && integers.embedding_dim !== tensor.shape[0]) throw new InvalidVoiceFileError("'embedding_dim' does not match the tensor length");

  return {
    name,
    consent: metadata.consent!,
    created_at: integers.created_at,
    mime_type: metadata.mime_type!,
    file_size: integers.file_size ?? header.fileSizeBytes,
    ...(integers.sample_rate === undefined ? {} : { sample_rate: integers.sample_rate }),
    ...(metadata.ref_text === undefined ? {} : { ref_text: metadata.ref_text }),
    ...(metadata.speaker_description === undefined ? {} : { speaker_description: metadata.speaker_description }),
    embedding_source: source as StoredVoice["embedding_source"],
    ...(integers.embedding_dim === undefined ? {} : { embedding_dim: integers.embedding_dim }),
  };
}

function errorCode(error: unknown): string | undefined {
  return typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : undefined;
}
