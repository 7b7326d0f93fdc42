/**
 * Two server processes sharing one speaker folder, as replicas behind a load balancer on a network volume:
 * a voice uploaded, replaced or deleted through either is seen by the other on its next request naming the
 * voice and in its listing.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeWav } from "../../../src/audio/wav.ts";
import { startBunServer, type ServerProcess } from "../../support/server-process.ts";
import { multipartBody, sine } from "../../support/uploads.ts";

const speakerDir = mkdtempSync(join(tmpdir(), "voxedge-replicas-"));
let first: ServerProcess;
let second: ServerProcess;
beforeAll(async () => {
  [first, second] = await Promise.all([startBunServer(speakerDir), startBunServer(speakerDir)]);
}, 60_000);
afterAll(async () => {
  for (const replica of [first, second]) if (replica.child.exitCode === null) await replica.stop("SIGKILL");
});

async function upload(base: string, name: string, refText: string) {
  const audio = new File([encodeWav(sine(2, 300, 16000), 16000) as Uint8Array<ArrayBuffer>], `${name}.wav`, { type: "audio/wav" });
  const { body, contentType } = await multipartBody({ name, consent: `consent-${name}`, audio_sample: audio, ref_text: refText });
  const response = await fetch(`${base}/v1/audio/voices`, { method: "POST", headers: { "content-type": contentType }, body: body as Uint8Array<ArrayBuffer> });
  expect(response.status).toBe(200);
  return ((await response.json()) as { voice: { created_at: number } }).voice;
}

const uploaded = async (base: string) => ((await (await fetch(`${base}/v1/audio/voices`)).json()) as { uploaded_voices: { name: string; created_at: number; ref_text?: string }[] }).uploaded_voices;

/** What a replica makes of a request naming the voice: the offline engine cannot clone, so a voice it finds is a 400 saying it is an upload. */
async function speakWith(base: string, voice: string): Promise<string> {
  const response = await fetch(`${base}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "Hello.", voice }) });
  expect(response.status).toBe(400);
  return ((await response.json()) as { error: { message: string } }).error.message;
}

test("an upload on one replica is spoken for (found by name) and listed by the other at once", async () => {
  expect(await speakWith(second.base, "Ada")).toContain("Unknown voice 'ada'");
  const stored = await upload(first.base, "Ada", "first take");
  expect(await speakWith(second.base, "ada")).toContain("voice 'Ada' is an uploaded voice");
  expect(await uploaded(second.base)).toEqual([expect.objectContaining({ name: "Ada", created_at: stored.created_at, ref_text: "first take" })]);
});

test("a re-upload on the other replica replaces it for both; created_at keeps increasing across replicas", async () => {
  const before = (await uploaded(first.base)).find((voice) => voice.name === "Ada")!;
  const replaced = await upload(second.base, "Ada", "second take");
  expect(replaced.created_at).toBeGreaterThan(before.created_at);
  for (const replica of [first, second]) expect(await uploaded(replica.base)).toEqual([expect.objectContaining({ name: "Ada", created_at: replaced.created_at, ref_text: "second take" })]);
});

test("a delete on one replica is gone on the other, for requests and listings; deleting there again is a 404", async () => {
  await upload(second.base, "Grace", "kept");
  // The first replica knows both voices before the delete elsewhere.
  expect((await uploaded(first.base)).map((voice) => voice.name).sort()).toEqual(["Ada", "Grace"]);
  const deleted = await fetch(`${second.base}/v1/audio/voices/ada`, { method: "DELETE" });
  expect(deleted.status).toBe(200);
  expect(await speakWith(first.base, "ada")).toContain("Unknown voice 'ada'");
  expect((await uploaded(first.base)).map((voice) => voice.name)).toEqual(["Grace"]);
  expect((await fetch(`${first.base}/v1/audio/voices/ada`, { method: "DELETE" })).status).toBe(404);
  // A voice uploaded on one replica can be deleted through the other.
  expect((await fetch(`${first.base}/v1/audio/voices/grace`, { method: "DELETE" })).status).toBe(200);
  expect(await uploaded(second.base)).toEqual([]);
  expect(readdirSync(speakerDir)).toEqual([]);
});

test("concurrent uploads through both replicas: each voice is stored whole once, both list the same set, no temp files", async () => {
  const names = Array.from({ length: 12 }, (_, index) => `crowd-${index}`);
  await Promise.all(names.map((name, index) => upload(index % 2 === 0 ? first.base : second.base, name, `take of ${name}`)));
  const [onFirst, onSecond] = await Promise.all([uploaded(first.base), uploaded(second.base)]);
  expect(onFirst.map((voice) => voice.name).sort()).toEqual([...names].sort());
  expect(onSecond).toEqual(onFirst);
  const files = readdirSync(speakerDir);
  expect(files.filter((file) => !file.endsWith(".safetensors"))).toEqual([]);
  expect(files).toHaveLength(names.length);
});

test("each replica stops cleanly on its own signal (SIGTERM, SIGINT), exit 0, leaving the shared folder whole", async () => {
  expect(await first.stop("SIGTERM")).toBe(0);
  // The other replica still serves the folder's voices.
  expect((await uploaded(second.base)).length).toBe(12);
  expect(await second.stop("SIGINT")).toBe(0);
  expect(readdirSync(speakerDir).filter((file) => !file.endsWith(".safetensors"))).toEqual([]);
});
