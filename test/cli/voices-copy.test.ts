/**
 * `voxedge voices copy --from … --to …`, run as a user runs it: a speaker folder in vLLM-Omni's layout into a
 * bucket of a real Ceph RGW and back into a new folder, names, consent, created_at and metadata kept, and a
 * second run that finds everything already there.
 */
import { beforeAll, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLogger } from "../../src/log/logger.ts";
import { FolderVoiceStore } from "../../src/voices/folder-store.ts";
import { sharedRgw, type Rgw } from "../support/rgw.ts";
import { BUN, REPO_ROOT } from "../support/server-process.ts";
import { EMBEDDING_VOICE, STEREO_VOICE, writeVllmOmniFolder } from "../support/vllm-omni-folder.ts";

let rgw: Rgw;
beforeAll(async () => {
  rgw = await sharedRgw();
}, 150_000);

function copy(from: string, to: string) {
  const result = spawnSync(BUN, ["src/main.ts", "voices", "copy", "--from", from, "--to", to], { cwd: REPO_ROOT, env: { ...process.env, ...rgw.env() }, encoding: "utf8", timeout: 60_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr, report: result.status === 0 ? JSON.parse(result.stdout) : undefined };
}

test("a vLLM-Omni speaker folder into a bucket and back: every voice with its created_at, consent and metadata; a second run copies nothing", async () => {
  const source = mkdtempSync(join(tmpdir(), "voxedge-copy-source-"));
  writeVllmOmniFolder(source);
  const bucket = await rgw.newBucket("copy");
  const bucketUrl = `s3://${bucket.bucket}/voices`;

  const into = copy(source, bucketUrl);
  expect(into.stderr).toBe("");
  expect(into.report).toEqual({ from: source, to: bucketUrl, copied: 2, already_there: 0 });
  expect(copy(source, bucketUrl).report).toMatchObject({ copied: 0, already_there: 2 });

  const back = mkdtempSync(join(tmpdir(), "voxedge-copy-back-"));
  expect(copy(bucketUrl, back).report).toMatchObject({ copied: 2, already_there: 0 });
  const restored = await FolderVoiceStore.open({ dir: back, maxVoices: 10, logger: silentLogger });
  const original = await FolderVoiceStore.open({ dir: source, maxVoices: 10, logger: silentLogger });
  const withoutSize = ({ file_size: _size, ...voice }: { file_size: number }) => voice;
  // The embedding's file_size is its own file's size, which our writer's header makes different.
  expect(restored.list().map(withoutSize)).toEqual(original.list().map(withoutSize));
  expect(restored.get(STEREO_VOICE.name)).toMatchObject({ created_at: STEREO_VOICE.createdAt, consent: STEREO_VOICE.consent, ref_text: STEREO_VOICE.refText, file_size: STEREO_VOICE.uploadBytes });
  expect(restored.get(EMBEDDING_VOICE.name)).toMatchObject({ created_at: EMBEDDING_VOICE.createdAt, consent: EMBEDDING_VOICE.consent });
  // Audio arrives as the server uses it (a stereo upload down-mixed to mono), an embedding bit for bit.
  const [copiedAudio, originalAudio] = [await restored.loadAudio(STEREO_VOICE.name), await original.loadAudio(STEREO_VOICE.name)];
  expect(Array.from(copiedAudio!.samples)).toEqual(Array.from(originalAudio!.samples));
  expect(Array.from((await restored.loadEmbedding(EMBEDDING_VOICE.name))!.embedding)).toEqual(Array.from(EMBEDDING_VOICE.embedding));
});

test("copy without --to, or from a bucket without credentials, fails with what to do", () => {
  const missing = spawnSync(BUN, ["src/main.ts", "voices", "copy", "--from", "/tmp"], { cwd: REPO_ROOT, encoding: "utf8", timeout: 30_000 });
  expect(missing.status).toBe(2);
  expect(missing.stderr).toContain("voices copy needs --from and --to");
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("AWS_")));
  const noKeys = spawnSync(BUN, ["src/main.ts", "voices", "copy", "--from", "s3://some-bucket/x", "--to", mkdtempSync(join(tmpdir(), "voxedge-copy-"))], { cwd: REPO_ROOT, env, encoding: "utf8", timeout: 30_000 });
  expect(noKeys.status).toBe(1);
  expect(noKeys.stderr).toContain("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
});
