import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ApiError } from "../../src/api/errors.ts";
import { createLogger, silentLogger } from "../../src/log/logger.ts";
import { encodeSafetensors } from "../../src/formats/safetensors.ts";
import { FolderVoiceStore, VoiceStoreFolderError } from "../../src/voices/folder-store.ts";
import type { SaveAudioInput, StoredVoice } from "../../src/voices/store.ts";
import { validateVoiceName } from "../../src/voices/voice-file.ts";
import { currentTempFileWriter } from "../../src/lib/durable-write.ts";
import { testApp } from "../support/server.ts";
import { ToneModel } from "../support/tone-model.ts";
import { wavFile } from "../support/uploads.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "voxedge-voices-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const openStore = (maxVoices = 1000, logger = silentLogger) => FolderVoiceStore.open({ dir, maxVoices, logger });

function capturingLogger() {
  const lines: string[] = [];
  return { lines, logger: createLogger("debug", (line) => lines.push(line)) };
}

function audioInput(name: string, overrides: Partial<SaveAudioInput> = {}): SaveAudioInput {
  return {
    name,
    consent: "consent-1",
    mimeType: "audio/wav",
    fileSizeBytes: 4321,
    samples: Float32Array.from({ length: 2400 }, (_, index) => Math.sin(index / 10) / 2),
    sampleRateHz: 24000,
    ...overrides,
  };
}

const voiceFiles = () => readdirSync(dir).filter((file) => file.endsWith(".safetensors")).sort();
const tempFiles = () => readdirSync(dir).filter((file) => file.startsWith(".tmp-"));

function expectBadName(call: () => unknown) {
  try {
    call();
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).status).toBe(400);
    expect((error as ApiError).param).toBe("name");
    return;
  }
  throw new Error("expected the name to be rejected");
}

describe("validateVoiceName", () => {
  const rejected: [string, string][] = [
    ["parent path", "../x"],
    ["slash", "a/b"],
    ["backslash", "a\\b"],
    ["NUL", "a\0b"],
    ["dot", "."],
    ["dot dot", ".."],
    ["dot dot padded", "  ..  "],
    ["empty", ""],
    ["whitespace only", " \t\n "],
  ];
  for (const [label, name] of rejected) test(`rejects ${label}`, () => expectBadName(() => validateVoiceName(name)));

  test("trims and keeps everything else", () => {
    expect(validateVoiceName("  Alice  ")).toBe("Alice");
    expect(validateVoiceName("...")).toBe("...");
    expect(validateVoiceName("a.b")).toBe("a.b");
    expect(validateVoiceName("Zoë 名前")).toBe("Zoë 名前");
  });

  test("the store applies it before touching the disk", async () => {
    const store = await openStore();
    await expect(store.saveAudio(audioInput("../escape"))).rejects.toBeInstanceOf(ApiError);
    await expect(store.saveEmbedding({ name: "a/b", consent: "c", embedding: Float32Array.of(1) })).rejects.toBeInstanceOf(ApiError);
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe("save, list, get", () => {
  test("saves audio and embeddings, looks names up case-insensitively, lists by created_at", async () => {
    const store = await openStore();
    const alice = await store.saveAudio(audioInput("  Alice ", { refText: "Hello there.", speakerDescription: "warm, low" }));
    const bob = await store.saveEmbedding({ name: "BOB", consent: "consent-2", embedding: Float32Array.of(0.5, -1, 2) });
    expect(alice).toEqual({
      name: "Alice",
      consent: "consent-1",
      created_at: alice.created_at,
      mime_type: "audio/wav",
      file_size: 4321,
      sample_rate: 24000,
      ref_text: "Hello there.",
      speaker_description: "warm, low",
      embedding_source: "audio",
    });
    expect(bob).toEqual({
      name: "BOB",
      consent: "consent-2",
      created_at: alice.created_at + 1,
      mime_type: "application/x-safetensors",
      // A direct embedding's file_size is its stored file's size: the smaller of the two files.
      file_size: Math.min(...voiceFiles().map((file) => statSync(join(dir, file)).size)),
      embedding_source: "direct",
      embedding_dim: 3,
    });
    expect(store.get("ALICE")).toEqual(alice);
    expect(store.get("bob")).toEqual(bob);
    expect(store.get("carol")).toBeUndefined();
    expect(store.list()).toEqual([alice, bob]);

    const audio = await store.loadAudio("alice");
    expect(audio).toEqual({ voice: alice, samples: audioInput("x").samples, sampleRateHz: 24000 });
    expect((await store.loadEmbedding("Bob"))!.embedding).toEqual(Float32Array.of(0.5, -1, 2));
    // Each loader answers only for its own kind of voice.
    expect(await store.loadAudio("bob")).toBeUndefined();
    expect(await store.loadEmbedding("alice")).toBeUndefined();
    expect(await store.loadAudio("nobody")).toBeUndefined();
  });

  test("file names are a hash of the lower-case name, never user text, and no server path is returned", async () => {
    const store = await openStore();
    const voice = await store.saveAudio(audioInput("Path Like Name"));
    const [file] = voiceFiles();
    expect(file).toMatch(/^[0-9a-f]{32}\.safetensors$/);
    expect(JSON.stringify(voice)).not.toContain(dir);
    await store.saveAudio(audioInput("PATH LIKE NAME"));
    expect(voiceFiles()).toEqual([file!]);
  });

  test("returned voices cannot be mutated behind the store's back", async () => {
    const store = await openStore();
    const voice = await store.saveAudio(audioInput("alice"));
    expect(() => {
      (voice as { consent: string }).consent = "forged";
    }).toThrow();
    expect(store.get("alice")!.consent).toBe("consent-1");
  });
});

describe("restart", () => {
  test("every field round-trips through the file header, with integers parsed back", async () => {
    const first = await openStore();
    await first.saveAudio(audioInput("Alice", { refText: 'Ünïcode "quotes"\nand a newline', speakerDescription: "bright" }));
    await first.saveAudio(audioInput("plain", { mimeType: "audio/flac", fileSizeBytes: 99, sampleRateHz: 16000 }));
    await first.saveEmbedding({ name: "Emb", consent: "c", embedding: Float32Array.from({ length: 1024 }, (_, index) => index / 1024) });
    const before = first.list();

    const { lines, logger } = capturingLogger();
    const second = await openStore(1000, logger);
    expect(second.list()).toEqual(before);
    expect(typeof second.get("alice")!.created_at).toBe("number");
    expect((await second.loadAudio("PLAIN"))!.sampleRateHz).toBe(16000);
    expect((await second.loadEmbedding("emb"))!.embedding.length).toBe(1024);
    expect(lines.map((line) => JSON.parse(line))).toContainEqual(expect.objectContaining({ level: "info", restored: 3, skipped: 0 }));
  });

  test("unreadable or invalid files are skipped with a warning naming only the file", async () => {
    const store = await openStore();
    await store.saveAudio(audioInput("good"));
    const [goodFile] = voiceFiles();
    writeFileSync(join(dir, "garbage.safetensors"), "not a safetensors file at all");
    const privateText = "my secret reference transcript";
    writeFileSync(
      join(dir, "bad-metadata.safetensors"),
      encodeSafetensors({ audio: { dtype: "F32", shape: [1], data: Float32Array.of(0) } }, { name: "x", consent: "c", created_at: "yesterday", mime_type: "audio/wav", ref_text: privateText, embedding_source: "audio" }),
    );
    // A valid voice under a file name that is not its hash (a copy): one name, one file.
    copyFileSync(join(dir, goodFile!), join(dir, "copy.safetensors"));
    writeFileSync(join(dir, "notes.txt"), "ignored: not a voice file");

    const { lines, logger } = capturingLogger();
    const reopened = await openStore(1000, logger);
    expect(reopened.list().map((voice) => voice.name)).toEqual(["good"]);
    const warnings = lines.map((line) => JSON.parse(line)).filter((entry) => entry.level === "warn");
    expect(warnings.map((warning) => warning.file).sort()).toEqual(["bad-metadata.safetensors", "copy.safetensors", "garbage.safetensors"]);
    expect(warnings.find((warning) => warning.file === "bad-metadata.safetensors").reason).toContain("'created_at' is not a non-negative integer");
    expect(warnings.find((warning) => warning.file === "copy.safetensors").reason).toContain("file name does not match");
    for (const line of lines) {
      expect(line).not.toContain(privateText);
      if (JSON.parse(line).level === "warn") expect(line).not.toContain(dir);
    }
  });

  test("leftover temp files from an interrupted save are removed on open", async () => {
    const store = await openStore();
    await store.saveAudio(audioInput("kept"));
    writeFileSync(join(dir, ".tmp-crashed-1234"), new Uint8Array(100));
    writeFileSync(join(dir, ".tmp-half.safetensors"), new Uint8Array(10));
    const { lines, logger } = capturingLogger();
    const reopened = await openStore(1000, logger);
    expect(tempFiles()).toEqual([]);
    expect(readdirSync(dir).some((file) => file.startsWith(".tmp"))).toBe(false);
    expect(reopened.list().map((voice) => voice.name)).toEqual(["kept"]);
    expect(lines.some((line) => JSON.parse(line).level === "warn")).toBe(false);
    expect(lines.map((line) => JSON.parse(line))).toContainEqual(expect.objectContaining({ removed_temp_files: 2 }));
  });

  test("a shared folder: a young temp file of another live process or host (a save in progress there) is kept; a dead process's, or an old one, is removed", async () => {
    const us = currentTempFileWriter();
    const otherHost = Buffer.from("another-replica").toString("hex");
    const inProgressHere = `.tmp-${us.hostHex}-${process.ppid}-a`;
    const inProgressElsewhere = `.tmp-${otherHost}-1-b`;
    const abandonedElsewhere = `.tmp-${otherHost}-1-c`;
    // A pid past the kernel's pid_max: no process has it.
    const deadHere = `.tmp-${us.hostHex}-4194305-d`;
    for (const name of [inProgressHere, inProgressElsewhere, abandonedElsewhere, deadHere]) writeFileSync(join(dir, name), new Uint8Array(10));
    const anHourAgo = new Date(Date.now() - 3_600_000);
    utimesSync(join(dir, abandonedElsewhere), anHourAgo, anHourAgo);
    await openStore();
    expect(tempFiles().sort()).toEqual([inProgressElsewhere, inProgressHere].sort());
  });

  test("created_at is strictly increasing within one second and keeps increasing after a restart", async () => {
    const store = await openStore();
    const stamps: number[] = [];
    for (let index = 0; index < 5; index++) stamps.push((await store.saveAudio(audioInput(`voice-${index}`))).created_at);
    for (let index = 1; index < stamps.length; index++) expect(stamps[index]!).toBeGreaterThan(stamps[index - 1]!);
    expect(stamps[0]!).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000) - 1);

    const reopened = await openStore();
    const after = await reopened.saveEmbedding({ name: "later", consent: "c", embedding: Float32Array.of(1) });
    expect(after.created_at).toBeGreaterThan(stamps.at(-1)!);
  });
});

describe("cap", () => {
  test("refuses a new name at the cap, allows re-uploading an existing one, and frees a slot on delete", async () => {
    const store = await openStore(2);
    await store.saveAudio(audioInput("a"));
    await store.saveEmbedding({ name: "b", consent: "c", embedding: Float32Array.of(1) });
    const refused = store.saveAudio(audioInput("c"));
    await expect(refused).rejects.toBeInstanceOf(ApiError);
    await expect(refused).rejects.toMatchObject({ status: 400, param: "name", message: "Uploaded voice limit reached (2). Delete a voice before adding another, or raise SPEAKER_MAX_UPLOADED." });
    expect(voiceFiles().length).toBe(2);

    await store.saveAudio(audioInput("A", { consent: "new-consent" }));
    expect(store.get("a")!.consent).toBe("new-consent");
    await store.saveEmbedding({ name: "B", consent: "c", embedding: Float32Array.of(2) });
    expect(store.list().length).toBe(2);

    expect(await store.delete("b")).toBe(true);
    await store.saveAudio(audioInput("c"));
    expect(store.list().map((voice) => voice.name)).toEqual(["A", "c"]);
  });
});

describe("re-upload", () => {
  test("replaces the voice in its one file and fires onEvict for the name", async () => {
    const store = await openStore();
    const evicted: string[] = [];
    store.onEvict((nameLower) => evicted.push(nameLower));
    const first = await store.saveAudio(audioInput("Alice"));
    expect(evicted).toEqual([]);
    const second = await store.saveEmbedding({ name: "ALICE", consent: "c2", embedding: Float32Array.of(3, 4) });
    expect(evicted).toEqual(["alice"]);
    expect(second.created_at).toBeGreaterThan(first.created_at);
    expect(voiceFiles().length).toBe(1);
    expect(store.list()).toEqual([second]);
    expect(await store.loadAudio("alice")).toBeUndefined();
    expect((await store.loadEmbedding("alice"))!.embedding).toEqual(Float32Array.of(3, 4));
  });

  test("a re-upload that fails on disk leaves the old voice intact", async () => {
    const store = await openStore();
    const original = await store.saveAudio(audioInput("alice", { refText: "original" }));
    const evicted: string[] = [];
    store.onEvict((nameLower) => evicted.push(nameLower));
    // Running as root defeats permission tricks; a vanished folder fails the temp-file open for anyone.
    const movedDir = `${dir}-moved`;
    renameSync(dir, movedDir);
    try {
      await expect(store.saveAudio(audioInput("ALICE", { refText: "replacement", samples: Float32Array.of(1, 2, 3) }))).rejects.toMatchObject({ status: 507, message: expect.stringContaining("ENOENT") });
    } finally {
      renameSync(movedDir, dir);
    }
    expect(evicted).toEqual([]);
    expect(store.get("alice")).toEqual(original);
    expect(tempFiles()).toEqual([]);
    expect((await store.loadAudio("alice"))!.samples).toEqual(audioInput("x").samples);
    // The queue keeps working after a failed mutation.
    expect((await store.saveAudio(audioInput("alice", { refText: "third" }))).ref_text).toBe("third");
  });

  test("parallel saves of one name leave exactly one voice, one file and no temp files", async () => {
    const store = await openStore();
    const evicted: string[] = [];
    store.onEvict((nameLower) => evicted.push(nameLower));
    const spellings = ["Same", "same", "SAME", "sAmE", "same "];
    const saved = await Promise.all(spellings.map((name, index) => store.saveAudio(audioInput(name, { consent: `consent-${index}` }))));
    for (let index = 1; index < saved.length; index++) expect(saved[index]!.created_at).toBeGreaterThan(saved[index - 1]!.created_at);
    expect(store.list()).toEqual([saved.at(-1)!]);
    expect(voiceFiles().length).toBe(1);
    expect(tempFiles()).toEqual([]);
    expect(evicted).toEqual(["same", "same", "same", "same"]);
    expect((await openStore()).list()).toEqual([saved.at(-1)!]);
  });

  test("50 parallel saves of different names write 50 files", async () => {
    const store = await openStore();
    const saved = await Promise.all(Array.from({ length: 50 }, (_, index) => store.saveAudio(audioInput(`voice-${index}`))));
    expect(new Set(saved.map((voice) => voice.created_at)).size).toBe(50);
    expect(voiceFiles().length).toBe(50);
    expect(tempFiles()).toEqual([]);
    expect((await openStore()).list()).toEqual(store.list());
  });
});

describe("delete", () => {
  test("removes the file, fires onEvict, and answers false for unknown names", async () => {
    const store = await openStore();
    const evicted: string[] = [];
    store.onEvict((nameLower) => evicted.push(nameLower));
    await store.saveAudio(audioInput("Alice"));
    await store.saveAudio(audioInput("bob"));
    expect(await store.delete("ALICE")).toBe(true);
    expect(evicted).toEqual(["alice"]);
    expect(store.get("alice")).toBeUndefined();
    expect(await store.loadAudio("alice")).toBeUndefined();
    expect(voiceFiles().length).toBe(1);
    expect(await store.delete("alice")).toBe(false);
    expect(await store.delete("nobody")).toBe(false);
    expect(evicted).toEqual(["alice"]);
    expect((await openStore()).list().map((voice) => voice.name)).toEqual(["bob"]);
  });

  test("a throwing onEvict listener is logged and does not break the store", async () => {
    const { lines, logger } = capturingLogger();
    const store = await openStore(1000, logger);
    store.onEvict(() => {
      throw new Error("cache exploded");
    });
    await store.saveAudio(audioInput("alice"));
    expect(await store.delete("alice")).toBe(true);
    expect(lines.map((line) => JSON.parse(line))).toContainEqual(expect.objectContaining({ level: "error", error: "cache exploded" }));
    expect(voiceFiles()).toEqual([]);
  });
});

/**
 * Versions 1 to 20, a save every 10 ms or so: each still lands in the middle of loads, but a load is not
 * overtaken by the 4 replacements in a row it gives up after (a voice replaced that often is broken, not
 * busy), as back-to-back saves did on a busy machine.
 */
async function saveVersionsPaced(saveVersion: (version: number) => Promise<unknown>): Promise<void> {
  for (let version = 1; version <= 20; version++) {
    await saveVersion(version);
    await Bun.sleep(10);
  }
}

describe("loading a voice whose file changed", () => {
  test("a file replaced by another server sharing the folder is read as its new version; a file removed there is a voice gone", async () => {
    const store = await openStore();
    await store.saveAudio(audioInput("alice"));
    const [aliceFile] = voiceFiles();
    const aliceBytes = readFileSync(join(dir, aliceFile!));
    // Another store over a copy of the folder writes a newer "alice" into the same file name.
    const otherDir = mkdtempSync(join(tmpdir(), "voxedge-voices-other-"));
    let replacement: StoredVoice;
    try {
      writeFileSync(join(otherDir, aliceFile!), aliceBytes);
      const other = await FolderVoiceStore.open({ dir: otherDir, maxVoices: 10, logger: silentLogger });
      replacement = await other.saveAudio(audioInput("alice", { samples: Float32Array.of(9) }));
      copyFileSync(join(otherDir, aliceFile!), join(dir, aliceFile!));
    } finally {
      rmSync(otherDir, { recursive: true, force: true });
    }
    const evicted: string[] = [];
    store.onEvict((nameLower) => evicted.push(nameLower));
    const loaded = await store.loadAudio("alice");
    expect(loaded!.samples).toEqual(Float32Array.of(9));
    expect(loaded!.voice.created_at).toBe(replacement!.created_at);
    expect(evicted).toEqual(["alice"]);
    unlinkSync(join(dir, aliceFile!));
    expect(await store.loadAudio("alice")).toBeUndefined();
    expect(store.get("alice")).toBeUndefined();
  });

  test("a load racing a re-upload returns one consistent voice", async () => {
    const store = await openStore();
    const samplesByCreatedAt = new Map<number, number>();
    const saveVersion = async (sample: number) => samplesByCreatedAt.set((await store.saveAudio(audioInput("alice", { samples: Float32Array.of(sample) }))).created_at, sample);
    await saveVersion(0);
    let saving = true;
    const saves = saveVersionsPaced(saveVersion).then(() => (saving = false));
    // Loaders keep reading while the file is replaced under them, so some reads land mid-rename.
    const loadUntilSaved = async () => {
      const seen = [];
      while (saving) seen.push(await store.loadAudio("alice"));
      return seen;
    };
    const loads = await Promise.all([loadUntilSaved(), loadUntilSaved(), loadUntilSaved(), saves]).then(([a, b, c]) => [...a, ...b, ...c]);
    expect(loads.length).toBeGreaterThan(20);
    for (const loaded of loads) {
      // Whatever version a load saw, its samples belong to the voice it reports.
      expect([...loaded!.samples]).toEqual([samplesByCreatedAt.get(loaded!.voice.created_at)!]);
    }
  });

  test("two stores over one folder (replicas): loads on one while the other replaces the voice return one consistent version, never a torn file", async () => {
    const writer = await openStore();
    const reader = await openStore();
    const samplesByCreatedAt = new Map<number, number>();
    const saveVersion = async (sample: number) => samplesByCreatedAt.set((await writer.saveAudio(audioInput("alice", { samples: new Float32Array(4000).fill(sample) }))).created_at, sample);
    await saveVersion(0);
    let saving = true;
    const saves = saveVersionsPaced(saveVersion).then(() => (saving = false));
    const loadUntilSaved = async () => {
      const seen = [];
      while (saving) {
        await reader.refreshName("alice");
        seen.push(await reader.loadAudio("alice"));
      }
      return seen;
    };
    const loads = await Promise.all([loadUntilSaved(), loadUntilSaved(), saves]).then(([a, b]) => [...a, ...b]);
    expect(loads.length).toBeGreaterThan(10);
    for (const loaded of loads) {
      const expected = samplesByCreatedAt.get(loaded!.voice.created_at)!;
      expect(loaded!.samples.length).toBe(4000);
      expect(loaded!.samples.every((sample) => sample === expected)).toBe(true);
    }
    await reader.refreshName("alice");
    expect(reader.get("alice")!.created_at).toBe(writer.get("alice")!.created_at);
  });

  test("a load racing a delete returns the voice or nothing, never an error", async () => {
    const store = await openStore();
    for (let round = 0; round < 20; round++) {
      await store.saveAudio(audioInput("alice"));
      let deleting = true;
      const deleted = store.delete("alice").finally(() => {
        deleting = false;
      });
      // Back-to-back loads overlap the unlink. Once one answers "no such voice" every later one must too,
      // and it settles without I/O: stop there, or the loop would spin on microtasks and starve the delete.
      let loaded;
      do {
        loaded = await store.loadAudio("alice");
        if (loaded !== undefined) expect(loaded.samples.length).toBe(2400);
      } while (deleting && loaded !== undefined);
      expect(await deleted).toBe(true);
      expect(await store.loadAudio("alice")).toBeUndefined();
    }
  });
});

describe("a folder that cannot be written", () => {
  async function expectFolderError(open: Promise<unknown>, folder: string, code: string) {
    const error = await open.then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(VoiceStoreFolderError);
    expect((error as Error).message).toContain(`voice store folder ${folder} cannot be used`);
    expect((error as Error).message).toContain(code);
  }

  test("refused at open when a part of its path is a file", async () => {
    writeFileSync(join(dir, "file"), "");
    const folder = join(dir, "file", "speakers");
    await expectFolderError(FolderVoiceStore.open({ dir: folder, maxVoices: 10, logger: silentLogger }), folder, "ENOTDIR");
  });

  test("refused at open when it exists but takes no new files, even for root", async () => {
    // procfs folders can be listed but never gain a file: the write probe is what notices.
    await expectFolderError(FolderVoiceStore.open({ dir: "/proc/self", maxVoices: 10, logger: silentLogger }), "/proc/self", "ENOENT");
  });

  test("replaced by a file after start: uploads are 507s naming the problem, the server keeps serving and recovers", async () => {
    const { lines, logger } = capturingLogger();
    const speakerDir = join(dir, "speakers");
    const { app, voices } = await testApp(new ToneModel(), { flags: { "speaker-dir": speakerDir } });
    const upload = (name: string) => {
      const form = new FormData();
      form.set("name", name);
      form.set("consent", "consent-1");
      form.set("audio_sample", wavFile());
      return app.request("/v1/audio/voices", { method: "POST", body: form });
    };
    expect((await upload("before")).status).toBe(200);

    // Permissions do not stop root; a file where the folder was stops everyone.
    rmSync(speakerDir, { recursive: true });
    writeFileSync(speakerDir, "");
    const refused = await upload("during");
    expect(refused.status).toBe(507);
    const body = (await refused.json()) as any;
    expect(body.error.type).toBe("server_error");
    expect(body.error.message).toContain("voice store folder");
    expect(body.error.message).toContain("ENOTDIR");
    expect(body.error.message).not.toContain(dir);
    const deleted = await app.request("/v1/audio/voices/before", { method: "DELETE" });
    expect(deleted.status).toBe(507);
    expect(((await deleted.json()) as any).error.message).toContain("voice store folder");
    const listed = (await (await app.request("/v1/audio/voices")).json()) as any;
    expect(listed.uploaded_voices.map((voice: { name: string }) => voice.name)).toEqual(["before"]);

    rmSync(speakerDir);
    mkdirSync(speakerDir);
    expect((await upload("after")).status).toBe(200);
    // The folder is what every replica reads: "before" went with the old folder.
    expect(voices.list().map((voice) => voice.name)).toEqual(["after"]);

    // The store's own logger names the folder for the operator.
    const store = await FolderVoiceStore.open({ dir: speakerDir, maxVoices: 10, logger });
    rmSync(speakerDir, { recursive: true });
    writeFileSync(speakerDir, "");
    await expect(store.saveAudio(audioInput("logged"))).rejects.toBeInstanceOf(ApiError);
    expect(lines.some((line) => line.includes("voice store folder failed") && line.includes(speakerDir))).toBe(true);
  });
});

describe("replicas on one folder", () => {
  test("16 concurrent uploaders through two stores with a cap of 20 store at most 20 voices, each (name, created_at) once", async () => {
    const replicas = [await openStore(20), await openStore(20)];
    const outcomes = await Promise.all(
      Array.from({ length: 16 }, async (_, uploader) => {
        const stored: StoredVoice[] = [];
        for (let upload = 0; upload < 3; upload++) {
          try {
            stored.push(await replicas[uploader % 2]!.saveAudio(audioInput(`voice-${uploader}-${upload}`)));
          } catch (error) {
            if (!(error instanceof ApiError) || error.status !== 400) throw error;
          }
        }
        return stored;
      }),
    );
    const acknowledged = outcomes.flat();
    expect(acknowledged.length).toBe(20);
    expect(voiceFiles().length).toBe(20);
    expect(new Set(acknowledged.map((voice) => voice.created_at)).size).toBe(20);
    expect(readdirSync(dir).filter((file) => !file.endsWith(".safetensors"))).toEqual([]);
  });

  test("a lock left by a process of this host that is gone is removed at open, and saves go on", async () => {
    writeFileSync(join(dir, ".voxedge-write.lock"), JSON.stringify({ host: (await import("node:os")).hostname(), pid: 2 ** 22 + 12345 }));
    const store = await openStore();
    expect(readdirSync(dir)).not.toContain(".voxedge-write.lock");
    await store.saveAudio(audioInput("after"));
    expect(voiceFiles().length).toBe(1);
  });
});

test("a nameless lock (its holder killed between creating and naming it) is stale after 2 s, not 30", async () => {
  const lock = join(dir, ".voxedge-write.lock");
  writeFileSync(lock, "");
  const old = new Date(Date.now() - 3000);
  utimesSync(lock, old, old);
  await openStore();
  expect(readdirSync(dir)).not.toContain(".voxedge-write.lock");
});
