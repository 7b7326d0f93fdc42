/**
 * Every response format streams, raw and over SSE (src/audio/stream-encoder.ts), as LiveKit's openai plugin
 * asks by default (`stream_format: "sse"` or `"audio"` with `response_format: "mp3"`): each chunk continues
 * the ones before at a frame or page boundary, the joined bytes decode with an independent decoder (ffmpeg)
 * to the audio of the whole file, and a streamed mp3 is the file's bytes without its Info tag.
 */
import { describe, expect, test } from "bun:test";
import { ToneModel } from "../../support/tone-model.ts";
import { testApp } from "../../support/server.ts";
import { parseSse } from "../../support/sse.ts";
import { decodeWithFfmpeg } from "../../support/ffmpeg.ts";
import { concatBytes } from "../../../src/lib/concat.ts";
import { adtsFrames } from "../../../src/audio/codecs/aac.ts";

type App = Awaited<ReturnType<typeof testApp>>["app"];
const INPUT = "Streamed speech, in every format a client may ask for.";
const FORMATS = ["mp3", "opus", "aac", "flac", "wav", "pcm"] as const;
type Format = (typeof FORMATS)[number];

async function post(app: App, body: Record<string, unknown>): Promise<Response> {
  return app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "tts-1", voice: "alloy", input: INPUT, seed: 7, ...body }) });
}

/** The raw stream's chunks as they arrived. */
async function rawChunks(response: Response): Promise<Uint8Array[]> {
  const chunks: Uint8Array[] = [];
  const reader = response.body!.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return chunks;
    if (value.byteLength > 0) chunks.push(value);
  }
}

/** Where a chunk after the first may start: a frame or page boundary of its format. */
function startsAtBoundary(format: Format, chunk: Uint8Array): boolean {
  switch (format) {
    case "mp3":
      return chunk[0] === 0xff && (chunk[1]! & 0xe0) === 0xe0;
    case "aac":
      return chunk[0] === 0xff && (chunk[1]! & 0xf0) === 0xf0;
    case "opus":
      return new TextDecoder().decode(chunk.subarray(0, 4)) === "OggS";
    case "flac":
      return chunk[0] === 0xff && (chunk[1]! & 0xfe) === 0xf8;
    default:
      return chunk.byteLength % 2 === 0;
  }
}

function decode(format: Format, bytes: Uint8Array): Float32Array {
  if (format === "pcm") return decodeWithFfmpeg(bytes, "s16le").samples;
  return decodeWithFfmpeg(bytes).samples;
}

function expectSameAudio(streamed: Float32Array, whole: Float32Array, format: Format): void {
  // mp3 and aac streams carry no gapless tag (mp3's Info frame needs the frame count): ffmpeg decodes their
  // encoder delay and padding too, up to a few frames more than the file.
  const slack = format === "mp3" || format === "aac" ? 3000 : 0;
  expect(streamed.length).toBeGreaterThanOrEqual(whole.length);
  expect(streamed.length - whole.length).toBeLessThanOrEqual(slack);
  const energy = (samples: Float32Array) => samples.reduce((sum, value) => sum + value * value, 0);
  expect(Math.abs(energy(streamed) - energy(whole)) / energy(whole)).toBeLessThan(0.1);
}

describe("streamed formats", () => {
  for (const format of FORMATS) {
    test(`raw ${format}: chunks at frame boundaries, the right content type, the joined bytes decode to the file's audio`, async () => {
      const { app } = await testApp(new ToneModel());
      const whole = await post(app, { response_format: format });
      expect(whole.status).toBe(200);
      const file = new Uint8Array(await whole.arrayBuffer());
      const response = await post(app, { response_format: format, stream_format: "audio" });
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toBe(whole.headers.get("content-type"));
      const chunks = await rawChunks(response);
      expect(chunks.length).toBeGreaterThan(3);
      const joined = concatBytes(chunks);
      expectSameAudio(decode(format, joined), decode(format, file), format);
      // A player can start on the first chunk: it opens the format's stream.
      const head = new TextDecoder().decode(chunks[0]!.subarray(0, 4));
      if (format === "opus") expect(head).toBe("OggS");
      if (format === "flac") expect(head).toBe("fLaC");
      if (format === "wav") expect(head).toBe("RIFF");
    });

    test(`SSE ${format}: every delta continues the last at a frame or page boundary, and they join to one playable file`, async () => {
      const { app } = await testApp(new ToneModel());
      const file = new Uint8Array(await (await post(app, { response_format: format })).arrayBuffer());
      const response = await post(app, { response_format: format, stream_format: "sse" });
      expect(response.status).toBe(200);
      const events = parseSse(await response.text());
      const deltas = events.filter((event) => event.event === "speech.audio.delta");
      expect(deltas.length).toBeGreaterThan(3);
      expect(deltas.every((event) => event.data.response_format === format)).toBe(true);
      expect(events.at(-1)!.event).toBe("speech.audio.done");
      const parts = deltas.map((event) => new Uint8Array(Buffer.from(event.data.audio, "base64")));
      // The first delta of a container opens it (OggS, fLaC, RIFF); every later one starts on a boundary.
      for (const part of parts.slice(1)) expect(startsAtBoundary(format, part)).toBe(true);
      expectSameAudio(decode(format, concatBytes(parts)), decode(format, file), format);
    });
  }

  test("same seed, same bytes: a streamed mp3 is the whole mp3 without its leading Info frame, raw and over SSE", async () => {
    const { app } = await testApp(new ToneModel());
    const file = new Uint8Array(await (await post(app, { response_format: "mp3" })).arrayBuffer());
    const raw = concatBytes(await rawChunks(await post(app, { response_format: "mp3", stream_format: "audio" })));
    const sse = concatBytes(
      parseSse(await (await post(app, { response_format: "mp3", stream_format: "sse" })).text())
        .filter((event) => event.event === "speech.audio.delta")
        .map((event) => new Uint8Array(Buffer.from(event.data.audio, "base64"))),
    );
    // The Info frame is the file's first frame: as long as any other (64 kbps), and named by its tag.
    const infoFrameBytes = file.byteLength - raw.byteLength;
    expect(new TextDecoder().decode(file.subarray(0, infoFrameBytes)).includes("Info")).toBe(true);
    expect(Buffer.from(file.subarray(infoFrameBytes)).equals(Buffer.from(raw))).toBe(true);
    expect(Buffer.from(sse).equals(Buffer.from(raw))).toBe(true);
  });

  test("a streamed aac is whole ADTS frames, as many as the file's", async () => {
    const { app } = await testApp(new ToneModel());
    const file = new Uint8Array(await (await post(app, { response_format: "aac" })).arrayBuffer());
    const raw = concatBytes(await rawChunks(await post(app, { response_format: "aac", stream_format: "audio" })));
    expect(adtsFrames(raw).length).toBe(adtsFrames(file).length);
  });

  test("speed other than 1 is still refused on a stream, before any audio", async () => {
    const { app } = await testApp(new ToneModel());
    const response = await post(app, { response_format: "mp3", stream_format: "audio", speed: 1.5 });
    expect(response.status).toBe(400);
    expect(((await response.json()) as any).error.param).toBe("speed");
  });
});
