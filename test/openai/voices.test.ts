import { describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { ToneModel } from "../support/tone-model.ts";
import { testApp } from "../support/server.ts";
import { multipartBody, sine, wavFile } from "../support/uploads.ts";
import { encodeAudio } from "../../src/audio/encoders.ts";
import { muxWebmLikeABrowser } from "../support/browser-recording.ts";
import { decodedSecondsInRefusal, referenceBombs } from "../support/audio-bombs.ts";
import { VOICE_PROMPT_CACHE_BYTES } from "../../src/speech/voice-prompts.ts";

type App = Awaited<ReturnType<typeof testApp>>["app"];

async function upload(app: App, fields: Record<string, string | File>) {
  const { body, contentType } = await multipartBody(fields);
  const response = await app.request("/v1/audio/voices", { method: "POST", headers: { "content-type": contentType }, body });
  return { status: response.status, body: (await response.json()) as any };
}

async function speak(app: App, body: Record<string, unknown>) {
  return app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "hello there", response_format: "pcm", ...body }) });
}

describe("voice upload, list, delete", () => {
  test("upload → list → delete, names case-insensitive, no server paths", async () => {
    const { app, config } = await testApp(new ToneModel());
    const uploaded = await upload(app, { name: "  Alice  ", consent: "rec-1", audio_sample: wavFile(), ref_text: "  hello  ", speaker_description: "   " });
    expect(uploaded.status).toBe(200);
    expect(uploaded.body.success).toBe(true);
    expect(uploaded.body.voice).toMatchObject({ name: "Alice", consent: "rec-1", mime_type: "audio/wav", sample_rate: 16000, ref_text: "hello", embedding_source: "audio" });
    expect(uploaded.body.voice.speaker_description).toBeUndefined();
    expect(uploaded.body.voice.file_size).toBe(wavFile().size);

    const list = (await (await app.request("/v1/audio/voices")).json()) as any;
    expect(list.voices).toEqual(["alice", "high", "low"]);
    expect(list.uploaded_voices).toHaveLength(1);
    expect(JSON.stringify(list)).not.toContain(config.speakerDir);

    const deleted = await app.request("/v1/audio/voices/ALICE", { method: "DELETE" });
    expect(await deleted.json()).toEqual({ success: true, name: "ALICE", message: "Voice 'ALICE' deleted" });
    expect(readdirSync(config.speakerDir).filter((file) => file.endsWith(".safetensors"))).toHaveLength(0);
    const again = await app.request("/v1/audio/voices/alice", { method: "DELETE" });
    expect(again.status).toBe(404);
    expect(((await again.json()) as any).error.type).toBe("NotFoundError");
  });

  test("created_at is strictly increasing; re-upload replaces the voice", async () => {
    const { app, config } = await testApp(new ToneModel());
    const times: number[] = [];
    for (const name of ["a", "b", "c", "A"]) times.push((await upload(app, { name, consent: "c", audio_sample: wavFile() })).body.voice.created_at);
    for (let i = 1; i < times.length; i++) expect(times[i]!).toBeGreaterThan(times[i - 1]!);
    const list = (await (await app.request("/v1/audio/voices")).json()) as any;
    expect(list.uploaded_voices.map((voice: any) => voice.name)).toEqual(["b", "c", "A"]);
    expect(readdirSync(config.speakerDir).filter((file) => file.endsWith(".safetensors"))).toHaveLength(3);
  });

  test("browser recordings: webm/opus as MediaRecorder makes it, and octet-stream guessed by extension", async () => {
    const { app } = await testApp(new ToneModel());
    const oggOpus = await encodeAudio(sine(2, 300, 48000), 48000, "opus");
    const webm = await muxWebmLikeABrowser(oggOpus);
    const fromBrowser = await upload(app, { name: "recorded", consent: "c", audio_sample: new File([webm as Uint8Array<ArrayBuffer>], "blob", { type: "audio/webm;codecs=opus" }) });
    expect(fromBrowser.status).toBe(200);
    expect(fromBrowser.body.voice).toMatchObject({ mime_type: "audio/webm", sample_rate: 48000 });
    const guessed = await upload(app, { name: "guessed", consent: "c", audio_sample: new File([oggOpus as Uint8Array<ArrayBuffer>], "clip.ogg", { type: "application/octet-stream" }) });
    expect(guessed.body.voice.mime_type).toBe("audio/ogg");
  });

  const badUploads: [string, Record<string, string | File>, string, string][] = [
    ["traversal ../x", { name: "../x", consent: "c", audio_sample: wavFile() }, "name", "name"],
    ["slash", { name: "a/b", consent: "c", audio_sample: wavFile() }, "name", "name"],
    ["backslash", { name: "a\\b", consent: "c", audio_sample: wavFile() }, "name", "name"],
    ["NUL", { name: "a\u0000b", consent: "c", audio_sample: wavFile() }, "name", "name"],
    ["dot", { name: ".", consent: "c", audio_sample: wavFile() }, "name", "name"],
    ["empty name", { name: "  ", consent: "c", audio_sample: wavFile() }, "name", "name"],
    ["missing consent", { name: "x", audio_sample: wavFile() }, "consent", "consent"],
    ["both audio and embedding", { name: "x", consent: "c", audio_sample: wavFile(), speaker_embedding: "[1,2,3,4]" }, "speaker_embedding", "exactly one"],
    ["neither audio nor embedding", { name: "x", consent: "c" }, "audio_sample", "exactly one"],
    ["wrong MIME", { name: "x", consent: "c", audio_sample: wavFile(2, 300, "notes.txt", "text/plain") }, "audio_sample", "MIME"],
    ["undecodable bytes", { name: "x", consent: "c", audio_sample: new File([new Uint8Array(5000).fill(7)], "x.wav", { type: "audio/wav" }) }, "audio_sample", "decoded"],
    ["0.5 s clip", { name: "x", consent: "c", audio_sample: wavFile(0.5) }, "audio_sample", "1–30 s"],
    ["31 s clip", { name: "x", consent: "c", audio_sample: wavFile(31) }, "audio_sample", "1–30 s"],
    ["129-character name", { name: "n".repeat(129), consent: "c", audio_sample: wavFile() }, "name", "at most 128"],
    ["257-character consent", { name: "x", consent: "c".repeat(257), audio_sample: wavFile() }, "consent", "at most 256"],
    ["4097-character ref_text", { name: "x", consent: "c", audio_sample: wavFile(), ref_text: "r".repeat(4097) }, "ref_text", "at most 4096"],
    ["1001-character speaker_description", { name: "x", consent: "c", audio_sample: wavFile(), speaker_description: "d".repeat(1001) }, "speaker_description", "at most 1000"],
  ];
  for (const [label, fields, param, message] of badUploads) {
    test(`bad upload → 400: ${label}`, async () => {
      const { app, config } = await testApp(new ToneModel({ speakerEmbeddingDims: [4] }));
      const { status, body } = await upload(app, fields);
      expect(status).toBe(400);
      expect(body.error.param).toBe(param);
      expect(body.error.message).toContain(message);
      expect(readdirSync(config.speakerDir)).toHaveLength(0);
    });
  }

  test("speaker embeddings: validated like the reference, and refused by models that take none", async () => {
    const { app } = await testApp(new ToneModel({ speakerEmbeddingDims: [4] }));
    const cases: [string, string][] = [
      ["not json", "valid JSON"],
      ['{"a":1}', "non-empty"],
      ["[]", "non-empty"],
      ["[1,2,\"x\",4]", "only numbers"],
      ["[1,2,1e999,4]", "finite"],
      [JSON.stringify(new Array(4097).fill(0.1)), "4096"],
      ["[1,2,3]", "accepts 4"],
    ];
    for (const [embedding, message] of cases) {
      const { status, body } = await upload(app, { name: "e", consent: "c", speaker_embedding: embedding });
      expect(status).toBe(400);
      expect(body.error.message).toContain(message);
    }
    const ok = await upload(app, { name: "e", consent: "c", speaker_embedding: "[0.1,0.2,0.3,0.4]" });
    expect(ok.body.voice).toMatchObject({ embedding_source: "direct", embedding_dim: 4, mime_type: "application/x-safetensors" });

    const { app: noEmbeddings } = await testApp(new ToneModel());
    const refused = await upload(noEmbeddings, { name: "e", consent: "c", speaker_embedding: "[0.1,0.2,0.3,0.4]" });
    expect(refused.status).toBe(400);
    expect(refused.body.error.message).toContain("upload audio_sample instead");
  });

  test("the voice cap is enforced and named; re-uploading an existing name at the cap is allowed", async () => {
    const { app } = await testApp(new ToneModel(), { flags: { "max-uploaded-voices": "2" } });
    await upload(app, { name: "one", consent: "c", audio_sample: wavFile() });
    await upload(app, { name: "two", consent: "c", audio_sample: wavFile() });
    const third = await upload(app, { name: "three", consent: "c", audio_sample: wavFile() });
    expect(third.status).toBe(400);
    expect(third.body.error.message).toContain("limit reached (2)");
    expect((await upload(app, { name: "TWO", consent: "c", audio_sample: wavFile() })).status).toBe(200);
  });

  test("an 11 MB upload is refused after reading at most the cap plus a small margin", async () => {
    const { app } = await testApp(new ToneModel());
    const boundary = "----voxedge-test-boundary";
    const head = new TextEncoder().encode(`--${boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\nbig\r\n--${boundary}\r\nContent-Disposition: form-data; name="consent"\r\n\r\nc\r\n--${boundary}\r\nContent-Disposition: form-data; name="audio_sample"; filename="big.wav"\r\nContent-Type: audio/wav\r\n\r\n`);
    const totalBytes = 11 * 1024 * 1024;
    let pulledBytes = 0;
    const chunk = new Uint8Array(64 * 1024);
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (pulledBytes === 0) {
          pulledBytes += head.byteLength;
          controller.enqueue(head);
        } else if (pulledBytes < totalBytes) {
          pulledBytes += chunk.byteLength;
          controller.enqueue(chunk);
        } else {
          controller.close();
        }
      },
    });
    // No Content-Length: the cap must hold while streaming, not only on a declared size.
    const response = await app.request("/v1/audio/voices", { method: "POST", headers: { "content-type": `multipart/form-data; boundary=${boundary}` }, body, duplex: "half" } as RequestInit);
    expect(response.status).toBe(400);
    expect(((await response.json()) as any).error.message).toContain("10 MB");
    const capBytes = 10 * 1024 * 1024 + 256 * 1024;
    expect(pulledBytes).toBeLessThanOrEqual(capBytes + 2 * chunk.byteLength);

    const declared = await app.request("/v1/audio/voices", { method: "POST", headers: { "content-type": `multipart/form-data; boundary=${boundary}`, "content-length": String(totalBytes) }, body: new Uint8Array(16) });
    expect(declared.status).toBe(400);
  });

  test("a 10 MB name is refused without storing anything; 128 characters is the longest name", async () => {
    const { app, config } = await testApp(new ToneModel());
    const huge = await upload(app, { name: "n".repeat(10_000_000), consent: "c", audio_sample: wavFile() });
    expect(huge.status).toBe(400);
    expect(huge.body.error.param).toBe("name");
    expect(huge.body.error.message.length).toBeLessThan(200);
    expect(readdirSync(config.speakerDir)).toHaveLength(0);

    const longest = "n".repeat(128);
    const accepted = await upload(app, { name: longest, consent: "c".repeat(256), audio_sample: wavFile(), ref_text: "r".repeat(4096), speaker_description: "d".repeat(1000) });
    expect(accepted.status).toBe(200);
    expect(accepted.body.voice.name).toBe(longest);
    const list = (await (await app.request("/v1/audio/voices")).json()) as any;
    expect(list.uploaded_voices.map((voice: any) => voice.name)).toEqual([longest]);
  });

  test("uploads need multipart", async () => {
    const { app } = await testApp(new ToneModel());
    const response = await app.request("/v1/audio/voices", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(response.status).toBe(415);
  });
});

describe("uploaded voices in speech requests", () => {
  test("a model without cloning answers 400 for an uploaded voice", async () => {
    const { app } = await testApp(new ToneModel());
    await upload(app, { name: "mine", consent: "c", audio_sample: wavFile() });
    const response = await speak(app, { voice: "mine" });
    expect(response.status).toBe(400);
    const body = (await response.json()) as any;
    expect(body.error.param).toBe("voice");
    expect(body.error.message).toContain("cannot clone");
  });

  test("the uploaded audio becomes the reference, with its stored ref_text; the prompt is cached per (name, created_at)", async () => {
    const adapter = new ToneModel({ cloning: true });
    const { app, service } = await testApp(adapter);
    await upload(app, { name: "Mine", consent: "c", audio_sample: wavFile(2, 300), ref_text: "stored words" });
    const first = await speak(app, { voice: "mine" });
    expect(first.status).toBe(200);
    expect(first.headers.get("x-input-audio-tokens")).toBe(String(Math.ceil(2 * 12.5)));
    await speak(app, { voice: { id: "MINE" } });
    expect(adapter.encodedReferences).toHaveLength(1);
    const reference = adapter.encodedReferences[0]!;
    expect(reference.sampleRateHz).toBe(24000);
    expect(reference.samples.length).toBe(48000);
    expect(reference.transcript).toBe("stored words");
    expect(service.cachedVoicePrompts).toBe(1);

    // Delete + re-upload with other audio: the new audio is encoded and used, never the stale prompt.
    await app.request("/v1/audio/voices/mine", { method: "DELETE" });
    expect(service.cachedVoicePrompts).toBe(0);
    await upload(app, { name: "mine", consent: "c", audio_sample: wavFile(2, 500) });
    await speak(app, { voice: "mine" });
    expect(adapter.encodedReferences).toHaveLength(2);
    expect(Math.abs((adapter.jobs.at(-1)!.voicePrompt!.state as any).frequencyHz - 500)).toBeLessThan(10);
  });

  test("cached prompts are bounded by bytes: voices whose prompts are large keep only the last ones used", async () => {
    const adapter = new ToneModel({ cloning: true });
    const encode = adapter.encodeVoice!.bind(adapter);
    // Each prompt claims 40 % of the cache's bytes: two fit, a third evicts the least recently used.
    adapter.encodeVoice = async (reference, signal) => ({ ...(await encode(reference, signal)), byteSize: Math.floor(VOICE_PROMPT_CACHE_BYTES * 0.4) });
    const { app, service } = await testApp(adapter);
    for (const name of ["one", "two", "three"]) await upload(app, { name, consent: "c", audio_sample: wavFile(1, 300) });
    for (const name of ["one", "two"]) expect((await speak(app, { voice: name })).status).toBe(200);
    expect(service.cachedVoicePrompts).toBe(2);
    expect(service.cachedVoicePromptBytes).toBe(2 * Math.floor(VOICE_PROMPT_CACHE_BYTES * 0.4));
    expect((await speak(app, { voice: "one" })).status).toBe(200);
    expect((await speak(app, { voice: "three" })).status).toBe(200);
    expect(service.cachedVoicePrompts).toBe(2);
    expect(service.cachedVoicePromptBytes).toBeLessThanOrEqual(VOICE_PROMPT_CACHE_BYTES);
    expect(adapter.encodedReferences).toHaveLength(3);
    // "two" was evicted (used least recently), "one" was not.
    expect((await speak(app, { voice: "one" })).status).toBe(200);
    expect(adapter.encodedReferences).toHaveLength(3);
    expect((await speak(app, { voice: "two" })).status).toBe(200);
    expect(adapter.encodedReferences).toHaveLength(4);
  });

  test("ref_text overrides an uploaded voice's stored transcript for that request; without it (or blank) the stored one is used", async () => {
    const adapter = new ToneModel({ cloning: true });
    const { app, service } = await testApp(adapter);
    await upload(app, { name: "Mine", consent: "c", audio_sample: wavFile(2, 300), ref_text: "stored words" });
    await upload(app, { name: "plain", consent: "c", audio_sample: wavFile(2, 300) });
    const transcriptHeard = async (body: Record<string, unknown>) => {
      const response = await speak(app, body);
      expect(response.status).toBe(200);
      return (adapter.jobs.at(-1)!.voicePrompt!.state as any).reference.transcript as string | undefined;
    };
    expect(await transcriptHeard({ voice: "mine", ref_text: "  spoken words  " })).toBe("spoken words");
    expect(adapter.encodedReferences.at(-1)!.transcript).toBe("spoken words");
    expect(await transcriptHeard({ voice: "mine" })).toBe("stored words");
    expect(await transcriptHeard({ voice: "mine", ref_text: "   " })).toBe("stored words");
    expect(await transcriptHeard({ voice: "mine", ref_text: null })).toBe("stored words");
    expect(await transcriptHeard({ voice: "MINE", ref_text: "spoken words" })).toBe("spoken words");
    expect(await transcriptHeard({ voice: "plain", ref_text: "only here" })).toBe("only here");
    expect(await transcriptHeard({ voice: "plain" })).toBeUndefined();
    // One prompt per (voice, transcript): the override never replaces the stored one for later requests.
    expect(adapter.encodedReferences.map((reference) => reference.transcript)).toEqual(["spoken words", "stored words", "only here", undefined]);
    expect(service.cachedVoicePrompts).toBe(4);

    const builtIn = await speak(app, { voice: "low", ref_text: "words" });
    expect(builtIn.status).toBe(400);
    expect(((await builtIn.json()) as any).error.param).toBe("ref_text");
  });

  test("an unknown voice among a thousand uploaded ones: a short error naming a few and counting the rest", async () => {
    const { app, voices } = await testApp(new ToneModel({ cloning: true }));
    const samples = new Float32Array(16000);
    for (let index = 0; index < 1000; index++) {
      await voices.saveAudio({ name: `${String(index).padStart(4, "0")}${"v".repeat(124)}`, consent: "c", mimeType: "audio/wav", fileSizeBytes: 1, samples, sampleRateHz: 16000 });
    }
    const response = await speak(app, { voice: "ghost" });
    const body = (await response.json()) as any;
    expect(response.status).toBe(400);
    expect(body.error.param).toBe("voice");
    expect(JSON.stringify(body).length).toBeLessThan(2048);
    expect(body.error.message).toContain("default, low, high, 0000v");
    expect(body.error.message).toContain("and 993 more");
    // A thousand saves, each fsynced: seconds on a busy disk.
  }, 60_000);

  test("unknown voices list built-in and uploaded names", async () => {
    const { app } = await testApp(new ToneModel({ cloning: true }));
    await upload(app, { name: "Mine", consent: "c", audio_sample: wavFile() });
    const body = (await (await speak(app, { voice: "ghost" })).json()) as any;
    expect(body.error.message).toContain("low, high, Mine");
  });
});

describe("what a voice name means: uploads shadow built-in voices, OpenAI's names are aliases", () => {
  const listedVoices = async (app: App) => ((await (await app.request("/v1/audio/voices")).json()) as any).voices;
  const toneOf = (adapter: ToneModel) => (adapter.jobs.at(-1)!.voicePrompt?.state as any)?.frequencyHz as number | undefined;

  test("voices is sorted and lower-case, one name for an upload and the built-in voice it shadows", async () => {
    const { app } = await testApp(new ToneModel({ cloning: true }));
    await upload(app, { name: "Zed", consent: "c", audio_sample: wavFile() });
    await upload(app, { name: "LOW", consent: "c", audio_sample: wavFile() });
    await upload(app, { name: "bob", consent: "c", audio_sample: wavFile() });
    expect(await listedVoices(app)).toEqual(["bob", "high", "low", "zed"]);
  });

  test("an uploaded voice shadows the built-in voice of its name; deleting it brings the built-in back", async () => {
    const adapter = new ToneModel({ cloning: true });
    const { app } = await testApp(adapter);
    await upload(app, { name: "High", consent: "c", audio_sample: wavFile(2, 300) });
    expect((await speak(app, { voice: "HIGH" })).status).toBe(200);
    expect(Math.abs(toneOf(adapter)! - 300)).toBeLessThan(10);

    const deleted = await app.request("/v1/audio/voices/high", { method: "DELETE" });
    expect(await deleted.json()).toEqual({ success: true, name: "high", message: "Voice 'high' deleted" });
    expect((await speak(app, { voice: "high" })).status).toBe(200);
    expect(adapter.jobs.at(-1)).toMatchObject({ voice: "high", voicePrompt: undefined });
  });

  test('an uploaded voice named "default" is what "default", null and no voice mean, until it is deleted; only on a model that can speak it', async () => {
    const adapter = new ToneModel({ cloning: true });
    const { app } = await testApp(adapter);
    await upload(app, { name: "Default", consent: "c", audio_sample: wavFile(2, 300) });
    for (const voice of [{ voice: "default" }, { voice: null }, {}, { voice: { id: "DEFAULT" } }]) {
      const response = await speak(app, voice);
      expect(response.status).toBe(200);
      expect(Math.abs(toneOf(adapter)! - 300)).toBeLessThan(10);
    }
    await app.request("/v1/audio/voices/default", { method: "DELETE" });
    expect((await speak(app, { voice: "default" })).status).toBe(200);
    expect(adapter.jobs.at(-1)).toMatchObject({ voice: "low", voicePrompt: undefined });

    // On a model that cannot clone, an upload never takes the name from a built-in voice that works.
    const plain = new ToneModel();
    const { app: plainApp } = await testApp(plain);
    await upload(plainApp, { name: "high", consent: "c", audio_sample: wavFile() });
    await upload(plainApp, { name: "default", consent: "c", audio_sample: wavFile() });
    expect((await speak(plainApp, { voice: "high" })).status).toBe(200);
    expect(plain.jobs.at(-1)!.voice).toBe("high");
    expect((await speak(plainApp, {})).status).toBe(200);
    expect(plain.jobs.at(-1)!.voice).toBe("low");
  });

  const openAiVoices = ["alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse", "marin", "cedar"];

  test("each of OpenAI's thirteen voice names speaks, by default with the model's default voice", async () => {
    const adapter = new ToneModel();
    const { app } = await testApp(adapter);
    for (const voice of openAiVoices) {
      const response = await speak(app, { voice: voice.toUpperCase() });
      expect(response.status).toBe(200);
      expect(adapter.jobs.at(-1)!.voice).toBe("low");
    }
  });

  test("--voice-aliases maps OpenAI names to voices; a name the model or an upload has keeps its own meaning", async () => {
    const adapter = new ToneModel({ cloning: true, voices: ["low", "high", "echo"] });
    const { app } = await testApp(adapter, { flags: { "voice-aliases": "alloy=HIGH, echo=high, nova=fresh" } });
    await upload(app, { name: "fresh", consent: "c", audio_sample: wavFile(2, 300) });
    await upload(app, { name: "Onyx", consent: "c", audio_sample: wavFile(2, 500) });
    const spoken = async (voice: string) => {
      expect((await speak(app, { voice })).status).toBe(200);
      return adapter.jobs.at(-1)!.voicePrompt ? `tone ${Math.round(toneOf(adapter)! / 100) * 100}` : adapter.jobs.at(-1)!.voice;
    };
    expect(await spoken("alloy")).toBe("high");
    expect(await spoken("echo")).toBe("echo");
    expect(await spoken("nova")).toBe("tone 300");
    expect(await spoken("onyx")).toBe("tone 500");
    expect(await spoken("sage")).toBe("low");
  });

  test("--voice-aliases takes any name or id; ElevenLabs' premade ids and names speak too, by default with the default voice", async () => {
    const adapter = new ToneModel();
    const { app } = await testApp(adapter, { flags: { "voice-aliases": "Narrator=high,21m00Tcm4TlvDq8ikWAM=high" } });
    const spoken = async (voice: string) => {
      expect((await speak(app, { voice })).status).toBe(200);
      return adapter.jobs.at(-1)!.voice;
    };
    expect(await spoken("narrator")).toBe("high");
    expect(await spoken("21m00Tcm4TlvDq8ikWAM")).toBe("high");
    expect(await spoken("Rachel")).toBe("high");
    expect(await spoken("9BWtsMINqrJLrRacOk9x")).toBe("low");
    expect(await spoken("sarah")).toBe("low");
    expect((await speak(app, { voice: "constructor" })).status).toBe(400);
  });

  test("on a model with no built-in voices, OpenAI's names speak with the uploaded default voice", async () => {
    const adapter = new ToneModel({ cloning: true, voices: [] });
    const { app } = await testApp(adapter);
    const before = await speak(app, { voice: "alloy" });
    expect(before.status).toBe(400);
    expect(((await before.json()) as any).error.message).toContain("Upload a voice");
    await upload(app, { name: "default", consent: "c", audio_sample: wavFile(2, 300) });
    expect((await speak(app, { voice: "alloy" })).status).toBe(200);
    expect(Math.abs(toneOf(adapter)! - 300)).toBeLessThan(10);
  });

  test("an alias to a voice the model lacks is a server error naming --voice-aliases, before any audio", async () => {
    const adapter = new ToneModel();
    const { app } = await testApp(adapter, { flags: { "voice-aliases": "alloy=ghost" } });
    const response = await speak(app, { voice: "alloy", stream: true });
    expect(response.status).toBe(500);
    expect(((await response.json()) as any).error).toMatchObject({ type: "server_error", param: "voice" });
    expect(adapter.jobs).toHaveLength(0);
  });
});

describe("decompression bombs uploaded as audio_sample", () => {
  const bombs = referenceBombs();
  for (const bomb of bombs) {
    test(`400 naming the 30 s limit, decoded no further than ~30 s, nothing stored: ${bomb.label} (${bomb.bytes.length} bytes)`, async () => {
      const { app, config } = await testApp(new ToneModel());
      const { status, body } = await upload(app, { name: "bomb", consent: "c", audio_sample: new File([bomb.bytes as Uint8Array<ArrayBuffer>], "bomb.bin", { type: "application/octet-stream" }) });
      expect(status).toBe(400);
      expect(body.error.param).toBe("audio_sample");
      expect(body.error.message).toContain("audio_sample is longer than the 30 s limit");
      const decodedSeconds = decodedSecondsInRefusal(body.error.message);
      if (bomb.stopsWhileDecoding) expect(decodedSeconds).toBeLessThan(90);
      else expect(decodedSeconds).toBeUndefined();
      expect(readdirSync(config.speakerDir)).toHaveLength(0);
    });
  }
});
