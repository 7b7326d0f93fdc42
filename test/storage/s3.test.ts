/**
 * The S3 client (src/storage/s3.ts): its settings and URLs, then every operation against a real Ceph RGW
 * (test/support/rgw.ts), conditional writes and their races included, on Bun and on Deno.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { createServer } from "node:net";
import { isS3Url, parseS3Url, S3Bucket, S3ConfigError, S3Error, s3SettingsFromEnv } from "../../src/storage/s3.ts";
import { sharedRgw, type Rgw } from "../support/rgw.ts";
import { DENO, REPO_ROOT } from "../support/server-process.ts";

/** Sizes and clocks from a server on this machine: anything further off than this is a wrong value. */
const CLOCK_SLACK_MS = 60_000;

const bare = (etag: string) => etag.replaceAll('"', "");

/** A loopback port nothing listens on: handed out by the kernel, then closed again. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe("parseS3Url", () => {
  test("bucket alone, bucket with a prefix (slashes trimmed), dots and hyphens", () => {
    expect(isS3Url("s3://voices")).toBe(true);
    expect(isS3Url("https://voices")).toBe(false);
    expect(parseS3Url("s3://voices")).toEqual({ bucket: "voices", prefix: "" });
    expect(parseS3Url("s3://voices/")).toEqual({ bucket: "voices", prefix: "" });
    expect(parseS3Url("s3://my.voices-1/team/a/")).toEqual({ bucket: "my.voices-1", prefix: "team/a" });
    expect(parseS3Url("s3://abc//deep//")).toEqual({ bucket: "abc", prefix: "deep" });
  });

  test("anything else is an S3ConfigError naming the bad part", () => {
    expect(() => parseS3Url("https://voices/x")).toThrow(S3ConfigError);
    expect(() => parseS3Url("https://voices/x")).toThrow("not an s3:// URL");
    for (const bucket of ["No_Such", "ab", "-voices", "voices-", "Voices", "a".repeat(64), ""]) {
      expect(() => parseS3Url(`s3://${bucket}/x`)).toThrow(S3ConfigError);
      expect(() => parseS3Url(`s3://${bucket}/x`)).toThrow(`'${bucket}' in s3://${bucket}/x is not a valid bucket name`);
    }
    expect(parseS3Url(`s3://${"a".repeat(63)}`).bucket).toHaveLength(63);
  });
});

describe("s3SettingsFromEnv", () => {
  const keys = { AWS_ACCESS_KEY_ID: "AKID", AWS_SECRET_ACCESS_KEY: "secret" };

  test("without an endpoint: AWS, us-east-1 unless a region is set", () => {
    expect(s3SettingsFromEnv(keys)).toEqual({ accessKeyId: "AKID", secretAccessKey: "secret", region: "us-east-1" });
    expect(s3SettingsFromEnv({ ...keys, AWS_DEFAULT_REGION: "eu-west-3" }).region).toBe("eu-west-3");
    expect(s3SettingsFromEnv({ ...keys, AWS_REGION: "eu-north-1", AWS_DEFAULT_REGION: "eu-west-3" }).region).toBe("eu-north-1");
  });

  test("a custom endpoint, trailing slashes dropped; AWS_ENDPOINT_URL_S3 before AWS_ENDPOINT_URL; empty means unset", () => {
    expect(s3SettingsFromEnv({ ...keys, AWS_ENDPOINT_URL: "http://127.0.0.1:7480//" }).endpoint).toBe("http://127.0.0.1:7480");
    expect(s3SettingsFromEnv({ ...keys, AWS_ENDPOINT_URL: "http://general:1", AWS_ENDPOINT_URL_S3: "https://s3-only:2/" }).endpoint).toBe("https://s3-only:2");
    expect(s3SettingsFromEnv({ ...keys, AWS_ENDPOINT_URL_S3: "" })).not.toHaveProperty("endpoint");
  });

  test("the session token is passed through, and absent when unset", () => {
    expect(s3SettingsFromEnv({ ...keys, AWS_SESSION_TOKEN: "token-1" }).sessionToken).toBe("token-1");
    expect(s3SettingsFromEnv(keys)).not.toHaveProperty("sessionToken");
  });

  test("missing credentials or a bad endpoint: S3ConfigError saying what to set", () => {
    for (const env of [{}, { AWS_ACCESS_KEY_ID: "AKID" }, { AWS_SECRET_ACCESS_KEY: "secret" }, { AWS_ACCESS_KEY_ID: "", AWS_SECRET_ACCESS_KEY: "secret" }]) {
      expect(() => s3SettingsFromEnv(env)).toThrow(S3ConfigError);
      expect(() => s3SettingsFromEnv(env)).toThrow("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
    }
    expect(() => s3SettingsFromEnv({ ...keys, AWS_ENDPOINT_URL_S3: "localhost:7480" })).toThrow(S3ConfigError);
    expect(() => s3SettingsFromEnv({ ...keys, AWS_ENDPOINT_URL_S3: "not a url" })).toThrow("must be an http(s) URL, not 'not a url'");
    expect(() => s3SettingsFromEnv({ ...keys, AWS_ENDPOINT_URL: "ftp://files:21" })).toThrow("the S3 endpoint must be http(s), not 'ftp://files:21'");
  });
});

describe("S3Bucket URLs", () => {
  const settings = { accessKeyId: "AKID", secretAccessKey: "secret", region: "eu-west-3" };

  test("path-style on a custom endpoint, each key segment encoded", () => {
    const bucket = new S3Bucket({ ...settings, endpoint: "http://127.0.0.1:7480" }, "voices");
    expect(bucket.url("a b/c+d&e.json")).toBe("http://127.0.0.1:7480/voices/a%20b/c%2Bd%26e.json");
    expect(bucket.describe()).toBe("http://127.0.0.1:7480/voices");
  });

  test("virtual-hosted on AWS", () => {
    const bucket = new S3Bucket(settings, "voices");
    expect(bucket.url("team/index.json")).toBe("https://voices.s3.eu-west-3.amazonaws.com/team/index.json");
    expect(bucket.describe()).toBe("s3://voices (eu-west-3)");
  });
});

describe("against Ceph RGW", () => {
  let rgw: Rgw;
  let bucket: S3Bucket;

  beforeAll(async () => {
    rgw = await sharedRgw();
    bucket = await rgw.newBucket("s3-client");
  }, 120_000);

  test("the support's settings and environment agree", () => {
    expect(rgw.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(s3SettingsFromEnv(rgw.env())).toEqual(rgw.settings());
    expect(bucket.bucket).toMatch(/^s3-client-[a-z0-9-]+$/);
    expect(() => parseS3Url(`s3://${bucket.bucket}/x`)).not.toThrow();
  });

  test("GET of a key never written: missing", async () => {
    expect(await bucket.get("never/written")).toBe("missing");
  });

  test("PUT then GET: the same bytes and ETag; a string body is stored as UTF-8", async () => {
    const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
    const written = await bucket.put("round/bytes.bin", bytes);
    if (written === "conflict") throw new Error("unconditional PUT refused");
    expect(written.etag).toMatch(/^"[0-9a-f]{32}"$/);
    const read = await bucket.get("round/bytes.bin");
    if (typeof read === "string") throw new Error(`GET: ${read}`);
    expect(read.body).toEqual(bytes);
    expect(read.etag).toBe(written.etag);

    await bucket.put("round/text.json", '{"name":"Zoë"}', undefined, "application/json");
    const text = await bucket.get("round/text.json");
    if (typeof text === "string") throw new Error(`GET: ${text}`);
    expect(new TextDecoder().decode(text.body)).toBe('{"name":"Zoë"}');
  });

  test("GET with If-None-Match: unchanged for the current ETag (quoted or bare), the object for a stale one", async () => {
    const first = await bucket.put("fresh/object", "one");
    if (first === "conflict") throw new Error("unconditional PUT refused");
    expect(await bucket.get("fresh/object", { ifNoneMatch: first.etag })).toBe("unchanged");
    expect(await bucket.get("fresh/object", { ifNoneMatch: bare(first.etag) })).toBe("unchanged");
    await bucket.put("fresh/object", "two");
    const changed = await bucket.get("fresh/object", { ifNoneMatch: first.etag });
    if (typeof changed === "string") throw new Error(`GET: ${changed}`);
    expect(new TextDecoder().decode(changed.body)).toBe("two");
  });

  test("create-only PUT: created once, then conflict, and the first body stays", async () => {
    expect(await bucket.put("create/once", "first", { ifNoneMatch: "*" })).not.toBe("conflict");
    expect(await bucket.put("create/once", "second", { ifNoneMatch: "*" })).toBe("conflict");
    const read = await bucket.get("create/once");
    if (typeof read === "string") throw new Error(`GET: ${read}`);
    expect(new TextDecoder().decode(read.body)).toBe("first");
  });

  test("16 concurrent create-only PUTs of one key: exactly one wins, and its body is what is stored", async () => {
    const results = await Promise.all(Array.from({ length: 16 }, (_, i) => bucket.put("create/race", `writer-${i}`, { ifNoneMatch: "*" })));
    const winners = results.flatMap((result, i) => (result === "conflict" ? [] : [i]));
    expect(winners).toHaveLength(1);
    const read = await bucket.get("create/race");
    if (typeof read === "string") throw new Error(`GET: ${read}`);
    expect(new TextDecoder().decode(read.body)).toBe(`writer-${winners[0]}`);
  });

  test("compare-and-swap with If-Match: the bare ETag swaps, a stale one or a missing key is a conflict", async () => {
    const first = await bucket.put("cas/index", "v1");
    if (first === "conflict") throw new Error("unconditional PUT refused");
    // RGW (pacific) compares If-Match with the bare hex ETag only: the quoted form it sends itself, which
    // RFC 7232 prescribes, never matches (412). Measured here so a server that changes this is noticed.
    expect(await bucket.put("cas/index", "quoted", { ifMatch: first.etag })).toBe("conflict");
    const second = await bucket.put("cas/index", "v2", { ifMatch: bare(first.etag) });
    if (second === "conflict") throw new Error("If-Match with the current bare ETag refused");
    expect(second.etag).not.toBe(first.etag);
    expect(await bucket.put("cas/index", "stale", { ifMatch: bare(first.etag) })).toBe("conflict");
    expect(await bucket.put("cas/never-written", "x", { ifMatch: bare(first.etag) })).toBe("conflict");
    expect(await bucket.get("cas/never-written")).toBe("missing");
    const read = await bucket.get("cas/index");
    if (typeof read === "string") throw new Error(`GET: ${read}`);
    expect(new TextDecoder().decode(read.body)).toBe("v2");
    expect(read.etag).toBe(second.etag);
  });

  test("DELETE: then missing; deleting a missing key is no error", async () => {
    await bucket.put("gone/soon", "x");
    await bucket.delete("gone/soon");
    expect(await bucket.get("gone/soon")).toBe("missing");
    await bucket.delete("gone/soon");
    await bucket.delete("gone/never-was");
  });

  test("list: every object under the prefix with its size and time, nothing from other prefixes, the server's clock", async () => {
    const listing = await rgw.newBucket("listing");
    const keys = Array.from({ length: 30 }, (_, i) => `voices/${String(i).padStart(2, "0")}.json`);
    const before = Date.now();
    await Promise.all(keys.map((key, i) => listing.put(key, "x".repeat(i))));
    await Promise.all(["voicesx/outside", "other/voices/also-outside", "voices"].map((key) => listing.put(key, "no")));

    const { objects, serverTime } = await listing.list("voices/");
    expect(objects.map((object) => object.key)).toEqual(keys);
    expect(objects.map((object) => object.sizeBytes)).toEqual(keys.map((_, i) => i));
    for (const object of objects) {
      expect(object.lastModified.getTime()).toBeGreaterThan(before - CLOCK_SLACK_MS);
      expect(object.lastModified.getTime()).toBeLessThan(Date.now() + CLOCK_SLACK_MS);
    }
    expect(Math.abs(serverTime.getTime() - Date.now())).toBeLessThan(CLOCK_SLACK_MS);
    expect((await listing.list("nothing-here/")).objects).toEqual([]);
    expect((await listing.list("")).objects).toHaveLength(33);
  });

  test("keys that look like numbers or carry spaces and reserved characters survive PUT, GET and list unchanged", async () => {
    const odd = await rgw.newBucket("odd-keys");
    const keys = ["007", "1e3", " spaced ", "true", "a(b)!*'c", "dir/a b+c&d<e>.txt", "ü/é", "%41"];
    for (const key of keys) {
      expect(await odd.put(key, key)).not.toBe("conflict");
      const read = await odd.get(key);
      if (typeof read === "string") throw new Error(`GET ${key}: ${read}`);
      expect(new TextDecoder().decode(read.body)).toBe(key);
    }
    const listed = (await odd.list("")).objects.map((object) => object.key);
    expect(listed.toSorted()).toEqual(keys.toSorted());
  });

  test("wrong credentials: S3Error with status 403 and S3's code", async () => {
    const wrongSecret = new S3Bucket({ ...rgw.settings(), secretAccessKey: "not-the-secret" }, bucket.bucket);
    const error = await wrongSecret.get("anything").catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(S3Error);
    expect((error as S3Error).status).toBe(403);
    expect((error as S3Error).code).toBe("SignatureDoesNotMatch");
    const unknownKey = new S3Bucket({ ...rgw.settings(), accessKeyId: "NOSUCHKEY" }, bucket.bucket);
    const rejected = await unknownKey.put("anything", "x").catch((caught: unknown) => caught);
    expect(rejected).toBeInstanceOf(S3Error);
    expect((rejected as S3Error).status).toBe(403);
    expect((rejected as S3Error).code).toBe("InvalidAccessKeyId");
  });

  test("a bucket that does not exist: S3Error 404 NoSuchBucket", async () => {
    const nowhere = new S3Bucket(rgw.settings(), "no-such-bucket-here");
    const error = await nowhere.put("x", "x").catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(S3Error);
    expect((error as S3Error).status).toBe(404);
    expect((error as S3Error).code).toBe("NoSuchBucket");
  });

  test("nothing listening: S3Error without a status, naming the endpoint", async () => {
    const endpoint = `http://127.0.0.1:${await closedPort()}`;
    const unreachable = new S3Bucket({ ...rgw.settings(), endpoint }, "voices");
    const error = await unreachable.get("index.json").catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(S3Error);
    expect((error as S3Error).status).toBeUndefined();
    expect((error as S3Error).message).toContain(`${endpoint}/voices`);
  });

  test("a caller's abort is rethrown as the caller's reason, not as an S3Error", async () => {
    const controller = new AbortController();
    const reason = new Error("caller gave up");
    controller.abort(reason);
    expect(await bucket.get("round/bytes.bin", { signal: controller.signal }).catch((caught: unknown) => caught)).toBe(reason);
  });

  test("creating a bucket that is already ours is fine", async () => {
    await bucket.createBucket();
    expect(await bucket.get("create/once")).not.toBe("missing");
  });

  test("under Deno: create-only PUT twice (created, then conflict) and a compare-and-swap with the bare ETag", async () => {
    const checked = await rgw.newBucket("deno-check");
    const result = spawnSync(DENO, ["run", "--allow-env", "--allow-net", "--allow-read", "test/storage/deno/s3-check.ts"], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...rgw.env(), S3_CHECK_BUCKET: checked.bucket },
      timeout: 60_000,
    });
    if (result.status !== 0) throw new Error(`deno exited with ${result.status}: ${result.stderr.toString().slice(-2000)}`);
    const report = JSON.parse(result.stdout.toString().trim().split("\n").at(-1)!);
    expect(report).toEqual({ runtime: "deno", created: "created", createdAgain: "conflict", swapped: "swapped", staleSwap: "conflict", body: "swapped", etagMatches: true });
  }, 60_000);
});
