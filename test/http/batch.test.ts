import { expect, test } from "bun:test";
import { ToneAdapter } from "../support/tone-adapter.ts";
import { testApp } from "../support/server.ts";
import { decodeWithFfmpeg } from "../support/ffmpeg.ts";

async function postBatch(app: Awaited<ReturnType<typeof testApp>>["app"], body: unknown) {
  const response = await app.request("/v1/audio/speech/batch", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as any };
}

test("batch defaults apply, item values win, one bad item fails alone", async () => {
  const adapter = new ToneAdapter();
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
  const { app } = await testApp(new ToneAdapter(), { flags: { "batch-max-items": "3" } });
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
