import { expect, test } from "bun:test";
import { ToneModel } from "../support/tone-model.ts";
import { testApp } from "../support/server.ts";
import { decodeWithFfmpeg } from "../support/ffmpeg.ts";
import { createClassicModel } from "../../src/models/classic/model.ts";

async function postBatch(app: Awaited<ReturnType<typeof testApp>>["app"], body: unknown) {
  const response = await app.request("/v1/audio/speech/batch", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as any };
}

test("batch defaults apply, item values win, one bad item fails alone", async () => {
  const adapter = new ToneModel();
  const { app } = await testApp(adapter);
  const { status, body } = await postBatch(app, {
    response_format: "mp3",
    voice: "high",
    items: [{ input: "first item here" }, { input: "second", response_format: "wav", voice: "low" }, { input: "third", voice: "ghost" }, { input: "", seed: 1 }, { input: "x", colour: 1 }, 42],
  });
  expect(status).toBe(200);
  expect(body.id).toStartWith("speech-batch-");
  expect(body.total).toBe(6);
  expect(body.succeeded).toBe(2);
  expect(body.failed).toBe(4);
  expect(body.results.map((result: any) => result.index)).toEqual([0, 1, 2, 3, 4, 5]);
  const [first, second, ghost, empty, unknownField, notObject] = body.results;
  expect(first.media_type).toBe("audio/mpeg");
  expect(decodeWithFfmpeg(Buffer.from(first.audio_data, "base64")).codec).toBe("mp3");
  expect(first.usage.output_tokens).toBe(Math.round("first item here".length * 0.5));
  expect(second.media_type).toBe("audio/wav");
  expect(ghost).toMatchObject({ status: "error" });
  expect(ghost.error).toContain("ghost");
  expect(empty.error).toContain("empty");
  expect(unknownField.error).toContain("colour");
  expect(notObject.error).toContain("object");
  // Voices: the batch default `high` for item 0, the item's own `low` for item 1.
  expect(adapter.jobs.map((job) => job.voice)).toEqual(["high", "low"]);
});

test("batch limits and batch-level errors are 400s", async () => {
  const { app } = await testApp(new ToneModel(), { flags: { "batch-max-items": "3" } });
  const tooMany = await postBatch(app, { items: [{ input: "a" }, { input: "b" }, { input: "c" }, { input: "d" }] });
  expect(tooMany.status).toBe(400);
  expect(tooMany.body.error.param).toBe("items");
  expect(tooMany.body.error.message).toContain("maximum of 3");
  expect((await postBatch(app, { items: [] })).body.error.param).toBe("items");
  expect((await postBatch(app, { items: [{ input: "a" }], speed: 9 })).body.error.param).toBe("speed");
  expect((await postBatch(app, { items: [{ input: "a" }], model: "nope" })).status).toBe(404);
  const streaming = await postBatch(app, { items: [{ input: "a", stream: true }] });
  expect(streaming.body.results[0].error).toContain("stream");
});

test("the response is written item by item, in the same JSON as a whole body, audio bytes identical to the single route", async () => {
  const adapter = new ToneModel({ frameDelayMs: 1 });
  // Two running places: items past them wait in the engine, so the first result leaves before the last starts.
  const { app } = await testApp(adapter, { flags: { "max-streams": "2" } });
  // 300 characters → 12 s of 24 kHz WAV (576 KB): several pieces of audio_data per item.
  const input = "a".repeat(300);
  const items = Array.from({ length: 8 }, (_, index) => ({ input, seed: index }));
  const response = await app.request("/v1/audio/speech/batch", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ items }) });
  expect(response.headers.get("content-type")).toStartWith("application/json");
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes('"media_type"')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  // The first result is out while the last item has not even started.
  expect(text).toContain('"media_type"');
  expect(adapter.jobs.length).toBeLessThan(items.length);
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  const body = JSON.parse(text);
  expect(Object.keys(body)).toEqual(["id", "results", "total", "succeeded", "failed"]);
  expect(body).toMatchObject({ total: 8, succeeded: 8, failed: 0 });
  expect(text).toBe(JSON.stringify(body));
  expect(Object.keys(body.results[0])).toEqual(["index", "status", "audio_data", "media_type", "usage", "finish_reason"]);
  expect(body.results[0].finish_reason).toBe("stop");
  const single = await app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input, seed: 7 }) });
  expect(Buffer.from(body.results[7].audio_data, "base64")).toEqual(Buffer.from(await single.arrayBuffer()));
});

test("a batch's audio is capped: items are kept in index order while within --batch-max-audio-seconds, the rest fail", async () => {
  const { app } = await testApp(new ToneModel(), { flags: { "batch-max-audio-seconds": "5" } });
  // 24 characters → 12 frames → 0.96 s each: five fit in 5 s. Four run at once, yet a later item never
  // takes the room of an earlier one.
  const { status, body } = await postBatch(app, { items: Array.from({ length: 8 }, () => ({ input: "x".repeat(24) })) });
  expect(status).toBe(200);
  expect(body.results.map((result: any) => result.status)).toEqual(["success", "success", "success", "success", "success", "error", "error", "error"]);
  for (const failed of body.results.slice(5)) expect(failed.error).toContain("cap of 5 s (--batch-max-audio-seconds)");
  expect(body).toMatchObject({ total: 8, succeeded: 5, failed: 3 });
});

test("the cap holds with the offline engine, counting the audio after a speed change", async () => {
  const engine = await createClassicModel();
  try {
    const { app } = await testApp(engine, { flags: { "batch-max-audio-seconds": "5" } });
    // About 3.5 s of speech: within the cap as spoken, past it slowed to half speed.
    const sentence = { input: "The quick brown fox jumps over the lazy dog.", response_format: "pcm" };
    const secondsOf = (result: any) => Buffer.from(result.audio_data, "base64").length / 2 / 16000;
    const asSpoken = (await postBatch(app, { items: [sentence] })).body.results[0];
    expect(asSpoken.status).toBe("success");
    expect(secondsOf(asSpoken)).toBeGreaterThan(2.5);
    const slowed = (await postBatch(app, { speed: 0.5, items: [sentence] })).body.results[0];
    expect(slowed).toMatchObject({ status: "error" });
    expect(slowed.error).toContain("cap of 5 s");

    const { body } = await postBatch(app, { items: Array.from({ length: 6 }, () => sentence) });
    expect(body.results.map((result: any) => result.status)).toEqual(["success", "error", "error", "error", "error", "error"]);
    expect(body.results.at(-1).error).toContain("cap of 5 s");
  } finally {
    await engine.close();
  }
});
