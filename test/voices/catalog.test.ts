import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ApiError } from "../../src/api/errors.ts";
import { silentLogger } from "../../src/log/logger.ts";
import { builtInVoiceNamed, VoiceCatalog, type SpeakingModel } from "../../src/voices/catalog.ts";
import { RefAudioResolver } from "../../src/voices/ref-audio.ts";
import { FolderVoiceStore } from "../../src/voices/folder-store.ts";

const cloningModel: SpeakingModel = { modelId: "m", description: "test model", voices: ["alba", "marius"], defaultVoice: "alba", supportsCloning: true, nativeSampleRateHz: 24000 };
const fixedModel: SpeakingModel = { ...cloningModel, supportsCloning: false };

let dir: string;
let store: FolderVoiceStore;
beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "voxedge-catalog-"));
  store = await FolderVoiceStore.open({ dir, maxVoices: 100, logger: silentLogger });
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const signal = new AbortController().signal;
const everywhere = { uploads: true };
const resolver = new RefAudioResolver({ allowedDomains: [], allowedLocalMediaPath: undefined });
const catalogOf = (model: SpeakingModel, aliases: Record<string, string> = {}) => new VoiceCatalog(() => model, store, aliases, resolver);

async function upload(name: string) {
  return store.saveAudio({ name, consent: "c", mimeType: "audio/wav", fileSizeBytes: 10, samples: new Float32Array(2400).fill(0.1), sampleRateHz: 24000 });
}

async function refusal(promise: Promise<unknown>): Promise<ApiError> {
  const error = await promise.then(() => undefined, (caught: unknown) => caught);
  expect(error).toBeInstanceOf(ApiError);
  return error as ApiError;
}

describe("VoiceCatalog.resolve", () => {
  test("a built-in voice, 'default' and no name at all", async () => {
    const catalog = catalogOf(cloningModel);
    expect(await catalog.resolve({ name: " Marius " }, everywhere, signal)).toEqual({ kind: "built-in", name: "marius" });
    expect(await catalog.resolve({ name: "default" }, everywhere, signal)).toEqual({ kind: "built-in", name: "alba" });
    expect(await catalog.resolve({}, everywhere, signal)).toEqual({ kind: "built-in", name: "alba" });
  });

  test("an upload shadows the built-in voice of its name, but not where uploads are not served", async () => {
    await upload("Marius");
    const catalog = catalogOf(cloningModel);
    const resolved = await catalog.resolve({ name: "marius" }, everywhere, signal);
    expect(resolved.kind).toBe("uploaded");
    expect(await catalog.resolve({ name: "marius" }, { uploads: false }, signal)).toEqual({ kind: "built-in", name: "marius" });
  });

  test("an upload the model cannot speak keeps no built-in name from working, and is refused by name otherwise", async () => {
    await upload("marius");
    await upload("narrator");
    const catalog = catalogOf(fixedModel);
    expect(await catalog.resolve({ name: "marius" }, everywhere, signal)).toEqual({ kind: "built-in", name: "marius" });
    const error = await refusal(catalog.resolve({ name: "narrator" }, everywhere, signal));
    expect(error.status).toBe(400);
    expect(error.message).toContain("cannot clone voices");
  });

  test("an alias speaks with its target; OpenAI's names are the default voice; a broken alias is the table's fault (500)", async () => {
    const catalog = catalogOf(cloningModel, { narrator: "marius", ghost: "nobody" });
    expect(await catalog.resolve({ name: "Narrator" }, everywhere, signal)).toEqual({ kind: "built-in", name: "marius" });
    expect(await catalog.resolve({ name: "alloy" }, everywhere, signal)).toEqual({ kind: "built-in", name: "alba" });
    expect((await refusal(catalog.resolve({ name: "ghost" }, everywhere, signal))).status).toBe(500);
  });

  test("an unknown name is a 400 on `voice` that lists a few accepted names", async () => {
    const error = await refusal(catalogOf(cloningModel).resolve({ name: "nobody" }, everywhere, signal));
    expect(error.status).toBe(400);
    expect(error.param).toBe("voice");
    expect(error.message).toBe("Unknown voice 'nobody'. Accepted: default, alba, marius");
  });

  test("ref_text belongs to a clip or an upload, not a built-in voice; ref_audio needs a model that clones", async () => {
    expect((await refusal(catalogOf(cloningModel).resolve({ name: "alba", refText: "hi" }, everywhere, signal))).param).toBe("ref_text");
    expect((await refusal(catalogOf(fixedModel).resolve({ refAudio: "data:audio/wav;base64,AAAA" }, everywhere, signal))).param).toBe("ref_audio");
  });

  test("an upload's stored transcript stands unless the request gives a non-blank one", async () => {
    await store.saveAudio({ name: "kim", consent: "c", mimeType: "audio/wav", fileSizeBytes: 10, samples: new Float32Array(2400).fill(0.1), sampleRateHz: 24000, refText: "stored" });
    const catalog = catalogOf(cloningModel);
    expect(await catalog.resolve({ name: "kim", refText: "  " }, everywhere, signal)).toMatchObject({ kind: "uploaded", transcript: "stored" });
    expect(await catalog.resolve({ name: "kim", refText: "given" }, everywhere, signal)).toMatchObject({ kind: "uploaded", transcript: "given" });
  });
});

describe("VoiceCatalog.check, knows and list", () => {
  test("check throws what resolve would, and resolves for a good name", async () => {
    const catalog = catalogOf(cloningModel);
    await catalog.check("marius", everywhere);
    expect((await refusal(catalog.check("nobody", everywhere))).status).toBe(400);
  });

  test("knows every name that means something, speakable or not, and nothing else", async () => {
    await upload("narrator");
    const catalog = catalogOf(fixedModel, { storyteller: "marius" });
    for (const name of ["narrator", "ALBA", "default", "storyteller", "rachel"]) expect(await catalog.knows(name, everywhere)).toBe(true);
    expect(await catalog.knows("narrator", { uploads: false })).toBe(false);
    expect(await catalog.knows("nobody", everywhere)).toBe(false);
  });

  test("list gives the built-in voices and the served uploads, each with whether the model can speak it", async () => {
    await upload("narrator");
    expect(await catalogOf(cloningModel).list(everywhere)).toMatchObject({ builtIn: ["alba", "marius"], uploaded: [{ voice: { name: "narrator" }, speakable: true }] });
    expect(await catalogOf(fixedModel).list(everywhere)).toMatchObject({ uploaded: [{ speakable: false }] });
    expect((await catalogOf(cloningModel).list({ uploads: false })).uploaded).toEqual([]);
  });
});

describe("builtInVoiceNamed", () => {
  test("the page's rule is the server's: a voice, default, or an alias of one; undefined otherwise", () => {
    expect(builtInVoiceNamed("Marius", cloningModel)).toBe("marius");
    expect(builtInVoiceNamed(undefined, cloningModel)).toBe("alba");
    expect(builtInVoiceNamed("alloy", cloningModel)).toBe("alba");
    expect(builtInVoiceNamed("narrator", cloningModel, { narrator: "marius" })).toBe("marius");
    expect(builtInVoiceNamed("nobody", cloningModel)).toBeUndefined();
  });
});
