/**
 * Ordinary text in other scripts through the speech route on the offline engine (Flite): never a 5xx. What
 * it can read is read (Latin letters without their accents, Cyrillic, Greek, currency symbols), what it
 * cannot is dropped and named in X-Ignored-Fields, and input with nothing readable left is a 400 in OpenAI's
 * shape before any audio. Each text here was a 500 before: Flite's memory was corrupted by its bytes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createClassicModel } from "../../src/models/classic/model.ts";
import { decodeWav } from "../../src/audio/wav.ts";
import { parseSse } from "../support/sse.ts";
import { startTestServer, type TestServer } from "../support/server.ts";

const SPOKEN = ["Привет мир", "Příliš žluťoučký kůň úpěl ďábelské ódy", "aé".repeat(17), "aé".repeat(13), "¥£€…", "Καλημέρα κόσμε", "Straße Œuvre Łódź"];
const UNREADABLE = ["नमस्ते दुनिया", "こんにちは世界", "👋🌍"];
const PARTLY = "Hello 世界, how are you?";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer(await createClassicModel());
});
afterAll(() => server.stop());

const speak = (input: string, extra: Record<string, unknown> = {}) =>
  fetch(`${server.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input, ...extra }) });

async function expectSpeech(response: Response): Promise<Float32Array> {
  expect(response.status).toBe(200);
  const { channels, sampleRateHz } = decodeWav(new Uint8Array(await response.arrayBuffer()));
  expect(sampleRateHz).toBe(16000);
  // Half a second at least: every text here is a word or more.
  expect(channels[0]!.length).toBeGreaterThan(8000);
  return channels[0]!;
}

describe("the offline engine and text in other scripts", () => {
  for (const input of SPOKEN) {
    test(`${JSON.stringify(input)} is spoken, nothing ignored`, async () => {
      const response = await speak(input);
      expect(response.headers.get("x-ignored-fields")).toBeNull();
      await expectSpeech(response);
    });
  }

  test("accents are read as their letters: the same audio as the text without them", async () => {
    const accented = await expectSpeech(await speak("Příliš žluťoučký kůň"));
    const plain = await expectSpeech(await speak("Prilis zlutoucky kun"));
    expect(accented).toEqual(plain);
  });

  for (const input of UNREADABLE) {
    for (const delivery of [{}, { stream_format: "audio" }, { stream_format: "sse" }]) {
      test(`${JSON.stringify(input)} (${delivery.stream_format ?? "file"}) is a 400 naming input, before any audio`, async () => {
        const response = await speak(input, delivery);
        expect(response.status).toBe(400);
        const { error } = (await response.json()) as { error: { message: string; param: string; type: string; code: number } };
        expect(error.param).toBe("input");
        expect(error.code).toBe(400);
        expect(error.message).toContain("nothing voxedge-classic can read");
      });
    }
  }

  test("a text partly in a script it cannot read: the rest is spoken and input is named in X-Ignored-Fields", async () => {
    const response = await speak(PARTLY);
    expect(response.headers.get("x-ignored-fields")).toBe("input");
    await expectSpeech(response);
  });

  test("streamed and SSE deliveries speak other scripts too, and SSE names the dropped input", async () => {
    const streamed = await speak("Привет мир", { stream_format: "audio", response_format: "pcm" });
    expect(streamed.status).toBe(200);
    expect((await streamed.arrayBuffer()).byteLength).toBeGreaterThan(16000);
    const sse = await speak(PARTLY, { stream_format: "sse" });
    expect(sse.status).toBe(200);
    const done = parseSse(await sse.text()).at(-1)!;
    expect(done.event).toBe("speech.audio.done");
    expect(done.data.ignored_fields).toEqual(["input"]);
  });

  test("punctuation alone stays an empty file, as before: nothing was dropped", async () => {
    const response = await speak("...");
    expect(response.status).toBe(200);
    expect(response.headers.get("x-ignored-fields")).toBeNull();
  });
});
