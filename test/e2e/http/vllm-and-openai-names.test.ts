/**
 * What vLLM-Omni and openai SDK clients send that only they send: vLLM's sampling fields at the top level
 * (accepted; temperature and seed applied, the rest named in X-Ignored-Fields), vLLM-Omni's `references`
 * (its list form of ref_audio/ref_text), and the SDK's dated speech model names.
 */
import { describe, expect, test } from "bun:test";
import { z } from "zod";
import { ToneModel } from "../../support/tone-model.ts";
import { testApp } from "../../support/server.ts";
import { sine } from "../../support/uploads.ts";
import { encodeWav } from "../../../src/audio/wav.ts";

type App = Awaited<ReturnType<typeof testApp>>["app"];

function speak(app: App, body: Record<string, unknown>) {
  return app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "hello there", response_format: "pcm", ...body }) });
}

const clip = `data:audio/wav;base64,${Buffer.from(encodeWav(sine(1.5, 300), 16000)).toString("base64")}`;

describe("the openai SDK's speech model names", () => {
  for (const model of ["tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-mini-tts-2025-12-15", "gpt-4o-mini-tts-2026-06-30"]) {
    test(`${model} is served by the model`, async () => {
      const { app } = await testApp(new ToneModel());
      expect((await speak(app, { model })).status).toBe(200);
    });
  }

  test("a model that is nobody's is still a 404 naming model; --model-aliases adds names beside the SDK's", async () => {
    const { app } = await testApp(new ToneModel(), { flags: { "model-aliases": "house-voice" } });
    const refused = await speak(app, { model: "gpt-5" });
    expect(refused.status).toBe(404);
    expect(((await refused.json()) as any).error.param).toBe("model");
    expect((await speak(app, { model: "house-voice" })).status).toBe(200);
    expect((await speak(app, { model: "tts-1" })).status).toBe(200);
    const listed = ((await (await app.request("/v1/models")).json()) as any).data.map((entry: any) => entry.id);
    expect(listed).toContain("gpt-4o-mini-tts-2025-12-15");
    expect(listed).toContain("house-voice");
  });
});

describe("vLLM's sampling fields", () => {
  test("accepted with any value; the ones no model here reads are named in X-Ignored-Fields", async () => {
    const { app } = await testApp(new ToneModel());
    const fields = { repetition_penalty: 1.05, top_p: 0.9, top_k: 50, min_p: 0.05, presence_penalty: 0, frequency_penalty: 0, max_tokens: 2048, stop: ["</s>"], ignore_eos: false };
    const response = await speak(app, fields);
    expect(response.status).toBe(200);
    expect(response.headers.get("x-ignored-fields")!.split(",").sort()).toEqual(Object.keys(fields).sort());
  });

  test("a misspelled field that is nobody's stays a 400 naming it", async () => {
    const { app } = await testApp(new ToneModel());
    const response = await speak(app, { voise: "alloy", top_p: 0.9 });
    expect(response.status).toBe(400);
    const body = (await response.json()) as any;
    expect(body.error.message).toContain("voise");
  });

  test("temperature is the model's sampling temperature, unless extra_params sets one; out of range is a 400 naming temperature", async () => {
    const adapter = new ToneModel({ paramsSchema: z.object({ temperature: z.number().optional() }) });
    const { app } = await testApp(adapter);
    const applied = await speak(app, { temperature: 0.4 });
    expect(applied.status).toBe(200);
    expect(applied.headers.get("x-ignored-fields")).toBeNull();
    expect(adapter.jobs.at(-1)!.extraParams.temperature).toBe(0.4);

    const overridden = await speak(app, { temperature: 0.4, extra_params: { temperature: 0.9 } });
    expect(overridden.status).toBe(200);
    expect(adapter.jobs.at(-1)!.extraParams.temperature).toBe(0.9);
    expect(overridden.headers.get("x-ignored-fields")).toBe("temperature");

    const refused = await speak(app, { temperature: 7 });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as any).error.param).toBe("temperature");
  });

  test("a model that reads no temperature names it ignored", async () => {
    const { app } = await testApp(new ToneModel({ paramsSchema: z.object({}) }));
    const response = await speak(app, { temperature: 0.5 });
    expect(response.status).toBe(200);
    expect(response.headers.get("x-ignored-fields")).toBe("temperature");
  });
});

describe("vLLM-Omni's references", () => {
  test("[{audio_path, text}] is ref_audio and ref_text: the same clip is encoded, with the same transcript", async () => {
    const adapter = new ToneModel({ cloning: true });
    const { app } = await testApp(adapter);
    const response = await speak(app, { references: [{ audio_path: clip, text: "the words in the clip" }] });
    expect(response.status).toBe(200);
    expect(adapter.encodedReferences).toHaveLength(1);
    expect(adapter.encodedReferences[0]!.transcript).toBe("the words in the clip");
    const direct = await speak(app, { ref_audio: clip, ref_text: "the words in the clip" });
    expect(direct.status).toBe(200);
    // The same clip and transcript: the cached prompt serves both.
    expect(adapter.encodedReferences).toHaveLength(1);
  });

  test("validated as ref_audio is: a clip that does not decode is a 400 before any audio", async () => {
    const { app } = await testApp(new ToneModel({ cloning: true }));
    const response = await speak(app, { references: [{ audio_path: "data:audio/wav;base64,AAAA" }] });
    expect(response.status).toBe(400);
    expect(((await response.json()) as any).error.param).toBe("ref_audio");
  });

  test("bad shapes and a conflict with ref_audio are 400s naming references; a second entry is named ignored", async () => {
    const adapter = new ToneModel({ cloning: true });
    const { app } = await testApp(adapter);
    for (const references of [[], "clip", [{ text: "no audio" }], [{ audio_path: clip, volume: 1 }]]) {
      const response = await speak(app, { references });
      expect(response.status).toBe(400);
      expect(((await response.json()) as any).error.param).toMatch(/^references/);
    }
    const conflict = await speak(app, { references: [{ audio_path: clip }], ref_audio: "data:audio/wav;base64,BBBB" });
    expect(conflict.status).toBe(400);
    expect(((await conflict.json()) as any).error.param).toBe("references");
    const two = await speak(app, { references: [{ audio_path: clip }, { audio_path: clip }] });
    expect(two.status).toBe(200);
    expect(two.headers.get("x-ignored-fields")).toBe("references.1");
  });
});
