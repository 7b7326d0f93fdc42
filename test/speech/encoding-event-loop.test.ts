/**
 * Encoding never holds the event loop: while ordinary requests are encoded (a long file in aac, mp3 from
 * ElevenLabs' with-timestamps, a batch, several streamed aac streams), a server on loopback answers /health
 * at once. The tone model makes minutes of audio in a moment, so what these requests cost is their encoding.
 *
 * Bounds are generous: on the main thread a 15-minute aac file held /health for 13 s and the with-timestamps
 * mp3 for 19 s on the 2-core machine, and the sampler got one or two answers in a whole case; off it, /health
 * answers within tens of milliseconds. The bound (1.5 s, or an eighth of the work's time where a busy machine
 * stretches the work past 12 s) sits far from both, so a busy machine does not fail it and the broken code
 * cannot pass it. The files are sized to hold a main-thread encoder past the bound at
 * least twice over on an idle machine (5 minutes of aac: about a third of the 15 minutes' 13 s), and a busy
 * machine only holds it longer.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ToneModel } from "../support/tone-model.ts";
import { startTestServer, type TestServer } from "../support/server.ts";
import { decodeWithFfmpeg } from "../support/ffmpeg.ts";
import { eventually } from "../support/eventually.ts";

const HEALTH_BOUND_MS = 1500;
/** The tone model's frames per character: one second of audio per character. */
const FRAMES_PER_CHAR = 12.5;

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer(new ToneModel({ framesPerChar: FRAMES_PER_CHAR, macrotaskEveryFrames: 10 }), { flags: { "max-streams": "16", "max-queue": "32" } });
});
afterAll(async () => {
  await server.stop();
});

/**
 * Runs `work` while asking /health one request after another, 20 ms apart; the slowest answer, in ms, and the
 * work's result. The server runs in this process, so an answer is timed from when its request was due: a loop
 * held during the pause between two requests delays the next one, and that counts too.
 */
async function slowestHealthDuring<T>(work: () => Promise<T>): Promise<{ slowestMs: number; result: T }> {
  let running = true;
  let slowestMs = 0;
  let answers = 0;
  const sampler = (async () => {
    let dueMs = performance.now();
    while (running) {
      const response = await fetch(`${server.url}/health`);
      await response.arrayBuffer();
      const answeredMs = performance.now();
      slowestMs = Math.max(slowestMs, answeredMs - dueMs);
      answers++;
      dueMs = answeredMs + 20;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  let result: T;
  const startedMs = performance.now();
  try {
    result = await work();
  } finally {
    running = false;
    await sampler;
  }
  const workMs = performance.now() - startedMs;
  // A machine busy with other work slows the work and the answers alike: past the fixed bound, an answer may
  // take an eighth of the work's time. An encoder on the main thread holds the loop for nearly all of it.
  expect(slowestMs).toBeLessThan(Math.max(HEALTH_BOUND_MS, workMs / 8));
  // The sampler ran throughout: a loop held for the whole work would show one or two answers, not many.
  expect(answers).toBeGreaterThan(3);
  return { slowestMs, result };
}

const text = (chars: number) => "a".repeat(chars);

async function speech(body: Record<string, unknown>): Promise<{ status: number; bytes: Uint8Array }> {
  const response = await fetch(`${server.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: response.status, bytes: new Uint8Array(await response.arrayBuffer()) };
}

describe("encoding runs off the event loop", () => {
  test("a five-minute aac file", async () => {
    const { result } = await slowestHealthDuring(() => speech({ input: text(300), response_format: "aac" }));
    expect(result.status).toBe(200);
    const decoded = decodeWithFfmpeg(result.bytes);
    expect(decoded.codec).toBe("aac");
    expect(decoded.samples.length / decoded.sampleRateHz).toBeGreaterThan(299);
  }, 120_000);

  test("an mp3 at 44.1 kHz, 192 kbps, from ElevenLabs' with-timestamps", async () => {
    const { result } = await slowestHealthDuring(async () => {
      const response = await fetch(`${server.url}/elevenlabs/v1/text-to-speech/low/with-timestamps?output_format=mp3_44100_192`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ text: text(150) }) });
      return { status: response.status, body: (await response.json()) as { audio_base64: string } };
    });
    expect(result.status).toBe(200);
    const decoded = decodeWithFfmpeg(Buffer.from(result.body.audio_base64, "base64"));
    expect(decoded.codec).toBe("mp3");
    expect(decoded.sampleRateHz).toBe(44100);
  }, 120_000);

  test("a file at speed 1.5 (the speed change of a whole file)", async () => {
    const { result } = await slowestHealthDuring(() => speech({ input: text(1200), response_format: "wav", speed: 1.5 }));
    expect(result.status).toBe(200);
    const decoded = decodeWithFfmpeg(result.bytes);
    expect(decoded.samples.length / decoded.sampleRateHz).toBeGreaterThan(790);
    expect(decoded.samples.length / decoded.sampleRateHz).toBeLessThan(810);
  }, 120_000);

  test("a batch of 8 aac items", async () => {
    const { result } = await slowestHealthDuring(async () => {
      const response = await fetch(`${server.url}/v1/audio/speech/batch`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ response_format: "aac", items: Array.from({ length: 8 }, () => ({ input: text(60) })) }) });
      return { status: response.status, body: (await response.json()) as { succeeded: number } };
    });
    expect(result.status).toBe(200);
    expect(result.body.succeeded).toBe(8);
  }, 120_000);

  test("8 streamed aac streams", async () => {
    const { result } = await slowestHealthDuring(() => Promise.all(Array.from({ length: 8 }, () => speech({ input: text(20), response_format: "aac", stream_format: "audio" }))));
    for (const stream of result) {
      expect(stream.status).toBe(200);
      expect(decodeWithFfmpeg(stream.bytes).samples.length).toBeGreaterThan(19 * 24000);
    }
  }, 120_000);
});

describe("encoding counts in admission", () => {
  test("while as many files are encoding as the engine runs streams, another file is a 429; a stream still runs", async () => {
    const adapter = new ToneModel({ framesPerChar: FRAMES_PER_CHAR, macrotaskEveryFrames: 10 });
    const busy = await startTestServer(adapter, { flags: { "max-streams": "1", "max-queue": "0" } });
    try {
      const post = (body: Record<string, unknown>) => fetch(`${busy.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      let longDone = false;
      const long = post({ input: text(300), response_format: "aac" }).then(async (response) => {
        await response.arrayBuffer();
        longDone = true;
        return response.status;
      });
      // Its generation over (the engine holds nothing), its file is being encoded.
      await eventually("the long file's generation to end", () => {
        const { running, waiting, paused } = busy.host.engine!.counts;
        return adapter.framesProduced >= 300 * FRAMES_PER_CHAR && running + waiting + paused === 0;
      }, 60_000);
      expect(longDone).toBe(false);
      const refused = await post({ input: text(2), response_format: "wav" });
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(((await refused.json()) as { error: { type: string } }).error.type).toBeString();
      const streamed = await post({ input: text(2), response_format: "pcm", stream_format: "audio" });
      expect(streamed.status).toBe(200);
      await streamed.arrayBuffer();
      expect(await long).toBe(200);
      const after = await post({ input: text(2), response_format: "wav" });
      expect(after.status).toBe(200);
      await after.arrayBuffer();
    } finally {
      await busy.stop();
    }
  }, 120_000);
});
