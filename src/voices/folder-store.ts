/**
 * Uploaded voices, one file each in the speaker folder (voice-file.ts: what a file holds and how it is
 * named), restored on restart (vLLM-Omni's speaker storage semantics). The folder on disk, its crash-safe
 * writes, scans and the lock replicas share, is speaker-folder.ts's.
 *
 * Mutations run one at a time through a SerialQueue, so `created_at` and the cap see a consistent map.
 *
 * A speaker folder written by vLLM-Omni is restored as it is. Such a file is never rewritten or renamed: it
 * is read in place until its voice is replaced (the new file is ours, the old one is removed) or deleted.
 * When two files hold the same name (a crash between writing a replacement and removing the old file), the
 * newer `created_at` wins and the other is removed with it.
 *
 * Several servers may share one folder (replicas on a network volume). The folder is the truth and the map a
 * cache of its headers, checked against it where a stale answer would be wrong: a request naming a voice
 * stats that voice's file first (one stat: the file name is a hash of the name, so a voice uploaded on
 * another replica is found by its name alone, and one deleted there is gone here), a listing re-scans the
 * folder (only changed files' headers are read again), and so do saves, so the cap counts every replica's
 * voices. A changed voice is evicted from every cache (onEvict) even when its created_at is the same.
 *
 * The folder must be creatable and writable when the store opens (a test file is written and removed), so a
 * bad --speaker-dir stops the server at start. If it breaks later, a save or a delete is a 507 (the folder cannot take the change) that
 * say what is wrong with the folder; the full path goes to the log, not to the client.
 */
import { badRequest } from "../api/errors.ts";
import type { Logger } from "../log/logger.ts";
import { SerialQueue } from "../async/serial-queue.ts";
import { audioVoice, checkedAudioSave, checkedEmbeddingSave, loadedAudio, loadedEmbedding, type SaveAudioInput, type SaveEmbeddingInput, type VoiceStore } from "./store.ts";
import type { FloatTensor } from "../formats/safetensors.ts";
import { describeFolderProblem, errorCode, sameStamp, SpeakerFolder, type VoiceEntry } from "./speaker-folder.ts";
import {
  AUDIO_TENSOR,
  decodeVoiceFile,
  EMBEDDING_TENSOR,
  encodeAudioVoiceFile,
  encodeEmbeddingVoiceFile,
  encodeVoiceBody,
  voiceFileName,
  voiceKey,
  type StoredVoice,
  type VoiceBody,
} from "./voice-file.ts";

export interface FolderVoiceStoreOptions {
  dir: string;
  maxVoices: number;
  logger: Logger;
}

/** How often a read retries after finding its file replaced by another replica. */
const MAX_REPLACED_READ_RETRIES = 3;

export class FolderVoiceStore implements VoiceStore {
  private readonly voices = new Map<string, VoiceEntry>();
  private readonly evictListeners: ((nameLower: string) => void)[] = [];
  private readonly mutations = new SerialQueue();
  private readonly folder: SpeakerFolder;
  private lastCreatedAtSeconds = 0;

  private constructor(
    private readonly dir: string,
    private readonly maxVoices: number,
    private readonly logger: Logger,
  ) {
    this.folder = new SpeakerFolder(dir, logger);
  }

  /** Throws VoiceStoreFolderError when the folder cannot be created, written or listed. */
  static async open(options: FolderVoiceStoreOptions): Promise<FolderVoiceStore> {
    const store = new FolderVoiceStore(options.dir, options.maxVoices, options.logger);
    try {
      await store.folder.prepare();
    } catch (error) {
      throw new VoiceStoreFolderError(options.dir, error);
    }
    try {
      // A lock left by a save of this host's that was killed would hold every replica's saves back.
      await store.folder.removeStaleLock();
      await store.folder.removeDeadClaims();
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
    const name = checkedAudioSave(input);
    return this.mutations.run(() => this.folder.underWriteLock(async () => {
      await this.rescanFolder().catch((error) => {
        throw this.folder.failure(error, "the voice was not saved");
      });
      this.checkCap(name);
      const voice = audioVoice(input, name, this.nextCreatedAt());
      await this.commit(voice, encodeAudioVoiceFile(voice, input.samples));
      return voice;
    }));
  }

  async saveEmbedding(input: SaveEmbeddingInput): Promise<StoredVoice> {
    const name = checkedEmbeddingSave(input);
    return this.mutations.run(() => this.folder.underWriteLock(async () => {
      await this.rescanFolder().catch((error) => {
        throw this.folder.failure(error, "the voice was not saved");
      });
      this.checkCap(name);
      const { voice, fileBytes } = encodeEmbeddingVoiceFile(name, input.consent, this.nextCreatedAt(), input.embedding);
      await this.commit(voice, fileBytes);
      return voice;
    }));
  }

  importVoice(voice: StoredVoice, body: VoiceBody): Promise<"imported" | "kept"> {
    return this.mutations.run(() => this.folder.underWriteLock(async () => {
      await this.rescanFolder().catch((error) => {
        throw this.folder.failure(error, "the voice was not copied");
      });
      const existing = this.voices.get(voiceKey(voice.name));
      if (existing !== undefined && existing.voice.created_at >= voice.created_at) return "kept";
      const copied = encodeVoiceBody(voice, body);
      this.sawVoice(copied.voice);
      await this.commit(copied.voice, copied.fileBytes);
      return "imported";
    }));
  }

  delete(name: string): Promise<boolean> {
    return this.mutations.run(async () => {
      const key = voiceKey(name);
      // Another replica may have uploaded it, or deleted it already.
      await this.refreshKey(key).catch((error) => {
        throw this.folder.failure(error, "the voice was not deleted");
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
      await this.folder.syncRemovals().catch((error) => {
        throw this.folder.failure(error, "the deletion may not survive a restart");
      });
      return true;
    });
  }

  async loadAudio(name: string): Promise<{ voice: StoredVoice; samples: Float32Array; sampleRateHz: number } | undefined> {
    return loadedAudio(await this.loadTensor(name, "audio", AUDIO_TENSOR));
  }

  async loadEmbedding(name: string): Promise<{ voice: StoredVoice; embedding: Float32Array } | undefined> {
    return loadedEmbedding(await this.loadTensor(name, "direct", EMBEDDING_TENSOR));
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
        fileBytes = await this.folder.readWholeFile(entry.fileName);
      } catch (error) {
        if (await raceWithMutation()) continue;
        // Deleted or replaced by another replica: the folder says which.
        if (errorCode(error) === "ENOENT" && replacedReads++ < MAX_REPLACED_READ_RETRIES) {
          await this.refreshName(name);
          continue;
        }
        throw new Error(`Could not read the stored file of voice '${voice.name}' (${errorCode(error) ?? "unknown error"})`);
      }
      const decoded = decodeVoiceFile(fileBytes, tensorName);
      if (decoded.createdAt !== String(voice.created_at)) {
        if (await raceWithMutation()) continue;
        // Replaced by another replica sharing the folder: read its header, and the new version.
        if (replacedReads++ < MAX_REPLACED_READ_RETRIES) {
          await this.refreshName(name);
          continue;
        }
        throw new Error(`The stored file of voice '${voice.name}' keeps changing outside this server`);
      }
      if (decoded.tensor === undefined) throw new Error(`The stored file of voice '${voice.name}' has no '${tensorName}' tensor of the expected shape`);
      return { voice, tensor: decoded.tensor };
    }
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

  /** A voice read from the folder: the next upload's created_at comes after it, whichever replica made it. */
  private sawVoice(voice: StoredVoice): void {
    this.lastCreatedAtSeconds = Math.max(this.lastCreatedAtSeconds, voice.created_at);
  }

  /**
   * Until the rename the old voice, file and map entry are untouched, so any failure before it leaves
   * the old voice intact. After the rename the new file is what a restart would see, so the map follows
   * it even when the folder fsync then fails.
   */
  private async commit(voice: StoredVoice, fileBytes: Uint8Array): Promise<void> {
    const key = voiceKey(voice.name);
    const fileName = voiceFileName(key);
    const notDurable = await this.folder.writeVoiceFile(fileName, fileBytes).catch((error) => {
      throw this.folder.failure(error, "the voice was not saved");
    });
    const replaced = this.voices.get(key);
    this.voices.set(key, { voice: Object.freeze(voice), fileName, supersededFileNames: [], stamp: await this.folder.stampOf(fileName) });
    if (replaced) {
      this.fireEvict(key);
      await this.removeReplacedFiles(replaced, fileName);
    }
    if (notDurable) throw this.folder.failure(notDurable, "the voice is saved but may not survive a restart");
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
        await this.folder.removeFile(fileName);
      } catch (error) {
        this.logger.warn("Could not remove the replaced voice's old file", { file: fileName, code: errorCode(error) });
      }
    }
  }

  private async removeFile(fileName: string, outcome: string): Promise<void> {
    await this.folder.removeFile(fileName).catch((error) => {
      throw this.folder.failure(error, outcome);
    });
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
    const { voices, skipped, removedTempFiles } = await this.folder.scan(new Map(), "warn");
    for (const [key, entry] of voices) {
      this.voices.set(key, entry);
      this.sawVoice(entry.voice);
    }
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
    const { voices } = await this.folder.scan(known, "debug");
    for (const entry of voices.values()) this.sawVoice(entry.voice);
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
    const hashedFileName = voiceFileName(key);
    if (entry === undefined) {
      // The common miss (a built-in voice's name): one stat, nothing there.
      if ((await this.folder.stampOf(hashedFileName)) === undefined) return;
    } else {
      const unchanged = sameStamp(await this.folder.stampOf(entry.fileName), entry.stamp);
      if (unchanged && (entry.fileName === hashedFileName || (await this.folder.stampOf(hashedFileName)) === undefined)) return;
    }
    const next = await this.folder.readName(key, new Set([hashedFileName, ...(entry ? [entry.fileName, ...entry.supersededFileNames] : [])]));
    if (next === undefined) this.voices.delete(key);
    else {
      this.voices.set(key, next);
      this.sawVoice(next.voice);
    }
    if (entry !== undefined) this.fireEvict(key);
  }
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
