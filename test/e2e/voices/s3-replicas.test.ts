/**
 * Server processes sharing one bucket of a real Ceph RGW (`--voice-store s3://…`), as replicas in a cluster:
 * three `voxedge serve` on Bun and one `deno serve src/deploy.ts`. An upload, replacement or delete through
 * any of them is seen by every other on its next request; concurrent uploads through all of them keep the
 * cap and distinct created_at; a replica killed with SIGKILL during uploads loses no acknowledged voice and
 * leaves nothing half-written visible; a bucket that cannot be used stops the start with the reason.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeWav } from "../../../src/audio/wav.ts";
import type { S3Bucket } from "../../../src/storage/s3.ts";
import { fixtureBundle } from "../../models/pocket/bundle-fixture.ts";
import { sharedRgw, type Rgw } from "../../support/rgw.ts";
import { BUN, DENO, REPO_ROOT, startServerProcess, type ServerProcess } from "../../support/server-process.ts";
import { multipartBody, sine } from "../../support/uploads.ts";

const CAP = 10;
let rgw: Rgw;
let bucket: S3Bucket;
let replicas: ServerProcess[] = [];
const location = () => `s3://${bucket.bucket}/cluster`;
const emptyFolder = () => mkdtempSync(join(tmpdir(), "voxedge-unused-speakers-"));

beforeAll(async () => {
  rgw = await sharedRgw();
  bucket = await rgw.newBucket("replicas");
  const flags = ["--voice-store", location(), "--max-uploaded-voices", String(CAP)];
  replicas = await Promise.all([
    ...[0, 1, 2].map(() => startServerProcess([BUN, "src/main.ts", "serve", "--engine", "classic", "--host", "127.0.0.1", "--port", "0", ...flags], rgw.env())),
    startServerProcess([DENO, "serve", "-A", "--host", "127.0.0.1", "--port", "0", "src/deploy.ts"], { ...rgw.env(), VOXEDGE_ENGINE: "classic", VOXEDGE_VOICE_STORE: location(), SPEAKER_MAX_UPLOADED: String(CAP), SPEAKER_SAMPLES_DIR: emptyFolder() }),
  ]);
}, 180_000);
afterAll(async () => {
  for (const replica of replicas) if (replica.child.exitCode === null) await replica.stop("SIGKILL");
});

async function upload(base: string, name: string, refText = `take of ${name}`): Promise<Response> {
  const audio = new File([encodeWav(sine(1, 300, 16000), 16000) as Uint8Array<ArrayBuffer>], `${name}.wav`, { type: "audio/wav" });
  const { body, contentType } = await multipartBody({ name, consent: `consent-${name}`, audio_sample: audio, ref_text: refText });
  return fetch(`${base}/v1/audio/voices`, { method: "POST", headers: { "content-type": contentType }, body: body as Uint8Array<ArrayBuffer> });
}

type Listed = { name: string; created_at: number; ref_text?: string; consent?: string };
const uploaded = async (base: string) => ((await (await fetch(`${base}/v1/audio/voices`)).json()) as { uploaded_voices: Listed[] }).uploaded_voices;

/** What a replica makes of a request naming the voice: the offline engine cannot clone, so a voice it finds is a 400 saying it is an upload. */
async function speakWith(base: string, voice: string): Promise<string> {
  const response = await fetch(`${base}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "Hello.", voice }) });
  expect(response.status).toBe(400);
  return ((await response.json()) as { error: { message: string } }).error.message;
}

/** Every voice the manifest names has its body in the bucket: nothing half-written is visible. */
async function expectManifestWhole(prefix: string): Promise<string[]> {
  const manifest = await bucket.get(`${prefix}/manifest.json`);
  if (manifest === "missing" || manifest === "unchanged") return [];
  const { voices } = JSON.parse(new TextDecoder().decode(manifest.body)) as { voices: Record<string, { voice: { name: string }; body: string }> };
  const bodies = new Set((await bucket.list(`${prefix}/voices/`)).objects.map((object) => object.key));
  for (const entry of Object.values(voices)) expect(bodies.has(`${prefix}/voices/${entry.body}.safetensors`)).toBe(true);
  return Object.values(voices).map((entry) => entry.voice.name);
}

describe("three Bun replicas and a Deno replica on one bucket", () => {
  test("an upload on one is found by name and listed by every other at once; a replacement and a delete too", async () => {
    const [a, b, c, deno] = replicas.map((replica) => replica.base) as [string, string, string, string];
    expect(await speakWith(deno, "Ada")).toContain("Unknown voice 'ada'");
    const stored = ((await (await upload(a, "Ada", "first take")).json()) as { voice: Listed }).voice;
    for (const base of [b, c, deno]) {
      expect(await speakWith(base, "ada")).toContain("voice 'Ada' is an uploaded voice");
      expect(await uploaded(base)).toEqual([expect.objectContaining({ name: "Ada", created_at: stored.created_at, ref_text: "first take" })]);
    }
    const replacing = await upload(deno, "ADA", "second take");
    expect(replacing.status).toBe(200);
    const replaced = ((await replacing.json()) as { voice: Listed }).voice;
    expect(replaced.created_at).toBeGreaterThan(stored.created_at);
    for (const base of [a, b, c]) expect(await uploaded(base)).toEqual([expect.objectContaining({ name: "ADA", created_at: replaced.created_at, ref_text: "second take" })]);

    expect((await fetch(`${b}/v1/audio/voices/ada`, { method: "DELETE" })).status).toBe(200);
    for (const base of [a, c, deno]) {
      expect(await speakWith(base, "ada")).toContain("Unknown voice 'ada'");
      expect(await uploaded(base)).toEqual([]);
    }
    expect((await fetch(`${deno}/v1/audio/voices/ada`, { method: "DELETE" })).status).toBe(404);
    expect((await bucket.list("cluster/voices/")).objects).toEqual([]);
  });

  test(`concurrent uploads of distinct names through all four against a cap of ${CAP}: exactly ${CAP} stored, distinct created_at, every 200 listed by every replica`, async () => {
    const names = Array.from({ length: 48 }, (_, index) => `crowd-${index}`);
    const responses = await Promise.all(names.map((name, index) => upload(replicas[index % replicas.length]!.base, name)));
    const accepted = names.filter((_, index) => responses[index]!.status === 200);
    const refused = responses.filter((response) => response.status !== 200);
    expect(accepted).toHaveLength(CAP);
    for (const response of refused) {
      expect(response.status).toBe(400);
      expect(((await response.json()) as { error: { message: string } }).error.message).toContain(`Uploaded voice limit reached (${CAP})`);
    }
    const listings = await Promise.all(replicas.map((replica) => uploaded(replica.base)));
    expect(listings[0]!.map((voice) => voice.name).sort()).toEqual([...accepted].sort());
    expect(new Set(listings[0]!.map((voice) => voice.created_at)).size).toBe(CAP);
    for (const listing of listings.slice(1)) expect(listing).toEqual(listings[0]!);
    expect((await expectManifestWhole("cluster")).sort()).toEqual([...accepted].sort());
    expect((await bucket.list("cluster/voices/")).objects).toHaveLength(CAP);
  });
});

test("a replica killed with SIGKILL during uploads: every acknowledged voice is kept and listed by a surviving replica, and nothing half-written is visible", async () => {
  const prefix = "killed";
  const flags = ["--voice-store", `s3://${bucket.bucket}/${prefix}`];
  const [victim, survivor] = await Promise.all([0, 1].map(() => startServerProcess([BUN, "src/main.ts", "serve", "--engine", "classic", "--host", "127.0.0.1", "--port", "0", ...flags], rgw.env())));
  try {
    const acknowledged: string[] = [];
    const uploads = Array.from({ length: 40 }, (_, index) =>
      upload(victim!.base, `kept-${index}`).then(
        (response) => {
          if (response.status === 200) acknowledged.push(`kept-${index}`);
        },
        () => undefined,
      ),
    );
    // Killed once some uploads are acknowledged and others are still in flight.
    while (acknowledged.length < 5) await new Promise((resolve) => setTimeout(resolve, 5));
    victim!.child.kill("SIGKILL");
    await Promise.all(uploads);
    expect(acknowledged.length).toBeLessThan(40);
    const listed = (await uploaded(survivor!.base)).map((voice) => voice.name);
    for (const name of acknowledged) expect(listed).toContain(name);
    expect((await expectManifestWhole(prefix)).sort()).toEqual([...listed].sort());
  } finally {
    for (const replica of [victim!, survivor!]) if (replica.child.exitCode === null && replica.child.signalCode === null) await replica.stop("SIGKILL");
  }
});

test("Pocket TTS replicas: a voice cloned through one speaks on the other at once, the same bytes for the same seed, and ElevenLabs' voice list has it", async () => {
  const flags = ["--voice-store", `s3://${bucket.bucket}/pocket`];
  const pocket = await Promise.all([0, 1].map(() => startServerProcess([BUN, "src/main.ts", "serve", "--model", fixtureBundle(), "--host", "127.0.0.1", "--port", "0", ...flags], rgw.env())));
  try {
    const [first, second] = pocket.map((replica) => replica.base) as [string, string];
    expect((await upload(first, "Bea")).status).toBe(200);
    const speak = (base: string) =>
      fetch(`${base}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "Hello there.", voice: "bea", response_format: "pcm", seed: 7 }) });
    const onSecond = await speak(second);
    expect(onSecond.status).toBe(200);
    const secondBytes = new Uint8Array(await onSecond.arrayBuffer());
    expect(secondBytes.length).toBeGreaterThan(0);
    const firstBytes = new Uint8Array(await (await speak(first)).arrayBuffer());
    expect(Buffer.from(secondBytes).equals(Buffer.from(firstBytes))).toBe(true);
    const elevenLabs = (await (await fetch(`${second}/elevenlabs/v1/voices`)).json()) as { voices: { name: string }[] };
    expect(elevenLabs.voices.map((voice) => voice.name)).toContain("Bea");
  } finally {
    for (const replica of pocket) await replica.stop("SIGKILL");
  }
}, 120_000);

describe("a bucket that cannot be used stops the start (exit 1) with the reason", () => {
  const serve = (env: Record<string, string>, store = `s3://${bucket.bucket}/refused`) =>
    spawnSync(BUN, ["src/main.ts", "serve", "--engine", "classic", "--host", "127.0.0.1", "--port", "0", "--voice-store", store], { cwd: REPO_ROOT, env: { ...process.env, ...env }, encoding: "utf8", timeout: 60_000 });

  test("wrong credentials", () => {
    const result = serve({ ...rgw.env(), AWS_SECRET_ACCESS_KEY: "wrong" });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("HTTP 403");
    expect(result.stderr).toContain("--voice-store");
  });

  test("no credentials", () => {
    const { AWS_ACCESS_KEY_ID: _id, AWS_SECRET_ACCESS_KEY: _secret, ...withoutKeys } = rgw.env();
    const result = spawnSync(BUN, ["src/main.ts", "serve", "--engine", "classic", "--port", "0", "--voice-store", `s3://${bucket.bucket}/x`], {
      cwd: REPO_ROOT,
      env: Object.fromEntries(Object.entries({ ...process.env, ...withoutKeys }).filter(([key]) => key !== "AWS_ACCESS_KEY_ID" && key !== "AWS_SECRET_ACCESS_KEY")),
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
  });

  test("an invalid bucket name", () => {
    const result = serve(rgw.env(), "s3://No_Such/x");
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("is not a valid bucket name");
  });
});
