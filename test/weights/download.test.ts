import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CatalogError, POCKET_CATALOG, resolveBundle, resolveUrl, type CatalogEntry } from "../../src/weights/catalog.ts";
import { COMPLETE_MARKER_FILE, findCachedBundle, PullError, pullBundle, readBundleManifest, type PullOptions, type PullProgress } from "../../src/weights/download.ts";
import {
  pocketTinyCatalogEntry,
  readTinyFixture,
  sha256Hex,
  startPocketTinyHub,
  TINY_FILE_NAMES,
  TINY_REVISION,
  tinyRepoPath,
  type HubServer,
  type TinyFileName,
} from "../support/hub-server.ts";
import type { S3Bucket } from "../../src/storage/s3.ts";
import { sharedRgw, type Rgw } from "../support/rgw.ts";

let hub: HubServer;
let cacheDir: string;
const entry = pocketTinyCatalogEntry();
const bundleDir = () => join(cacheDir, "pocket-tiny-english-fp32", TINY_REVISION);

beforeAll(() => {
  hub = startPocketTinyHub();
});
afterAll(() => hub.stop());
beforeEach(() => {
  cacheDir = mkdtempSync(join(tmpdir(), "voxedge-pull-"));
  hub.requests.length = 0;
});
afterEach(() => rmSync(cacheDir, { recursive: true, force: true }));

function pull(overrides: Partial<PullOptions> = {}): Promise<string> {
  return pullBundle({ name: "pocket-tiny", catalog: [entry], hubUrl: hub.url, cacheDir, ...overrides });
}

const gets = (name: TinyFileName) => hub.requests.filter((request) => request.method === "GET" && request.file === tinyRepoPath(name));
/** The GETs that carried bytes: the CDN URL for LFS files, the resolve URL itself for bundle.json. */
const byteGets = (name: TinyFileName) => gets(name).filter((request) => request.status === 200 || request.status === 206);

function expectIdenticalToFixture(dir: string) {
  for (const name of TINY_FILE_NAMES) {
    expect(sha256Hex(new Uint8Array(readFileSync(join(dir, name))))).toBe(sha256Hex(readTinyFixture(name)));
  }
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected the pull to fail");
}

describe("pullBundle from a local hub", () => {
  test("pulls every file byte-identical, with a complete.json and progress to 100%", async () => {
    const events: PullProgress[] = [];
    const dir = await pull({ onProgress: (progress) => events.push(progress) });

    expect(dir).toBe(bundleDir());
    expectIdenticalToFixture(dir);
    expect(readdirSync(dir).sort()).toEqual([...TINY_FILE_NAMES, COMPLETE_MARKER_FILE].sort());

    const manifest = await readBundleManifest(dir);
    expect(manifest?.bundle).toBe("pocket-tiny-english-fp32");
    expect(manifest?.revision).toBe(TINY_REVISION);
    expect(manifest?.files.map((file) => file.name)).toEqual([...TINY_FILE_NAMES]);
    for (const file of manifest?.files ?? []) expect(file.sha256).toBe(sha256Hex(readTinyFixture(file.name as TinyFileName)));

    const totalBytes = TINY_FILE_NAMES.reduce((sum, name) => sum + readTinyFixture(name).byteLength, 0);
    const last = events.at(-1);
    expect(last).toMatchObject({ state: "verified", fileIndex: TINY_FILE_NAMES.length - 1, bytes: totalBytes, totalBytes });
    const verified = events.filter((event) => event.state === "verified");
    expect(verified.map((event) => event.file)).toEqual([...TINY_FILE_NAMES]);
    for (const event of verified) expect(event.fileBytes).toBe(event.fileTotalBytes);
    const overall = events.map((event) => event.bytes);
    expect(overall).toEqual([...overall].sort((a, b) => a - b));
    // Unpinned files were checked against the hub: one HEAD each, none for the fully pinned tokenizer.
    expect(hub.requests.filter((request) => request.method === "HEAD" && request.file === tinyRepoPath("tokenizer.model"))).toHaveLength(0);
    expect(hub.requests.filter((request) => request.method === "HEAD" && request.file === tinyRepoPath("flow_lm_main.onnx"))).toHaveLength(1);
  });

  test("a dropped connection is resumed with a Range request and completes", async () => {
    const cutAt = 100_000;
    hub.failOnce(tinyRepoPath("flow_lm_main.onnx"), cutAt);
    const dir = await pull();

    expect(byteGets("flow_lm_main.onnx").map((request) => request.range)).toEqual([undefined, `bytes=${cutAt}-`]);
    expect(byteGets("flow_lm_main.onnx")[1]?.status).toBe(206);
    expectIdenticalToFixture(dir);
    expect(existsSync(join(dir, COMPLETE_MARKER_FILE))).toBe(true);
  });

  test("a stalled transfer is dropped after the idle timeout and resumed", async () => {
    const stallAt = 50_000;
    hub.stallOnce(tinyRepoPath("mimi_decoder.onnx"), stallAt);
    const dir = await pull({ idleTimeoutMs: 300 });

    expect(byteGets("mimi_decoder.onnx").map((request) => request.range)).toEqual([undefined, `bytes=${stallAt}-`]);
    expectIdenticalToFixture(dir);
  });

  test("a file kept in git (git blob ETag) resumes too", async () => {
    hub.failOnce(tinyRepoPath("bundle.json"), 4096);
    const dir = await pull();
    expect(byteGets("bundle.json").map((request) => request.range)).toEqual([undefined, "bytes=4096-"]);
    expectIdenticalToFixture(dir);
  });

  test("a resume on a server that ignores Range restarts the file from byte 0", async () => {
    hub.failOnce(tinyRepoPath("text_conditioner.onnx"), 10_000);
    hub.ignoreRanges(true);
    try {
      const dir = await pull();
      expect(byteGets("text_conditioner.onnx").map((request) => request.status)).toEqual([200, 200]);
      expectIdenticalToFixture(dir);
    } finally {
      hub.ignoreRanges(false);
    }
  });

  test("a corrupted file is rejected by name, deleted, and fetched from scratch on retry", async () => {
    hub.corrupt(tinyRepoPath("mimi_decoder.onnx"), true);
    let error: Error;
    try {
      error = await rejection(pull());
    } finally {
      hub.corrupt(tinyRepoPath("mimi_decoder.onnx"), false);
    }
    expect(error).toBeInstanceOf(PullError);
    expect(error.message).toContain("mimi_decoder.onnx");
    expect(error.message).toContain("sha256");
    const dir = bundleDir();
    expect(existsSync(join(dir, "mimi_decoder.onnx"))).toBe(false);
    expect(existsSync(join(dir, "mimi_decoder.onnx.part"))).toBe(false);
    expect(existsSync(join(dir, COMPLETE_MARKER_FILE))).toBe(false);
    expect(await findCachedBundle(cacheDir)).toBeUndefined();

    hub.requests.length = 0;
    await pull();
    expect(byteGets("mimi_decoder.onnx").map((request) => request.range)).toEqual([undefined]);
    for (const name of TINY_FILE_NAMES.filter((name) => name !== "mimi_decoder.onnx")) expect(gets(name)).toHaveLength(0);
    expectIdenticalToFixture(dir);
  });

  test("a corrupted file kept in git fails its git blob check", async () => {
    hub.corrupt(tinyRepoPath("bundle.json"), true);
    try {
      const error = await rejection(pull());
      expect(error.message).toContain("bundle.json");
      expect(error.message).toContain("git blob sha1");
    } finally {
      hub.corrupt(tinyRepoPath("bundle.json"), false);
    }
    expect(existsSync(join(bundleDir(), "bundle.json"))).toBe(false);
  });

  test("a pinned checksum that the served bytes do not match fails the file", async () => {
    const wrongPin = pocketTinyCatalogEntry({ "flow_lm_flow.onnx": { sizeBytes: readTinyFixture("flow_lm_flow.onnx").byteLength, sha256: "0".repeat(64) } });
    const error = await rejection(pull({ catalog: [wrongPin] }));
    expect(error.message).toContain("flow_lm_flow.onnx");
    expect(error.message).toContain("pinned in the catalog");
    expect(existsSync(join(bundleDir(), "flow_lm_flow.onnx"))).toBe(false);
  });

  test("a fully pinned file whose served length differs fails at once, without retrying", async () => {
    const tokenizer = readTinyFixture("tokenizer.model");
    const wrongSize = pocketTinyCatalogEntry({ "tokenizer.model": { sizeBytes: tokenizer.byteLength + 5, sha256: sha256Hex(tokenizer) } });
    const error = await rejection(pull({ catalog: [wrongSize] }));
    expect(error).toBeInstanceOf(PullError);
    expect(error.message).toContain(`tokenizer.model (onnx/tiny/tokenizer.model) failed verification: the hub serves ${tokenizer.byteLength} bytes`);
    expect(byteGets("tokenizer.model")).toHaveLength(1);
    expect(existsSync(join(bundleDir(), "tokenizer.model.part"))).toBe(false);
  });

  test("a pin that disagrees with the hub's metadata stops the pull before any download", async () => {
    const wrongSize = pocketTinyCatalogEntry({ "mimi_encoder.onnx": { sizeBytes: 12345 } });
    const error = await rejection(pull({ catalog: [wrongSize] }));
    expect(error.message).toContain("mimi_encoder.onnx");
    expect(error.message).toContain("the hub reports");
    expect(hub.requests.filter((request) => request.method === "GET")).toHaveLength(0);
  });

  test("a file missing on the hub fails with a 404 naming it", async () => {
    const english = entry.languages.english?.fp32 ?? [];
    const withExtra: CatalogEntry = { ...entry, languages: { english: { fp32: [...english, { path: "onnx/tiny/vocab.json" }] } } };
    const error = await rejection(pull({ catalog: [withExtra] }));
    expect(error).toBeInstanceOf(PullError);
    expect(error.message).toContain("vocab.json");
    expect(error.message).toContain("404");
  });

  test("a re-pull of a complete bundle verifies locally and sends no request", async () => {
    await pull();
    hub.requests.length = 0;
    const events: PullProgress[] = [];
    const dir = await pull({ onProgress: (progress) => events.push(progress) });
    expect(hub.requests).toHaveLength(0);
    expect(events.filter((event) => event.state === "cached").map((event) => event.file)).toEqual([...TINY_FILE_NAMES]);
    expectIdenticalToFixture(dir);
  });

  test("a re-pull of a partial bundle GETs only the missing file", async () => {
    const dir = await pull();
    unlinkSync(join(dir, COMPLETE_MARKER_FILE));
    unlinkSync(join(dir, "flow_lm_flow.onnx"));
    hub.requests.length = 0;
    await pull();
    for (const name of TINY_FILE_NAMES) expect(gets(name).length).toBe(name === "flow_lm_flow.onnx" ? 2 : 0); // resolve redirect + CDN
    expect(existsSync(join(dir, COMPLETE_MARKER_FILE))).toBe(true);
    expectIdenticalToFixture(dir);
  });

  test("a file damaged after a complete pull is found and downloaded again", async () => {
    const dir = await pull();
    const damaged = join(dir, "flow_lm_main.onnx");
    const bytes = readFileSync(damaged);
    bytes[1000] = (bytes[1000] ?? 0) ^ 1;
    writeFileSync(damaged, bytes);
    hub.requests.length = 0;
    await pull();
    expect(byteGets("flow_lm_main.onnx")).toHaveLength(1);
    expect(byteGets("mimi_decoder.onnx")).toHaveLength(0);
    expectIdenticalToFixture(dir);
  });

  test("an abort mid-download leaves only the .part file, and the next pull resumes it", async () => {
    const stallAt = 1000;
    hub.stallOnce(tinyRepoPath("bundle.json"), stallAt);
    const controller = new AbortController();
    const error = await rejection(
      pull({
        signal: controller.signal,
        onProgress: (progress) => {
          if (progress.file === "bundle.json" && progress.fileBytes >= stallAt) controller.abort();
        },
      }),
    );
    expect(error.name).toBe("AbortError");
    const dir = bundleDir();
    expect(readdirSync(dir)).toEqual(["bundle.json.part"]);
    expect(statSync(join(dir, "bundle.json.part")).size).toBe(stallAt);
    expect(await findCachedBundle(cacheDir)).toBeUndefined();

    hub.requests.length = 0;
    await pull();
    expect(byteGets("bundle.json").map((request) => request.range)).toEqual([`bytes=${stallAt}-`]);
    expectIdenticalToFixture(dir);
  });

  test("an already aborted signal does nothing", async () => {
    const error = await rejection(pull({ signal: AbortSignal.abort() }));
    expect(error.name).toBe("AbortError");
    expect(hub.requests).toHaveLength(0);
  });

  test("a .part longer than the file is discarded and the file fetched whole", async () => {
    const dir = bundleDir();
    await pull();
    unlinkSync(join(dir, COMPLETE_MARKER_FILE));
    unlinkSync(join(dir, "flow_lm_flow.onnx"));
    writeFileSync(join(dir, "flow_lm_flow.onnx.part"), new Uint8Array(readTinyFixture("flow_lm_flow.onnx").byteLength + 10));
    hub.requests.length = 0;
    await pull();
    expect(byteGets("flow_lm_flow.onnx").map((request) => request.range)).toEqual([undefined]);
    expectIdenticalToFixture(dir);
  });
});

describe("findCachedBundle", () => {
  test("finds complete bundles only, by bundle or catalog name", async () => {
    expect(await findCachedBundle(cacheDir)).toBeUndefined();
    expect(await findCachedBundle(join(cacheDir, "does-not-exist"))).toBeUndefined();
    const dir = await pull();
    expect(await findCachedBundle(cacheDir)).toBe(dir);
    expect(await findCachedBundle(cacheDir, "pocket-tiny")).toBe(dir);
    expect(await findCachedBundle(cacheDir, "pocket-tiny-english-fp32")).toBe(dir);
    expect(await findCachedBundle(cacheDir, "pocket-tts")).toBeUndefined();

    truncateSync(join(dir, "mimi_encoder.onnx"), 10);
    expect(await findCachedBundle(cacheDir)).toBeUndefined();
  });

  test("ignores a folder whose complete.json is missing or malformed", async () => {
    const dir = await pull();
    writeFileSync(join(dir, COMPLETE_MARKER_FILE), "{ not json");
    expect(await findCachedBundle(cacheDir)).toBeUndefined();
    writeFileSync(join(dir, COMPLETE_MARKER_FILE), JSON.stringify({ format: "voxedge-bundle-1", files: [{ name: "../escape", repoPath: "x", sizeBytes: 0, sha256: "0".repeat(64) }] }));
    expect(await findCachedBundle(cacheDir)).toBeUndefined();
  });

  test("prefers the most recently completed of several bundles", async () => {
    const first = await pull();
    const manifest = await readBundleManifest(first);
    if (!manifest) throw new Error("no manifest");
    const otherRevision = "1".repeat(40);
    const second = join(cacheDir, "pocket-tiny-english-fp32", otherRevision);
    cpSync(first, second, { recursive: true });
    writeFileSync(join(first, COMPLETE_MARKER_FILE), JSON.stringify({ ...manifest, completedAt: "2000-01-01T00:00:00.000Z" }));
    writeFileSync(join(second, COMPLETE_MARKER_FILE), JSON.stringify({ ...manifest, revision: otherRevision, completedAt: "2030-01-01T00:00:00.000Z" }));
    expect(await findCachedBundle(cacheDir)).toBe(second);
  });
});

describe("the Pocket catalog", () => {
  test("defaults to the ungated KevinAHM English bundle in int8, with the spec's pinned sizes", () => {
    const bundle = resolveBundle({});
    expect(bundle).toMatchObject({ id: "pocket-tts-english-int8", repo: "KevinAHM/pocket-tts-onnx", revision: "58a6d00cf13d239b6748cb0769f35c580a8f606c", precision: "int8" });
    const sizes = Object.fromEntries(bundle.files.map((file) => [file.localName, file.sizeBytes]));
    expect(sizes).toEqual({
      "bundle.json": 24_381,
      "tokenizer.model": 59_339,
      "bos_before_voice.npy": 4_224,
      "flow_lm_main_int8.onnx": 76_341_079,
      "flow_lm_flow_int8.onnx": 9_962_530,
      "mimi_decoder_int8.onnx": 22_684_077,
      "mimi_encoder.onnx": 39_768_446,
      "text_conditioner.onnx": 16_388_344,
      LICENSE: 18_655,
    });
    expect(bundle.files.find((file) => file.localName === "LICENSE")?.path).toBe("onnx/LICENSE");
    expect(bundle.files.find((file) => file.localName === "flow_lm_main_int8.onnx")?.path).toBe("onnx/english_2026-04/flow_lm_main_int8.onnx");
  });

  test("fp32 swaps the three quantized graphs for their fp32 originals", () => {
    const names = resolveBundle({ precision: "fp32" }).files.map((file) => file.localName);
    expect(names).toEqual(["bundle.json", "tokenizer.model", "bos_before_voice.npy", "flow_lm_main.onnx", "flow_lm_flow.onnx", "mimi_decoder.onnx", "mimi_encoder.onnx", "text_conditioner.onnx", "LICENSE"]);
    expect(resolveBundle({ precision: "fp32" }).files.find((file) => file.localName === "flow_lm_main.onnx")?.sizeBytes).toBeUndefined();
  });

  test("offers the spec's other languages under onnx/<language>/", () => {
    expect(Object.keys(POCKET_CATALOG[0]?.languages ?? {}).sort()).toEqual(
      ["english", "french_24l", "german", "german_24l", "italian", "italian_24l", "portuguese", "portuguese_24l", "spanish", "spanish_24l"].sort(),
    );
    const german = resolveBundle({ language: "german_24l" });
    expect(german.id).toBe("pocket-tts-german_24l-int8");
    expect(german.files.map((file) => file.path)).toContain("onnx/german_24l/flow_lm_main_int8.onnx");
    expect(german.files.every((file) => file.sizeBytes === undefined)).toBe(true);
  });

  test("unknown names, languages and precisions list the choices", () => {
    expect(() => resolveBundle({ name: "nope" })).toThrow(/known bundles: pocket-tts/);
    expect(() => resolveBundle({ language: "klingon" })).toThrow(/choose one of: english, french_24l/);
    expect(() => resolveBundle({ name: "pocket-tiny", precision: "int8" }, [entry])).toThrow(CatalogError);
    expect(() => resolveBundle({ name: "pocket-tiny", precision: "int8" }, [entry])).toThrow(/no int8 variant; choose one of: fp32/);
  });

  test("resolve URLs follow the hub layout", () => {
    expect(resolveUrl("https://huggingface.co/", "KevinAHM/pocket-tts-onnx", "58a6d00", "onnx/english_2026-04/bundle.json")).toBe(
      "https://huggingface.co/KevinAHM/pocket-tts-onnx/resolve/58a6d00/onnx/english_2026-04/bundle.json",
    );
  });
});

describe("pullBundle from an S3 mirror of a model cache (a real Ceph RGW)", () => {
  let rgw: Rgw;
  let bucket: S3Bucket;
  let pulledDir: string;
  beforeAll(async () => {
    rgw = await sharedRgw();
    bucket = await rgw.newBucket("models");
    // The mirror is a pulled bundle's folder copied as it is, as `aws s3 sync ~/.cache/voxedge/models s3://…` makes it.
    pulledDir = await pull({ cacheDir: mkdtempSync(join(tmpdir(), "voxedge-mirror-source-")) });
    for (const name of readdirSync(pulledDir)) await bucket.put(`mirror/pocket-tiny-english-fp32/${TINY_REVISION}/${name}`, new Uint8Array(readFileSync(join(pulledDir, name))));
  }, 150_000);

  test("pulls every file byte-identical from the bucket, checked against the mirror's complete.json, without asking the hub", async () => {
    hub.requests.length = 0;
    const dir = await pull({ mirror: { bucket, prefix: "mirror" } });
    expectIdenticalToFixture(dir);
    expect(hub.requests).toEqual([]);
    expect((await readBundleManifest(dir))?.hubUrl).toBe(`s3://${bucket.bucket}/mirror`);
  });

  test("a mirrored file that does not match its sha256 fails verification and is not kept", async () => {
    const name = TINY_FILE_NAMES.find((file) => file.endsWith(".onnx")) ?? TINY_FILE_NAMES[0]!;
    const key = `tampered/pocket-tiny-english-fp32/${TINY_REVISION}/`;
    for (const file of readdirSync(pulledDir)) {
      const bytes = new Uint8Array(readFileSync(join(pulledDir, file)));
      if (file === name) bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 0xff;
      await bucket.put(`${key}${file}`, bytes);
    }
    const error = await rejection(pull({ mirror: { bucket, prefix: "tampered" } }));
    expect(error).toBeInstanceOf(PullError);
    expect(error.message).toContain("failed verification");
    expect(existsSync(join(bundleDir(), name))).toBe(false);
  });

  test("a mirror without the bundle says which object is missing", async () => {
    const error = await rejection(pull({ mirror: { bucket, prefix: "empty" } }));
    expect(error).toBeInstanceOf(PullError);
    expect(error.message).toContain(`s3://${bucket.bucket}/empty/pocket-tiny-english-fp32/${TINY_REVISION}/complete.json is missing`);
  });
});
