/**
 * Uploaded voices in an S3-compatible bucket that any number of replicas share (`--voice-store
 * s3://BUCKET/PREFIX`). No locks: the bucket's own conditional writes order the replicas.
 *
 *   PREFIX/voices/<sha256>.safetensors   a voice file exactly as the speaker folder holds it (voice-file.ts),
 *                                        named by its content's hash, never changed once written
 *   PREFIX/manifest.json                 every voice's metadata and body hash, the cap's and created_at's one
 *                                        point of truth, replaced only by compare-and-swap (If-Match)
 *
 * A save writes its body, then swaps in a manifest that names it; a conflict (412/409: another replica's
 * manifest landed first) reads the manifest again, re-checks the cap, picks the next created_at and tries
 * again, with jitter, until SAVE_DEADLINE_MS. So the cap holds and created_at strictly increases across
 * replicas, and a 200 means the manifest in the bucket names the voice. A save killed half-way leaves at most
 * a body no manifest names: invisible, and deleted by the next sweep once it is older than ORPHAN_GRACE_MS.
 *
 * Every request that names a voice, and every listing, first asks the bucket whether the manifest changed
 * (a GET with If-None-Match: a 304 with no body when it did not), so another replica's upload or delete is
 * seen at once. Requests that arrive while such a check is in flight share the next one, never one that
 * started before them. Bodies are cached here by hash: a hash names one content forever.
 *
 * At start the bucket is probed: a server that ignores If-None-Match: * (a silent overwrite) or If-Match
 * cannot keep these rules, and the server refuses to start. The probe also learns whether If-Match wants the
 * ETag as sent (quoted, RFC 7232) or bare (Ceph RGW matches only the bare form).
 */
import { createHash, randomUUID } from "node:crypto";
import { z } from "zod";
import { ApiError, badRequest } from "../api/errors.ts";
import { SerialQueue } from "../async/serial-queue.ts";
import type { Logger } from "../log/logger.ts";
import { S3Error, type S3Bucket } from "../storage/s3.ts";
import { audioVoice, checkedAudioSave, checkedEmbeddingSave, loadedAudio, loadedEmbedding, type SaveAudioInput, type SaveEmbeddingInput, type VoiceStore } from "./store.ts";
import {
  AUDIO_TENSOR,
  decodeVoiceFile,
  EMBEDDING_TENSOR,
  encodeAudioVoiceFile,
  encodeEmbeddingVoiceFile,
  encodeVoiceBody,
  voiceKey,
  VOICE_FILE_SUFFIX,
  type StoredVoice,
  type VoiceBody,
} from "./voice-file.ts";

/** How long a save or delete keeps retrying conflicts with other replicas before a 503. */
const SAVE_DEADLINE_MS = 10_000;
/** A body no manifest names, this old, belongs to a save that will never finish (a save takes at most SAVE_DEADLINE_MS). */
const ORPHAN_GRACE_MS = 60_000;
/** How often each replica sweeps for such bodies. */
const SWEEP_INTERVAL_MS = 60_000;
/** Voice bodies kept in memory, by hash. */
const BODY_CACHE_BYTES = 64 * 1024 * 1024;
/** How often a read retries after finding the body it wanted replaced by another replica. */
const MAX_REPLACED_READ_RETRIES = 3;
const MANIFEST_FORMAT = "voxedge-voices-1";
const SHA256_HEX = /^[0-9a-f]{64}$/;

const storedVoiceSchema = z.object({
  name: z.string().min(1),
  consent: z.string(),
  created_at: z.number().int().nonnegative(),
  mime_type: z.string(),
  file_size: z.number().int().nonnegative(),
  sample_rate: z.number().int().positive().optional(),
  ref_text: z.string().optional(),
  speaker_description: z.string().optional(),
  embedding_source: z.enum(["audio", "direct"]),
  embedding_dim: z.number().int().positive().optional(),
});

const manifestSchema = z
  .object({
    format: z.literal(MANIFEST_FORMAT),
    /** Which write made this version: a save whose swap was answered 412 after a retried PUT finds its own. */
    revision: z.string(),
    /** The newest created_at ever given, deleted voices' included, so a new upload never reuses one. */
    last_created_at: z.number().int().nonnegative(),
    voices: z.record(z.string(), z.object({ voice: storedVoiceSchema, body: z.string().regex(SHA256_HEX) })),
  })
  .refine((manifest) => Object.entries(manifest.voices).every(([key, entry]) => voiceKey(entry.voice.name) === key), "a voice is listed under a key other than its lower-cased name");

type Manifest = z.infer<typeof manifestSchema>;
type ManifestEntry = Manifest["voices"][string];

/** The manifest as last read, and the ETag to swap it against (undefined: there is none yet). */
interface ManifestVersion {
  manifest: Manifest;
  etag: string | undefined;
}

/** How this bucket matches If-Match: against the ETag as it sends it, or without its quotes. */
type EtagForm = "quoted" | "bare";

export interface S3VoiceStoreOptions {
  bucket: S3Bucket;
  prefix: string;
  maxVoices: number;
  logger: Logger;
  /** Overrides for tests of the sweep; the defaults otherwise. */
  orphanGraceMs?: number;
  sweepIntervalMs?: number;
}

/** The bucket cannot hold the voice store: unreachable, refused, or without the conditional writes it needs. */
export class VoiceStoreBucketError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "VoiceStoreBucketError";
  }
}

export class S3VoiceStore implements VoiceStore {
  private current: ManifestVersion = { manifest: emptyManifest(), etag: undefined };
  private readonly evictListeners: ((nameLower: string) => void)[] = [];
  private readonly mutations = new SerialQueue();
  private readonly bodies = new BodyCache(BODY_CACHE_BYTES);
  private etagForm: EtagForm = "quoted";
  /** The freshness check in flight, and the one queued behind it that later requests share. */
  private checkInFlight: Promise<void> | undefined;
  private checkQueued: Promise<void> | undefined;
  private sweepTimer: ReturnType<typeof setInterval> | undefined;
  private readonly manifestKey: string;
  private readonly bodyPrefix: string;

  private constructor(private readonly options: S3VoiceStoreOptions) {
    const base = options.prefix === "" ? "" : `${options.prefix}/`;
    this.manifestKey = `${base}manifest.json`;
    this.bodyPrefix = `${base}voices/`;
  }

  /** Probes the bucket, reads the manifest and sweeps once; throws VoiceStoreBucketError when the bucket cannot be used. */
  static async open(options: S3VoiceStoreOptions): Promise<S3VoiceStore> {
    const store = new S3VoiceStore(options);
    const where = `s3://${options.bucket.bucket}/${options.prefix} at ${options.bucket.describe()}`;
    try {
      store.etagForm = await probeConditionalWrites(options.bucket, `${options.prefix === "" ? "" : `${options.prefix}/`}.voxedge-probe-${randomUUID()}`);
      await store.readManifest();
    } catch (error) {
      if (error instanceof VoiceStoreBucketError) throw new VoiceStoreBucketError(`voice store ${where} cannot be used: ${error.message}`, { cause: error });
      if (error instanceof S3Error || error instanceof ManifestInvalidError) throw new VoiceStoreBucketError(`voice store ${where} cannot be used: ${error.message}`, { cause: error });
      throw error;
    }
    await store.sweepOrphans().catch((error) => options.logger.warn("voice store sweep failed", { error: describe(error) }));
    store.sweepTimer = setInterval(() => {
      store.sweepOrphans().catch((error) => options.logger.warn("voice store sweep failed", { error: describe(error) }));
    }, options.sweepIntervalMs ?? SWEEP_INTERVAL_MS);
    (store.sweepTimer as { unref?: () => void }).unref?.();
    options.logger.info("Voice store opened", { store: where, max_voices: options.maxVoices, restored: Object.keys(store.current.manifest.voices).length, if_match_etag: store.etagForm });
    return store;
  }

  /** Stops the periodic sweep (a test that opens many stores; a server just exits). */
  close(): void {
    clearInterval(this.sweepTimer);
  }

  /** One manifest serves every name: a check of it is a check of this one. */
  refreshName(_name: string): Promise<void> {
    return this.checkForChanges();
  }

  rescan(): Promise<void> {
    return this.checkForChanges();
  }

  list(): StoredVoice[] {
    return Object.values(this.current.manifest.voices)
      .map((entry) => entry.voice)
      .sort((a, b) => a.created_at - b.created_at || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  get(name: string): StoredVoice | undefined {
    return this.current.manifest.voices[voiceKey(name)]?.voice;
  }

  settled(): Promise<void> {
    return this.mutations.idle();
  }

  onEvict(listener: (nameLower: string) => void): void {
    this.evictListeners.push(listener);
  }

  saveAudio(input: SaveAudioInput): Promise<StoredVoice> {
    const name = checkedAudioSave(input);
    return this.save(name, (createdAt) => {
      const voice = audioVoice(input, name, createdAt);
      return { voice, fileBytes: encodeAudioVoiceFile(voice, input.samples) };
    });
  }

  saveEmbedding(input: SaveEmbeddingInput): Promise<StoredVoice> {
    const name = checkedEmbeddingSave(input);
    return this.save(name, (createdAt) => encodeEmbeddingVoiceFile(name, input.consent, createdAt, input.embedding));
  }

  importVoice(voice: StoredVoice, body: VoiceBody): Promise<"imported" | "kept"> {
    const encoded = encodeVoiceBody(voice, body);
    return this.mutations.run(async () => {
      let outcome: "imported" | "kept" = "imported";
      await this.swapManifest("the voice was not copied", async (manifest) => {
        const existing = manifest.voices[voiceKey(voice.name)];
        if (existing !== undefined && existing.voice.created_at >= voice.created_at) {
          outcome = "kept";
          return undefined;
        }
        outcome = "imported";
        const body = await this.putBody(encoded.fileBytes);
        return { ...withVoice(manifest, encoded.voice, body), last_created_at: Math.max(manifest.last_created_at, voice.created_at) };
      });
      return outcome;
    });
  }

  delete(name: string): Promise<boolean> {
    const key = voiceKey(name);
    return this.mutations.run(async () => {
      let found = false;
      await this.swapManifest("the voice was not deleted", async (manifest) => {
        found = manifest.voices[key] !== undefined;
        if (!found) return undefined;
        const { [key]: _removed, ...voices } = manifest.voices;
        return { ...manifest, voices };
      });
      return found;
    });
  }

  async loadAudio(name: string): Promise<{ voice: StoredVoice; samples: Float32Array; sampleRateHz: number } | undefined> {
    return loadedAudio(await this.loadTensor(name, "audio", AUDIO_TENSOR));
  }

  async loadEmbedding(name: string): Promise<{ voice: StoredVoice; embedding: Float32Array } | undefined> {
    return loadedEmbedding(await this.loadTensor(name, "direct", EMBEDDING_TENSOR));
  }

  /**
   * Deletes bodies that no manifest names and that are older than the grace period, by the bucket's clock
   * (replicas' clocks may differ from it and from each other).
   */
  async sweepOrphans(graceMs = this.options.orphanGraceMs ?? ORPHAN_GRACE_MS): Promise<number> {
    const { objects, serverTime } = await this.options.bucket.list(this.bodyPrefix);
    // Read after listing: a body listed here and named by a manifest swapped in since is seen as named.
    await this.readManifest();
    const named = new Set(Object.values(this.current.manifest.voices).map((entry) => this.bodyKey(entry.body)));
    let deleted = 0;
    for (const object of objects) {
      if (named.has(object.key) || serverTime.getTime() - object.lastModified.getTime() < graceMs) continue;
      await this.options.bucket.delete(object.key);
      deleted++;
    }
    if (deleted > 0) this.options.logger.info("voice store swept bodies no voice names", { deleted });
    return deleted;
  }

  private save(name: string, encodeAt: (createdAt: number) => { voice: StoredVoice; fileBytes: Uint8Array }): Promise<StoredVoice> {
    const key = voiceKey(name);
    return this.mutations.run(async () => {
      let saved: StoredVoice | undefined;
      await this.swapManifest("the voice was not saved", async (manifest) => {
        const otherVoiceCount = Object.keys(manifest.voices).length - (manifest.voices[key] === undefined ? 0 : 1);
        if (otherVoiceCount >= this.options.maxVoices) {
          throw badRequest(`Uploaded voice limit reached (${this.options.maxVoices}). Delete a voice before adding another, or raise SPEAKER_MAX_UPLOADED.`, "name");
        }
        // Whole seconds like upstream, after every created_at any replica gave, even within one second.
        const createdAt = Math.max(Math.floor(Date.now() / 1000), manifest.last_created_at + 1);
        const encoded = encodeAt(createdAt);
        saved = Object.freeze(encoded.voice);
        const body = await this.putBody(encoded.fileBytes);
        return { ...withVoice(manifest, saved, body), last_created_at: createdAt };
      });
      return saved!;
    });
  }

  /**
   * Reads the manifest, lets `change` make the next one (undefined: nothing to change), and swaps it in if no
   * other replica's landed meanwhile; otherwise reads again and retries with jitter. Bodies the swapped-out
   * manifest named and the new one does not are deleted; a body written for a swap that lost is deleted too.
   */
  private async swapManifest(outcome: string, change: (manifest: Manifest) => Promise<Manifest | undefined>): Promise<void> {
    const deadline = Date.now() + SAVE_DEADLINE_MS;
    for (let attempt = 0; ; attempt++) {
      const before = await this.readManifestFor(outcome);
      const proposal = await change(before.manifest);
      if (proposal === undefined) return;
      const next: Manifest = { ...proposal, revision: randomUUID() };
      const written = await this.options.bucket
        .put(this.manifestKey, JSON.stringify(next), before.etag === undefined ? { ifNoneMatch: "*" } : { ifMatch: this.ifMatchValue(before.etag) }, "application/json")
        .catch((error) => {
          throw this.unavailable(error, outcome);
        });
      if (written !== "conflict") {
        this.adopt({ manifest: next, etag: written.etag });
        await this.deleteBodiesDropped(before.manifest, next);
        return;
      }
      // A PUT retried after a lost answer finds its own manifest already there.
      const now = await this.readManifestFor(outcome);
      if (now.manifest.revision === next.revision) {
        await this.deleteBodiesDropped(before.manifest, next);
        return;
      }
      await this.deleteBodiesDropped(next, now.manifest);
      if (Date.now() > deadline) throw new ApiError(503, `The voice store is busy with other replicas' changes (${attempt + 1} tries in ${SAVE_DEADLINE_MS / 1000} s); ${outcome}, retry`);
      await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(200, 5 * 2 ** attempt)));
    }
  }

  /** Deletes the bodies `from` names and `to` does not (best effort: a body left behind is swept later). */
  private async deleteBodiesDropped(from: Manifest, to: Manifest): Promise<void> {
    const kept = new Set(Object.values(to.voices).map((entry) => entry.body));
    for (const entry of Object.values(from.voices)) {
      if (kept.has(entry.body)) continue;
      await this.options.bucket.delete(this.bodyKey(entry.body)).catch((error) => this.options.logger.warn("could not delete a voice body no voice names; the sweep will", { error: describe(error) }));
    }
  }

  /** Writes a body under its hash (the same key always holds the same bytes, so a rewrite is harmless and renews its age). */
  private async putBody(fileBytes: Uint8Array): Promise<string> {
    const hash = createHash("sha256").update(fileBytes).digest("hex");
    await this.options.bucket.put(this.bodyKey(hash), fileBytes).catch((error) => {
      throw this.unavailable(error, "the voice was not saved");
    });
    this.bodies.set(hash, fileBytes);
    return hash;
  }

  private bodyKey(hash: string): string {
    return `${this.bodyPrefix}${hash}${VOICE_FILE_SUFFIX}`;
  }

  private ifMatchValue(etag: string): string {
    return this.etagForm === "bare" ? etag.replace(/^(W\/)?"(.*)"$/, "$2") : etag;
  }

  /**
   * One freshness check per wave of requests: a request joins the check queued behind the one in flight (which
   * may have started before its caller's change landed elsewhere), never the one in flight.
   */
  private checkForChanges(): Promise<void> {
    if (this.checkInFlight === undefined) {
      this.checkInFlight = this.servingLastRead().finally(() => (this.checkInFlight = undefined));
      return this.checkInFlight;
    }
    this.checkQueued ??= this.checkInFlight.then(() => {
      this.checkQueued = undefined;
      return this.checkForChanges();
    });
    return this.checkQueued;
  }

  /** A bucket that cannot be read right now leaves reads with what was last read (saves and deletes still fail, saying why). */
  private async servingLastRead(): Promise<void> {
    try {
      await this.readManifest();
    } catch (error) {
      if (!(error instanceof S3Error || error instanceof ManifestInvalidError)) throw error;
      this.options.logger.warn("voice store manifest could not be read; serving the voices last read", { error: error.message });
    }
  }

  private readManifestFor(outcome: string): Promise<ManifestVersion> {
    return this.readManifest().catch((error) => {
      throw this.unavailable(error, outcome);
    });
  }

  /** The manifest now in the bucket (a 304 when it is the one we hold), adopted. */
  private async readManifest(): Promise<ManifestVersion> {
    const answer = await this.options.bucket.get(this.manifestKey, this.current.etag === undefined ? {} : { ifNoneMatch: this.current.etag });
    if (answer === "unchanged") return this.current;
    if (answer === "missing") {
      this.adopt({ manifest: emptyManifest(), etag: undefined });
      return this.current;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(new TextDecoder().decode(answer.body));
    } catch {
      throw new ManifestInvalidError(`${this.manifestKey} is not JSON`);
    }
    const checked = manifestSchema.safeParse(parsed);
    if (!checked.success) throw new ManifestInvalidError(`${this.manifestKey} is not a voice manifest: ${checked.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`).join("; ")}`);
    this.adopt({ manifest: checked.data, etag: answer.etag });
    return this.current;
  }

  /** Takes a newer manifest; every voice it replaced or removed is evicted from the caches. */
  private adopt(next: ManifestVersion): void {
    const previous = this.current.manifest;
    this.current = next;
    if (next.manifest === previous) return;
    for (const [key, entry] of Object.entries(previous.voices)) {
      const now = next.manifest.voices[key];
      if (now === undefined || now.body !== entry.body || now.voice.created_at !== entry.voice.created_at) this.fireEvict(key);
    }
  }

  private async loadTensor(name: string, source: StoredVoice["embedding_source"], tensorName: string) {
    const key = voiceKey(name);
    for (let retries = 0; ; retries++) {
      const entry: ManifestEntry | undefined = this.current.manifest.voices[key];
      if (entry === undefined || entry.voice.embedding_source !== source) return undefined;
      const fileBytes = await this.readBody(entry.body);
      if (fileBytes === undefined) {
        // Replaced or deleted by another replica since the manifest was read: read it again.
        if (retries >= MAX_REPLACED_READ_RETRIES) throw new Error(`The stored body of voice '${entry.voice.name}' is missing from the bucket`);
        await this.checkForChanges();
        continue;
      }
      const decoded = decodeVoiceFile(fileBytes, tensorName);
      if (decoded.tensor === undefined) throw new Error(`The stored file of voice '${entry.voice.name}' has no '${tensorName}' tensor of the expected shape`);
      return { voice: entry.voice, tensor: decoded.tensor };
    }
  }

  private async readBody(hash: string): Promise<Uint8Array | undefined> {
    const cached = this.bodies.get(hash);
    if (cached !== undefined) return cached;
    const answer = await this.options.bucket.get(this.bodyKey(hash));
    if (answer === "missing" || answer === "unchanged") return undefined;
    // A body is named by its hash, so one whose bytes do not hash to its name is not the voice's.
    if (createHash("sha256").update(answer.body).digest("hex") !== hash) throw new Error(`The stored body ${hash} does not match its hash`);
    this.bodies.set(hash, answer.body);
    return answer.body;
  }

  private unavailable(error: unknown, outcome: string): unknown {
    if (error instanceof ManifestInvalidError) {
      this.options.logger.error("voice store manifest is not valid", { error: error.message });
      return new ApiError(503, `The voice store's manifest in the bucket is not valid; ${outcome}`);
    }
    if (!(error instanceof S3Error)) return error;
    this.options.logger.error("voice store bucket failed", { error: error.message });
    return new ApiError(503, `The voice store bucket could not be reached or refused the request (${error.status === undefined ? "no answer" : `HTTP ${error.status}`}); ${outcome}, retry`);
  }

  private fireEvict(key: string): void {
    for (const listener of this.evictListeners) {
      try {
        listener(key);
      } catch (error) {
        this.options.logger.error("Voice evict listener failed", { error: describe(error) });
      }
    }
  }
}

class ManifestInvalidError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ManifestInvalidError";
  }
}

function emptyManifest(): Manifest {
  return { format: MANIFEST_FORMAT, revision: "", last_created_at: 0, voices: {} };
}

function withVoice(manifest: Manifest, voice: StoredVoice, body: string): Manifest {
  return { ...manifest, voices: { ...manifest.voices, [voiceKey(voice.name)]: { voice, body } } };
}

/**
 * What a bucket does with conditional PUTs, on a key of its own: a create-only PUT must refuse a key that
 * exists, and If-Match must refuse a stale ETag and accept the current one in the quoted or the bare form.
 */
async function probeConditionalWrites(bucket: S3Bucket, probeKey: string): Promise<EtagForm> {
  try {
    const created = await bucket.put(probeKey, "1", { ifNoneMatch: "*" });
    if (created === "conflict") throw new VoiceStoreBucketError(`a create-only PUT (If-None-Match: *) of the new key ${probeKey} was refused`);
    if ((await bucket.put(probeKey, "2", { ifNoneMatch: "*" })) !== "conflict") {
      throw new VoiceStoreBucketError("the server ignores If-None-Match: * on PUT (it overwrote an existing object), so replicas could overwrite each other's voices; use an S3 server with conditional writes (AWS S3, Ceph RGW, MinIO, …)");
    }
    if ((await bucket.put(probeKey, "3", { ifMatch: '"0123456789abcdef0123456789abcdef"' })) !== "conflict") {
      throw new VoiceStoreBucketError("the server ignores If-Match on PUT (a stale ETag was accepted), so replicas could lose each other's changes; use an S3 server with conditional writes (AWS S3, Ceph RGW, MinIO, …)");
    }
    if ((await bucket.put(probeKey, "4", { ifMatch: created.etag })) !== "conflict") return "quoted";
    const bare = created.etag.replace(/^(W\/)?"(.*)"$/, "$2");
    if ((await bucket.put(probeKey, "5", { ifMatch: bare })) !== "conflict") return "bare";
    throw new VoiceStoreBucketError(`the server refuses If-Match with the object's current ETag (${created.etag}), quoted or bare`);
  } finally {
    await bucket.delete(probeKey).catch(() => undefined);
  }
}

/** Bodies by hash, the least recently used dropped first once over `capacityBytes`. */
class BodyCache {
  private readonly entries = new Map<string, Uint8Array>();
  private sizeBytes = 0;

  constructor(private readonly capacityBytes: number) {}

  get(hash: string): Uint8Array | undefined {
    const body = this.entries.get(hash);
    if (body !== undefined) {
      this.entries.delete(hash);
      this.entries.set(hash, body);
    }
    return body;
  }

  set(hash: string, body: Uint8Array): void {
    if (this.entries.has(hash) || body.length > this.capacityBytes) return;
    this.entries.set(hash, body);
    this.sizeBytes += body.length;
    for (const [oldest, oldBody] of this.entries) {
      if (this.sizeBytes <= this.capacityBytes) break;
      this.entries.delete(oldest);
      this.sizeBytes -= oldBody.length;
    }
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
