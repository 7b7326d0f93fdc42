/** A speaker folder written by vLLM-Omni, opened by the voice store: restored in place, beside our own files. */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger, silentLogger } from "../../../src/log/logger.ts";
import { FolderVoiceStore } from "../../../src/voices/folder-store.ts";
import { EMBEDDING_VOICE, folderSnapshot, STEREO_VOICE, writeVllmOmniFolder } from "../../support/vllm-omni-folder.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "voxedge-migration-"));
  writeVllmOmniFolder(dir);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const openStore = (maxVoices = 1000, logger = silentLogger) => FolderVoiceStore.open({ dir, maxVoices, logger });
const ownFiles = () => readdirSync(dir).filter((file) => /^[0-9a-f]{32}\.safetensors$/.test(file));

function capturingLogger() {
  const lines: string[] = [];
  return { entries: () => lines.map((line) => JSON.parse(line)), logger: createLogger("debug", (line) => lines.push(line)) };
}

function audioUpload(name: string) {
  return { name, consent: "ours", mimeType: "audio/wav", fileSizeBytes: 1234, samples: Float32Array.from({ length: 16000 }, (_, index) => Math.sin(index / 8) / 2), sampleRateHz: 16000 };
}

describe("restoring a vLLM-Omni speaker folder", () => {
  test("both voices list with their metadata, in created_at order, and nothing in the folder is rewritten", async () => {
    const before = folderSnapshot(dir);
    const { entries, logger } = capturingLogger();
    const store = await openStore(1000, logger);
    expect(store.list()).toEqual([
      {
        name: "Studio Voice",
        consent: "rec 2024/07#1",
        created_at: STEREO_VOICE.createdAt,
        mime_type: "audio/wav",
        file_size: STEREO_VOICE.uploadBytes,
        sample_rate: 44_100,
        ref_text: STEREO_VOICE.refText,
        speaker_description: STEREO_VOICE.speakerDescription,
        embedding_source: "audio",
      },
      {
        name: "Emb Voice",
        consent: "c-1",
        created_at: EMBEDDING_VOICE.createdAt,
        mime_type: "application/x-safetensors",
        file_size: before.get(EMBEDDING_VOICE.fileName)!.length,
        embedding_source: "direct",
        embedding_dim: 4,
      },
    ]);
    expect(entries().filter((entry) => entry.level === "warn")).toEqual([]);
    expect(entries()).toContainEqual(expect.objectContaining({ restored: 2, skipped: 0, superseded: 0 }));

    await store.loadAudio("studio voice");
    await store.loadEmbedding("EMB VOICE");
    expect(folderSnapshot(dir)).toEqual(before);
    await openStore();
    expect(folderSnapshot(dir)).toEqual(before);
  });

  test("the stereo [N, 2] audio loads as the mono average at its own sample rate", async () => {
    const store = await openStore();
    const loaded = (await store.loadAudio("Studio Voice"))!;
    expect(loaded.sampleRateHz).toBe(44_100);
    expect(loaded.samples.length).toBe(STEREO_VOICE.frameCount);
    const meanAmplitude = (STEREO_VOICE.leftAmplitude + STEREO_VOICE.rightAmplitude) / 2;
    for (const frame of [1, 100, 12_345, STEREO_VOICE.frameCount - 1]) {
      const wave = Math.sin((2 * Math.PI * STEREO_VOICE.frequencyHz * frame) / STEREO_VOICE.sampleRateHz);
      expect(loaded.samples[frame]!).toBeCloseTo(meanAmplitude * wave, 6);
    }
    expect((await store.loadEmbedding("emb voice"))!.embedding).toEqual(EMBEDDING_VOICE.embedding);
  });

  test("delete removes the voice's file and it stays gone after a restart", async () => {
    const store = await openStore();
    expect(await store.delete("STUDIO VOICE")).toBe(true);
    expect(existsSync(join(dir, STEREO_VOICE.fileName))).toBe(false);
    expect(existsSync(join(dir, EMBEDDING_VOICE.fileName))).toBe(true);
    expect((await openStore()).list().map((voice) => voice.name)).toEqual(["Emb Voice"]);
  });

  test("re-uploading a restored name replaces it in our own format and removes the old file", async () => {
    const untouched = folderSnapshot(dir).get(EMBEDDING_VOICE.fileName);
    const store = await openStore();
    const replaced = await store.saveAudio(audioUpload("studio VOICE"));
    expect(replaced.created_at).toBeGreaterThan(EMBEDDING_VOICE.createdAt);
    expect(existsSync(join(dir, STEREO_VOICE.fileName))).toBe(false);
    expect(ownFiles()).toHaveLength(1);
    expect(folderSnapshot(dir).get(EMBEDDING_VOICE.fileName)).toEqual(untouched);

    const reopened = await openStore();
    expect(reopened.list().map((voice) => [voice.name, voice.consent])).toEqual([
      ["Emb Voice", "c-1"],
      ["studio VOICE", "ours"],
    ]);
    expect((await reopened.loadAudio("studio voice"))!.sampleRateHz).toBe(16000);
  });

  test("restored voices count toward the cap, and new voices sort after them", async () => {
    const store = await openStore(3);
    const ours = await store.saveAudio(audioUpload("Ours"));
    expect(ours.created_at).toBeGreaterThan(EMBEDDING_VOICE.createdAt);
    await expect(store.saveAudio(audioUpload("one too many"))).rejects.toThrow("Uploaded voice limit reached (3)");
    // Replacing a restored voice is not a new voice.
    await store.saveEmbedding({ name: "emb voice", consent: "again", embedding: Float32Array.of(1, 2, 3, 4) });
    const reopened = await openStore(3);
    expect(reopened.list().map((voice) => voice.name)).toEqual(["Studio Voice", "Ours", "emb voice"]);
    expect(readdirSync(dir).sort()).toEqual([STEREO_VOICE.fileName, ...ownFiles()].sort());
  });

  test("a renamed vLLM-Omni file is skipped like any copy", async () => {
    rmSync(dir, { recursive: true });
    dir = mkdtempSync(join(tmpdir(), "voxedge-migration-"));
    const source = mkdtempSync(join(tmpdir(), "voxedge-migration-source-"));
    try {
      writeVllmOmniFolder(source);
      const bytes = folderSnapshot(source).get(STEREO_VOICE.fileName)!;
      await Bun.write(join(dir, "Studio_Voice_07_1_1700000001.safetensors"), bytes);
    } finally {
      rmSync(source, { recursive: true, force: true });
    }
    const { entries, logger } = capturingLogger();
    expect((await openStore(1000, logger)).list()).toEqual([]);
    expect(entries().find((entry) => entry.level === "warn")).toMatchObject({ file: "Studio_Voice_07_1_1700000001.safetensors", reason: expect.stringContaining("file name does not match") });
  });

  test("when a replacement was written but the old file not yet removed, the newer file wins and delete removes both", async () => {
    const other = mkdtempSync(join(tmpdir(), "voxedge-migration-other-"));
    try {
      // A replacement of "Studio Voice" in our own format, as if the server stopped before removing the old file.
      const writer = await FolderVoiceStore.open({ dir: other, maxVoices: 10, logger: silentLogger });
      await writer.saveAudio(audioUpload("Studio Voice"));
      const [ownFile] = readdirSync(other).filter((file) => file.endsWith(".safetensors"));
      await Bun.write(join(dir, ownFile!), folderSnapshot(other).get(ownFile!)!);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
    const { entries, logger } = capturingLogger();
    const store = await openStore(1000, logger);
    expect(store.get("studio voice")!.consent).toBe("ours");
    expect(entries()).toContainEqual(expect.objectContaining({ level: "warn", file: STEREO_VOICE.fileName }));
    expect(entries()).toContainEqual(expect.objectContaining({ restored: 2, superseded: 1 }));
    expect(existsSync(join(dir, STEREO_VOICE.fileName))).toBe(true);

    expect(await store.delete("studio voice")).toBe(true);
    expect(readdirSync(dir)).toEqual([EMBEDDING_VOICE.fileName]);
    expect((await openStore()).get("studio voice")).toBeUndefined();
  });
});
