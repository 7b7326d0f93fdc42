/**
 * The S3 voice store against a real Ceph RGW (test/support/rgw.ts): the folder store's rules (case-insensitive
 * names, the cap, strictly increasing created_at, replace, delete, consent) across several stores on one
 * bucket, as replicas are; the manifest's validation; the sweep of bodies no voice names; and the start-up
 * probe, which refuses a server that ignores conditional writes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ApiError } from "../../src/api/errors.ts";
import { silentLogger } from "../../src/log/logger.ts";
import { S3Bucket } from "../../src/storage/s3.ts";
import { S3VoiceStore, VoiceStoreBucketError } from "../../src/voices/s3-store.ts";
import type { SaveAudioInput } from "../../src/voices/store.ts";
import { sharedRgw, type Rgw } from "../support/rgw.ts";

let rgw: Rgw;
beforeAll(async () => {
  rgw = await sharedRgw();
}, 150_000);

const opened: S3VoiceStore[] = [];
afterAll(() => opened.forEach((store) => store.close()));

async function openStore(bucket: S3Bucket, prefix = "voices", maxVoices = 1000, extra: { orphanGraceMs?: number } = {}) {
  const store = await S3VoiceStore.open({ bucket, prefix, maxVoices, logger: silentLogger, ...extra });
  opened.push(store);
  return store;
}

const tone = (length: number, step = 0.01) => Float32Array.from({ length }, (_, index) => Math.sin(index * step) * 0.5);
const audioInput = (name: string, overrides: Partial<SaveAudioInput> = {}): SaveAudioInput => ({
  name,
  consent: `consent-${name}`,
  mimeType: "audio/wav",
  fileSizeBytes: 1234,
  samples: tone(4800),
  sampleRateHz: 24000,
  ...overrides,
});

const objectKeys = async (bucket: S3Bucket, prefix = "") => (await bucket.list(prefix)).objects.map((object) => object.key).sort();
const refusalOf = async (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error);

describe("one store", () => {
  let bucket: S3Bucket;
  beforeAll(async () => {
    bucket = await rgw.newBucket("one-store");
  });

  test("opens on an empty bucket with no voices and leaves no probe object behind", async () => {
    const store = await openStore(bucket);
    expect(store.list()).toEqual([]);
    expect(await objectKeys(bucket)).toEqual([]);
  });

  test("saves, lists and loads audio and embedding voices; names are case-insensitive; consent and metadata are kept", async () => {
    const store = await openStore(bucket, "kinds");
    const samples = tone(24000);
    const audio = await store.saveAudio(audioInput("Ada", { samples, refText: "hello there", speakerDescription: "calm" }));
    expect(audio).toMatchObject({ name: "Ada", consent: "consent-Ada", sample_rate: 24000, ref_text: "hello there", speaker_description: "calm", embedding_source: "audio" });
    const embedding = Float32Array.from({ length: 32 }, (_, index) => index / 32);
    const direct = await store.saveEmbedding({ name: "Bea", consent: "ok", embedding });
    expect(direct).toMatchObject({ name: "Bea", embedding_source: "direct", embedding_dim: 32 });
    expect(direct.created_at).toBeGreaterThan(audio.created_at);

    expect(store.get("ADA")).toEqual(audio);
    expect(store.list().map((voice) => voice.name)).toEqual(["Ada", "Bea"]);
    const loaded = await store.loadAudio("ada");
    expect(loaded?.sampleRateHz).toBe(24000);
    expect(Array.from(loaded!.samples)).toEqual(Array.from(samples));
    expect(Array.from((await store.loadEmbedding("bea"))!.embedding)).toEqual(Array.from(embedding));
    // Each kind loads only as itself.
    expect(await store.loadEmbedding("ada")).toBeUndefined();
    expect(await store.loadAudio("bea")).toBeUndefined();
    // One manifest and one body per voice.
    expect((await objectKeys(bucket, "kinds/")).filter((key) => key.startsWith("kinds/voices/"))).toHaveLength(2);
  });

  test("a re-upload under another case replaces the voice with a newer created_at and deletes the old body; delete removes both", async () => {
    const store = await openStore(bucket, "replace");
    const evicted: string[] = [];
    store.onEvict((name) => evicted.push(name));
    const first = await store.saveAudio(audioInput("Cleo"));
    const bodiesBefore = await objectKeys(bucket, "replace/voices/");
    const second = await store.saveAudio(audioInput("CLEO", { samples: tone(4800, 0.02) }));
    expect(second.created_at).toBeGreaterThan(first.created_at);
    expect(store.list()).toEqual([second]);
    expect(evicted).toEqual(["cleo"]);
    const bodiesAfter = await objectKeys(bucket, "replace/voices/");
    expect(bodiesAfter).toHaveLength(1);
    expect(bodiesAfter).not.toEqual(bodiesBefore);

    expect(await store.delete("cleo")).toBe(true);
    expect(await store.delete("cleo")).toBe(false);
    expect(store.list()).toEqual([]);
    expect(await objectKeys(bucket, "replace/voices/")).toEqual([]);
  });

  test("the cap refuses a new name with a 400 but lets a voice at the cap be replaced", async () => {
    const store = await openStore(bucket, "cap", 2);
    await store.saveAudio(audioInput("one"));
    await store.saveAudio(audioInput("two"));
    const refusal = await refusalOf(store.saveAudio(audioInput("three")));
    expect(refusal).toBeInstanceOf(ApiError);
    expect((refusal as ApiError).status).toBe(400);
    expect((refusal as ApiError).message).toContain("Uploaded voice limit reached (2)");
    await store.saveAudio(audioInput("TWO"));
    expect(store.list().map((voice) => voice.name)).toEqual(["one", "TWO"]);
    // A refused upload leaves no body behind.
    expect(await objectKeys(bucket, "cap/voices/")).toHaveLength(2);
  });

  test("a copy keeps created_at and consent, and a second copy of the same voice is kept as it is", async () => {
    const store = await openStore(bucket, "import");
    const voice = { name: "Old", consent: "signed 2024", created_at: 1_700_000_000, mime_type: "audio/wav", file_size: 99, sample_rate: 16000, embedding_source: "audio" as const };
    expect(await store.importVoice(voice, { kind: "audio", samples: tone(1600) })).toBe("imported");
    expect(store.get("old")).toEqual(voice);
    expect(await store.importVoice(voice, { kind: "audio", samples: tone(1600) })).toBe("kept");
    // The next upload still gets a created_at after every one given.
    const next = await store.saveAudio(audioInput("New"));
    expect(next.created_at).toBeGreaterThan(voice.created_at);
  });
});

describe("replicas on one bucket", () => {
  test("an upload, a replacement and a delete through one store are seen by another on its next check, with no stale window", async () => {
    const bucket = await rgw.newBucket("replicas");
    const [a, b] = [await openStore(bucket), await openStore(bucket)];
    const evictedOnB: string[] = [];
    b.onEvict((name) => evictedOnB.push(name));

    await b.refreshName("ada");
    expect(b.get("ada")).toBeUndefined();
    const saved = await a.saveAudio(audioInput("Ada"));
    await b.refreshName("ada");
    expect(b.get("ada")).toEqual(saved);
    expect((await b.loadAudio("ada"))?.samples.length).toBe(4800);

    const replaced = await b.saveAudio(audioInput("ada", { samples: tone(2400) }));
    expect(replaced.created_at).toBeGreaterThan(saved.created_at);
    await a.refreshName("Ada");
    expect(a.get("ada")).toEqual(replaced);
    expect((await a.loadAudio("ada"))?.samples.length).toBe(2400);

    expect(await a.delete("ADA")).toBe(true);
    await b.rescan();
    expect(b.list()).toEqual([]);
    // Once for its own replacement, once for the delete made elsewhere.
    expect(evictedOnB).toEqual(["ada", "ada"]);
    expect(await b.delete("ada")).toBe(false);
  });

  test("a store holding a stale manifest finds a body deleted under it by reading the manifest again", async () => {
    const bucket = await rgw.newBucket("stale-body");
    const [a, b] = [await openStore(bucket), await openStore(bucket)];
    await a.saveAudio(audioInput("Dee"));
    await b.rescan();
    // Replaced on a; b has not checked since, so it still names the old body, now deleted.
    const replaced = await a.saveAudio(audioInput("Dee", { samples: tone(1200) }));
    const loaded = await b.loadAudio("dee");
    expect(loaded?.voice).toEqual(replaced);
    expect(loaded?.samples.length).toBe(1200);
  });

  test("three stores × 30 concurrent uploads of distinct names with a cap of 10: exactly 10 stored, distinct created_at, all listed the same everywhere", async () => {
    const bucket = await rgw.newBucket("cap-race");
    const stores = [await openStore(bucket, "p", 10), await openStore(bucket, "p", 10), await openStore(bucket, "p", 10)];
    const outcomes = await Promise.all(
      Array.from({ length: 90 }, (_, index) => stores[index % 3]!.saveAudio(audioInput(`v${index}`)).then((voice) => ({ voice }), (error: unknown) => ({ error }))),
    );
    const saved = outcomes.flatMap((outcome) => ("voice" in outcome ? [outcome.voice] : []));
    const refused = outcomes.flatMap((outcome) => ("error" in outcome ? [outcome.error] : []));
    expect(saved).toHaveLength(10);
    expect(refused.every((error) => error instanceof ApiError && error.status === 400)).toBe(true);
    expect(new Set(saved.map((voice) => voice.created_at)).size).toBe(10);
    for (const store of stores) await store.rescan();
    const listings = stores.map((store) => store.list());
    expect(listings[0]!.map((voice) => voice.name).sort()).toEqual(saved.map((voice) => voice.name).sort());
    expect(listings[1]).toEqual(listings[0]!);
    expect(listings[2]).toEqual(listings[0]!);
    // Listed oldest first, created_at strictly increasing.
    const createdAt = listings[0]!.map((voice) => voice.created_at);
    expect(createdAt).toEqual([...createdAt].sort((x, y) => x - y));
    expect(await objectKeys(bucket, "p/voices/")).toHaveLength(10);
  });
});

describe("the manifest and the sweep", () => {
  test("a manifest that is not a voice manifest stops the start with the reason; a running store keeps serving what it read and refuses changes with a 503", async () => {
    const bucket = await rgw.newBucket("bad-manifest");
    const store = await openStore(bucket);
    await store.saveAudio(audioInput("Eve"));
    await bucket.put("voices/manifest.json", JSON.stringify({ format: "voxedge-voices-1", voices: { eve: { voice: { name: "Eve" } } } }));

    await store.rescan();
    expect(store.list().map((voice) => voice.name)).toEqual(["Eve"]);
    const refusal = await refusalOf(store.saveAudio(audioInput("Fay")));
    expect((refusal as ApiError).status).toBe(503);
    expect((refusal as ApiError).message).toContain("manifest in the bucket is not valid");

    const startRefusal = await refusalOf(openStore(bucket));
    expect(startRefusal).toBeInstanceOf(VoiceStoreBucketError);
    expect((startRefusal as Error).message).toContain("voices/manifest.json is not a voice manifest");
  });

  test("the sweep deletes bodies no voice names once they are older than the grace, and never a named one", async () => {
    const bucket = await rgw.newBucket("sweep");
    const store = await openStore(bucket);
    await store.saveAudio(audioInput("Gil"));
    const named = await objectKeys(bucket, "voices/voices/");
    const orphan = `voices/voices/${"a".repeat(64)}.safetensors`;
    await bucket.put(orphan, new Uint8Array([1, 2, 3]));
    // Young: a save that has written its body and not yet swapped the manifest may own it.
    expect(await store.sweepOrphans(60_000)).toBe(0);
    expect(await objectKeys(bucket, "voices/voices/")).toEqual([...named, orphan].sort());
    // The bucket's clock (the Date header) has whole seconds and LastModified has milliseconds: a second
    // later the orphan is older than a grace of 0 by either.
    await Bun.sleep(1_100);
    expect(await store.sweepOrphans(0)).toBe(1);
    expect(await objectKeys(bucket, "voices/voices/")).toEqual(named);
    expect((await store.loadAudio("gil"))?.samples.length).toBe(4800);
  });
});

describe("start-up", () => {
  test("a bucket that cannot be reached stops the start with the endpoint named", async () => {
    const unreachable = new S3Bucket({ ...rgw.settings(), endpoint: "http://127.0.0.1:9" }, "nowhere");
    const refusal = await refusalOf(S3VoiceStore.open({ bucket: unreachable, prefix: "voices", maxVoices: 10, logger: silentLogger }));
    expect(refusal).toBeInstanceOf(VoiceStoreBucketError);
    expect((refusal as Error).message).toContain("http://127.0.0.1:9/nowhere");
  });

  test("wrong credentials stop the start with the server's refusal", async () => {
    const bucket = await rgw.newBucket("creds");
    const wrong = new S3Bucket({ ...rgw.settings(), secretAccessKey: "not-the-secret" }, bucket.bucket);
    const refusal = await refusalOf(S3VoiceStore.open({ bucket: wrong, prefix: "voices", maxVoices: 10, logger: silentLogger }));
    expect(refusal).toBeInstanceOf(VoiceStoreBucketError);
    expect((refusal as Error).message).toContain("HTTP 403");
  });

  test("a server that ignores If-None-Match: * (a mock that overwrites) is refused before anything is stored", async () => {
    const objects = new Map<string, string>();
    // Stores every PUT and answers like S3, but ignores conditional headers, as s3rver and some gateways do.
    const ignoring = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      async fetch(request) {
        const key = new URL(request.url).pathname;
        if (request.method === "PUT") {
          objects.set(key, await request.text());
          return new Response(null, { headers: { etag: `"${Bun.hash(objects.get(key)!).toString(16)}"` } });
        }
        if (request.method === "DELETE") return new Response(null, { status: objects.delete(key) ? 204 : 204 });
        return new Response("<Error><Code>NoSuchKey</Code></Error>", { status: 404 });
      },
    });
    try {
      const bucket = new S3Bucket({ ...rgw.settings(), endpoint: `http://127.0.0.1:${ignoring.port}` }, "mock-bucket");
      const refusal = await refusalOf(S3VoiceStore.open({ bucket, prefix: "voices", maxVoices: 10, logger: silentLogger }));
      expect(refusal).toBeInstanceOf(VoiceStoreBucketError);
      expect((refusal as Error).message).toContain("ignores If-None-Match: *");
      expect([...objects.keys()]).toEqual([]);
    } finally {
      ignoring.stop(true);
    }
  });
});
