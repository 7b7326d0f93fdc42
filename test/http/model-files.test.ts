/**
 * GET /v1/models/{model}/files and /v1/models/{model}/files/{name}: the listing of the served model's bundle
 * folder (pulled or not), the files' bytes with ETag revalidation and single byte ranges, HEAD, the refusals,
 * the API key; and the cross-origin isolation headers of the playground. Once under Deno's own server too.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClassicModel } from "../../src/models/classic/model.ts";
import { parseByteRange } from "../../src/http/model-files.ts";
import { startTestServer, testApp } from "../support/server.ts";
import { DENO, REPO_ROOT } from "../support/server-process.ts";
import { ToneModel } from "../support/tone-model.ts";

type App = Awaited<ReturnType<typeof testApp>>["app"];

/** The tone model, lending a bundle folder as Pocket TTS does. */
class BundleAdapter extends ToneModel {
  constructor(readonly filesDirectory: string) {
    super();
  }
}

const scratch = mkdtempSync(join(tmpdir(), "voxedge-model-files-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Deterministic bytes, more than one read chunk (256 KiB) long. */
const MAIN_BYTES = Uint8Array.from({ length: 300_000 }, (_, index) => (index * 31 + 7) & 255);
const VOICE_BYTES = new TextEncoder().encode("a voice's safetensors");
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** A bundle folder as a --model path holds it: files, a voices/ folder, and what must not be listed. */
function bundleFolder(name: string): string {
  const dir = join(scratch, name);
  mkdirSync(join(dir, "voices"), { recursive: true });
  mkdirSync(join(dir, "a", "b", "c", "d"), { recursive: true });
  mkdirSync(join(dir, ".cache"));
  writeFileSync(join(dir, "flow_lm_main_int8.onnx"), MAIN_BYTES);
  writeFileSync(join(dir, "tokenizer.model"), "tokens");
  writeFileSync(join(dir, "empty.bin"), "");
  writeFileSync(join(dir, "voices", "alba.safetensors"), VOICE_BYTES);
  writeFileSync(join(dir, "voices", "my voice.safetensors"), "spaced");
  writeFileSync(join(dir, "a", "b", "c", "three-deep.bin"), "3");
  writeFileSync(join(dir, "a", "b", "c", "d", "four-deep.bin"), "4");
  writeFileSync(join(dir, ".hidden"), "dot-file");
  writeFileSync(join(dir, ".cache", "inside.bin"), "dot-folder");
  writeFileSync(join(dir, "mimi_decoder.onnx.part"), "arriving");
  writeFileSync(join(scratch, `${name}-secret.txt`), "outside the bundle");
  symlinkSync(join(scratch, `${name}-secret.txt`), join(dir, "leaves.txt"));
  symlinkSync(join(dir, "tokenizer.model"), join(dir, "tokenizer-link.model"));
  return dir;
}

const LISTED = ["a/b/c/three-deep.bin", "empty.bin", "flow_lm_main_int8.onnx", "tokenizer-link.model", "tokenizer.model", "voices/alba.safetensors", "voices/my voice.safetensors"];

let plainDir: string;
let app: App;
beforeAll(async () => {
  plainDir = bundleFolder("plain");
  ({ app } = await testApp(new BundleAdapter(plainDir)));
});

const get = (path: string, headers: Record<string, string> = {}, method = "GET") => app.request(path, { method, headers });
const MAIN = "/v1/models/tone-test/files/flow_lm_main_int8.onnx";

describe("the listing", () => {
  test("every regular file, sorted, with '/' names for sub-folders; no dot-files, parts, links out of the folder, or folders past three deep", async () => {
    const response = await get("/v1/models/tone-test/files");
    expect(response.status).toBe(200);
    const body = (await response.json()) as any;
    expect(body.object).toBe("list");
    expect(body.model).toBe("tone-test");
    expect(body.data.map((file: any) => file.name)).toEqual(LISTED);
    const main = body.data.find((file: any) => file.name === "flow_lm_main_int8.onnx");
    expect(main).toEqual({ name: "flow_lm_main_int8.onnx", size: MAIN_BYTES.length, etag: expect.stringMatching(/^W\/"493e0-[0-9a-f]+"$/), url: MAIN });
    expect(body.data.find((file: any) => file.name === "voices/alba.safetensors")).toMatchObject({ size: VOICE_BYTES.length, url: "/v1/models/tone-test/files/voices/alba.safetensors" });
    expect(body.data.find((file: any) => file.name === "voices/my voice.safetensors").url).toBe("/v1/models/tone-test/files/voices/my%20voice.safetensors");
    for (const file of body.data) expect(Object.keys(file).sort()).toEqual(["etag", "name", "size", "url"]);
  });

  test("any name the model answers to lists the same files, under that name", async () => {
    const body = (await (await get("/v1/models/tts-1/files")).json()) as any;
    expect(body.model).toBe("tts-1");
    expect(body.data.map((file: any) => file.name)).toEqual(LISTED);
    expect(body.data[0].url).toStartWith("/v1/models/tts-1/files/");
  });

  test("a pulled bundle's files carry their hub URL and sha256, and the sha256 is their strong ETag", async () => {
    const dir = bundleFolder("pulled");
    const manifest = {
      format: "voxedge-bundle-1",
      bundle: "pocket-tts-en-int8",
      catalogName: "pocket-tts",
      repo: "kyutai/pocket-tts-onnx",
      revision: "0123abcd",
      language: "en",
      precision: "int8",
      hubUrl: "https://hub.example/",
      completedAt: "2026-01-01T00:00:00.000Z",
      files: [
        { name: "flow_lm_main_int8.onnx", repoPath: "onnx/flow lm/main_int8.onnx", sizeBytes: MAIN_BYTES.length, sha256: sha256(MAIN_BYTES) },
        // Changed on disk since the pull: its recorded sha256 no longer names its bytes.
        { name: "tokenizer.model", repoPath: "tokenizer.model", sizeBytes: 999, sha256: "a".repeat(64) },
      ],
    };
    writeFileSync(join(dir, "complete.json"), JSON.stringify(manifest));
    const { app: pulledApp } = await testApp(new BundleAdapter(dir));
    const body = (await (await pulledApp.request("/v1/models/tone-test/files")).json()) as any;
    expect(body.data.map((file: any) => file.name)).toEqual([...LISTED.slice(0, 1), "complete.json", ...LISTED.slice(1)]);
    expect(body.data.find((file: any) => file.name === "flow_lm_main_int8.onnx")).toEqual({
      name: "flow_lm_main_int8.onnx",
      size: MAIN_BYTES.length,
      etag: `"${sha256(MAIN_BYTES)}"`,
      url: MAIN,
      hub_url: "https://hub.example/kyutai/pocket-tts-onnx/resolve/0123abcd/onnx/flow%20lm/main_int8.onnx",
      sha256: sha256(MAIN_BYTES),
    });
    const tokenizer = body.data.find((file: any) => file.name === "tokenizer.model");
    expect(tokenizer.etag).toStartWith('W/"');
    expect(tokenizer.sha256).toBeUndefined();

    // A strong ETag makes If-Range count, and compares weakly for If-None-Match.
    const etag = `"${sha256(MAIN_BYTES)}"`;
    const resumed = await pulledApp.request(MAIN, { headers: { Range: "bytes=299998-", "If-Range": etag } });
    expect(resumed.status).toBe(206);
    expect([...new Uint8Array(await resumed.arrayBuffer())]).toEqual([...MAIN_BYTES.subarray(299_998)]);
    expect((await pulledApp.request(MAIN, { headers: { "If-None-Match": `W/${etag}` } })).status).toBe(304);
  });
});

describe("refusals, in OpenAI's error shape", () => {
  const expectNotFound = async (response: Response, param: string, message: RegExp) => {
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ error: { message: expect.stringMatching(message), type: "NotFoundError", param, code: 404 } });
  };

  test("an unknown model, on both routes", async () => {
    await expectNotFound(await get("/v1/models/whisper-1/files"), "model", /'whisper-1' does not exist/);
    await expectNotFound(await get("/v1/models/whisper-1/files/tokenizer.model"), "model", /'whisper-1' does not exist/);
  });

  test("a name the listing does not have: unknown, unlisted on disk, or climbing out with '..'", async () => {
    for (const path of ["nope.onnx", ".hidden", "mimi_decoder.onnx.part", "leaves.txt", "a/b/c/d/four-deep.bin", "..%2Fplain-secret.txt", "voices/..%2Ftokenizer.model", "..%2F..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd"]) {
      await expectNotFound(await get(`/v1/models/tone-test/files/${path}`), "name", /has no file/);
    }
  });

  test("the offline engine has no files to lend", async () => {
    const classic = await createClassicModel();
    try {
      const { app: classicApp } = await testApp(classic);
      await expectNotFound(await classicApp.request("/v1/models/tts-1/files"), "model", /has no files to lend: the offline engine runs only on the server/);
      await expectNotFound(await classicApp.request("/v1/models/tts-1/files/tokenizer.model"), "model", /has no files to lend/);
    } finally {
      await classic.close();
    }
  });
});

describe("a file", () => {
  test("GET: its exact bytes, streamed, with length, validators and the headers a cross-origin isolated page needs", async () => {
    const response = await get(MAIN);
    expect(response.status).toBe(200);
    const listed = ((await (await get("/v1/models/tone-test/files")).json()) as any).data.find((file: any) => file.name === "flow_lm_main_int8.onnx");
    expect(Object.fromEntries(response.headers)).toMatchObject({
      "content-type": "application/octet-stream",
      "content-length": String(MAIN_BYTES.length),
      etag: listed.etag,
      "last-modified": expect.stringMatching(/ GMT$/),
      "accept-ranges": "bytes",
      "cache-control": "no-cache",
      "cross-origin-resource-policy": "same-origin",
    });
    expect(response.body).toBeInstanceOf(ReadableStream);
    expect(new Uint8Array(await response.arrayBuffer())).toEqual(MAIN_BYTES);
    expect(new Uint8Array(await (await get("/v1/models/tone-test/files/voices/alba.safetensors")).arrayBuffer())).toEqual(VOICE_BYTES);
    expect(await (await get("/v1/models/tone-test/files/voices/my%20voice.safetensors")).text()).toBe("spaced");
    const empty = await get("/v1/models/tone-test/files/empty.bin");
    expect(empty.status).toBe(200);
    expect(empty.headers.get("content-length")).toBe("0");
    expect((await empty.arrayBuffer()).byteLength).toBe(0);
  });

  test("If-None-Match: a match (weakly, in a list, or *) is a 304 with no body; anything else the file", async () => {
    const etag = (await get(MAIN)).headers.get("etag")!;
    for (const ifNoneMatch of [etag, etag.replace(/^W\//, ""), `"other", ${etag}`, "*"]) {
      const response = await get(MAIN, { "If-None-Match": ifNoneMatch });
      expect({ ifNoneMatch, status: response.status }).toEqual({ ifNoneMatch, status: 304 });
      expect(response.headers.get("etag")).toBe(etag);
      expect(await response.text()).toBe("");
    }
    expect((await get(MAIN, { "If-None-Match": '"other"' })).status).toBe(200);
  });

  test("Range: a-b, a- and -n are 206 with exactly those bytes and their Content-Range", async () => {
    const cases: [string, number, number][] = [
      ["bytes=10-19", 10, 19],
      ["bytes=299990-", 299_990, 299_999],
      ["bytes=-5", 299_995, 299_999],
      ["bytes=0-0", 0, 0],
      ["bytes=262140-262150", 262_140, 262_150],
      ["bytes=100-999999", 100, 299_999],
      ["bytes=-400000", 0, 299_999],
      ["BYTES = 3 - 4", 3, 4],
    ];
    for (const [range, start, end] of cases) {
      const response = await get(MAIN, { Range: range });
      expect({ range, status: response.status, contentRange: response.headers.get("content-range"), length: response.headers.get("content-length") }).toEqual({ range, status: 206, contentRange: `bytes ${start}-${end}/300000`, length: String(end - start + 1) });
      expect(new Uint8Array(await response.arrayBuffer())).toEqual(MAIN_BYTES.subarray(start, end + 1));
    }
  });

  test("an unsatisfiable range is a 416 naming the size", async () => {
    for (const [path, range, size] of [[MAIN, "bytes=300000-", 300_000], [MAIN, "bytes=-0", 300_000], ["/v1/models/tone-test/files/empty.bin", "bytes=-1", 0]] as const) {
      const response = await get(path, { Range: range });
      expect({ range, status: response.status, contentRange: response.headers.get("content-range") }).toEqual({ range, status: 416, contentRange: `bytes */${size}` });
      expect(await response.json()).toEqual({ error: { message: expect.stringContaining(range), type: "BadRequestError", param: "Range", code: 416 } });
    }
  });

  test("a multi-range, a malformed Range, or an If-Range that does not match: the whole file, 200", async () => {
    const etag = (await get(MAIN)).headers.get("etag")!;
    const ignored: Record<string, string>[] = [
      { Range: "bytes=0-1,5-6" },
      { Range: "bytes=5-2" },
      { Range: "items=0-1" },
      { Range: "bytes=-" },
      { Range: "bytes=abc" },
      { Range: "bytes=0-1", "If-Range": '"not-this-one"' },
      // A weak validator never satisfies If-Range (RFC 9110 §13.1.5).
      { Range: "bytes=0-1", "If-Range": etag },
      { Range: "bytes=0-1", "If-Range": "Thu, 01 Jan 2026 00:00:00 GMT" },
    ];
    for (const headers of ignored) {
      const response = await get(MAIN, headers);
      expect({ headers, status: response.status, contentRange: response.headers.get("content-range") }).toEqual({ headers, status: 200, contentRange: null });
      expect((await response.arrayBuffer()).byteLength).toBe(MAIN_BYTES.length);
    }
  });

  test("HEAD answers GET's headers without a body, ranges included", async () => {
    const response = await get(MAIN, {}, "HEAD");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-length")).toBe(String(MAIN_BYTES.length));
    expect(response.headers.get("etag")).toStartWith('W/"');
    expect(response.headers.get("accept-ranges")).toBe("bytes");
    expect(await response.text()).toBe("");
    const ranged = await get(MAIN, { Range: "bytes=-5" }, "HEAD");
    expect(ranged.status).toBe(206);
    expect(ranged.headers.get("content-range")).toBe("bytes 299995-299999/300000");
    expect(ranged.headers.get("content-length")).toBe("5");
  });

  test("over a real Bun server: the whole file and a range with their Content-Length, a HEAD", async () => {
    const server = await startTestServer(new BundleAdapter(plainDir));
    try {
      const whole = await fetch(`${server.url}${MAIN}`);
      expect(whole.status).toBe(200);
      expect(whole.headers.get("content-length")).toBe(String(MAIN_BYTES.length));
      expect(new Uint8Array(await whole.arrayBuffer())).toEqual(MAIN_BYTES);
      const ranged = await fetch(`${server.url}${MAIN}`, { headers: { Range: "bytes=262000-262299" } });
      expect(ranged.headers.get("content-range")).toBe("bytes 262000-262299/300000");
      expect(ranged.headers.get("content-length")).toBe("300");
      expect(new Uint8Array(await ranged.arrayBuffer())).toEqual(MAIN_BYTES.subarray(262_000, 262_300));
      const head = await fetch(`${server.url}${MAIN}`, { method: "HEAD" });
      expect(head.headers.get("content-length")).toBe(String(MAIN_BYTES.length));
      // A client that leaves after the first chunk releases the stream (and its file handle) without error.
      const left = await fetch(`${server.url}${MAIN}`);
      const reader = left.body!.getReader();
      expect((await reader.read()).done).toBe(false);
      await reader.cancel();
    } finally {
      await server.stop();
    }
  });

  test("under Deno's own server: streamed whole with its Content-Length, a range, HEAD, 304", () => {
    const result = spawnSync(DENO, ["run", "--allow-read", "--allow-env", "--allow-net", "--allow-sys", "test/http/deno/model-files-check.ts", plainDir], { cwd: REPO_ROOT, timeout: 60_000 });
    if (result.status !== 0) throw new Error(`deno exited with ${result.status}: ${result.stderr.toString().slice(-2000)}`);
    const report = JSON.parse(result.stdout.toString().trim().split("\n").at(-1)!);
    expect(report).toEqual({
      runtime: "deno",
      names: LISTED,
      whole: { status: 200, contentLength: String(MAIN_BYTES.length), sha256: sha256(MAIN_BYTES), expectedSha256: sha256(MAIN_BYTES) },
      ranged: { status: 206, contentRange: "bytes 299995-299999/300000", bytes: [...MAIN_BYTES.subarray(299_995)] },
      head: { status: 200, contentLength: String(MAIN_BYTES.length), body: 0 },
      revalidated: 304,
    });
  }, 60_000);
});

test("parseByteRange: the three single-range forms, clamped; unsatisfiable; ignored", () => {
  expect(parseByteRange("bytes=0-9", 5)).toEqual({ start: 0, end: 4 });
  expect(parseByteRange("bytes=4-", 5)).toEqual({ start: 4, end: 4 });
  expect(parseByteRange("bytes=-9", 5)).toEqual({ start: 0, end: 4 });
  expect(parseByteRange("bytes=5-", 5)).toBe("unsatisfiable");
  expect(parseByteRange("bytes=0-0", 0)).toBe("unsatisfiable");
  expect(parseByteRange("bytes=1-0", 5)).toBeUndefined();
  expect(parseByteRange("bytes=0-1, 3-4", 5)).toBeUndefined();
  expect(parseByteRange("bytes 0-1", 5)).toBeUndefined();
});

describe("the API key", () => {
  test("both routes need it when the server has keys", async () => {
    const { app: keyed } = await testApp(new BundleAdapter(plainDir), { flags: { "api-key": "sk-files" } });
    for (const path of ["/v1/models/tone-test/files", MAIN]) {
      const refused = await keyed.request(path);
      expect(refused.status).toBe(401);
      expect(((await refused.json()) as any).error.type).toBe("UnauthorizedError");
      expect((await keyed.request(path, { headers: { authorization: "Bearer sk-wrong" } })).status).toBe(401);
      const allowed = await keyed.request(path, { headers: { authorization: "Bearer sk-files" } });
      expect(allowed.status).toBe(200);
      await allowed.arrayBuffer();
    }
  });
});

describe("cross-origin isolation", () => {
  test("the playground page and its modules are COOP same-origin + COEP require-corp; the API is not", async () => {
    for (const path of ["/", "/playground/playground.js"]) {
      const response = await get(path);
      expect({ path, status: response.status, coop: response.headers.get("cross-origin-opener-policy"), coep: response.headers.get("cross-origin-embedder-policy") }).toEqual({ path, status: 200, coop: "same-origin", coep: "require-corp" });
      await response.arrayBuffer();
    }
    for (const path of ["/v1/models", "/v1/models/tone-test/files", "/health", "/playgroundish"]) {
      const response = await get(path);
      expect({ path, coop: response.headers.get("cross-origin-opener-policy"), coep: response.headers.get("cross-origin-embedder-policy") }).toEqual({ path, coop: null, coep: null });
      await response.arrayBuffer();
    }
  });
});

test("the listing is read from disk on each request: a file added after startup is in the next one", async () => {
  writeFileSync(join(plainDir, "voices", "late.safetensors"), "late");
  try {
    const body = (await (await get("/v1/models/tone-test/files")).json()) as any;
    expect(body.data.map((file: any) => file.name)).toContain("voices/late.safetensors");
  } finally {
    rmSync(join(plainDir, "voices", "late.safetensors"));
  }
});
