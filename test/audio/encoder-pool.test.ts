/**
 * The encoder workers: a file and a stream's chunk are encoded off the calling thread (its timers keep
 * firing while a long encode runs), a stream's bytes are those of its encoder run on this thread, the audio
 * of a file is handed over rather than copied, and a long aac file is encoded in bounded segments.
 */
import { describe, expect, test } from "bun:test";
import { EncoderPool } from "../../src/audio/encoder-pool.ts";
import { encodeAudio, renderAudioFile } from "../../src/audio/encoders.ts";
import { createStreamEncoder } from "../../src/audio/stream-encoder.ts";
import { codecOf } from "../../src/audio/formats.ts";
import { adtsFrames, encodeAdtsAac } from "../../src/audio/codecs/aac.ts";
import { concatBytes } from "../../src/lib/concat.ts";
import { decodeWithFfmpeg } from "../support/ffmpeg.ts";

const RATE_HZ = 24000;

/** Speech-like: a 180 Hz tone whose loudness wanders, so that codecs work as hard as on speech. */
function speechLike(seconds: number, rateHz = RATE_HZ): Float32Array {
  const samples = new Float32Array(Math.round(seconds * rateHz));
  for (let i = 0; i < samples.length; i++) samples[i] = 0.3 * Math.sin((2 * Math.PI * 180 * i) / rateHz) * (1 + 0.5 * Math.sin(i / 3000));
  return samples;
}

/**
 * The longest time this thread's timers were held while `work` ran, and how long `work` took, in ms. Work on
 * this thread holds the timers for about all of its run (one ffmpeg run over four minutes of audio, or the
 * speed change of five, took 1.7-2 s here on the 2-core machine, the whole of it a hold); off it, the longest
 * hold is tens of ms. So the bound is a share of the work's own time: a slow or loaded machine stretches both
 * alike, and an absolute bound near the broken figure would either flake or let the broken code pass.
 */
async function longestHoldDuring<T>(work: () => Promise<T>): Promise<{ longestHoldMs: number; elapsedMs: number; result: T }> {
  const startedMs = performance.now();
  let last = startedMs;
  let longestHoldMs = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longestHoldMs = Math.max(longestHoldMs, now - last);
    last = now;
  }, 5);
  try {
    const result = await work();
    const endedMs = performance.now();
    longestHoldMs = Math.max(longestHoldMs, endedMs - last);
    return { longestHoldMs, elapsedMs: endedMs - startedMs, result };
  } finally {
    clearInterval(timer);
  }
}

/** At most this share of the work's time in one hold: the broken code holds for nearly all of it (over 0.9). */
const HOLD_SHARE_BOUND = 0.5;

function expectOffThisThread({ longestHoldMs, elapsedMs }: { longestHoldMs: number; elapsedMs: number }): void {
  expect({ longestHoldMs, share: longestHoldMs / elapsedMs < HOLD_SHARE_BOUND }).toEqual({ longestHoldMs, share: true });
}

describe("encoder workers", () => {
  test("eight minutes of aac are encoded off the calling thread", async () => {
    await encodeAudio(speechLike(0.5), RATE_HZ, "aac"); // the worker started, ffmpeg compiled
    const samples = speechLike(480);
    const { result, ...hold } = await longestHoldDuring(() => encodeAudio(samples, RATE_HZ, "aac"));
    expectOffThisThread(hold);
    const decoded = decodeWithFfmpeg(result);
    expect(decoded.codec).toBe("aac");
    expect(decoded.samples.length).toBeGreaterThanOrEqual(480 * RATE_HZ);
  }, 60_000);

  test("a stream encoder's chunk is encoded off the calling thread", async () => {
    const encoder = await createStreamEncoder("aac", RATE_HZ);
    try {
      // One push of four minutes of audio: one run of ffmpeg over it, on the worker.
      const samples = speechLike(240);
      const { result, ...hold } = await longestHoldDuring(() => encoder.push(samples));
      expectOffThisThread(hold);
      expect(adtsFrames(result).length).toBeGreaterThan(5000);
    } finally {
      encoder.close();
    }
  }, 60_000);

  test("the speed change of a file runs off the calling thread", async () => {
    const samples = speechLike(300);
    const { result, ...hold } = await longestHoldDuring(() => renderAudioFile(samples, RATE_HZ, "pcm", {}, 2));
    expectOffThisThread(hold);
    expect(Math.abs(result.sampleCount - 150 * RATE_HZ)).toBeLessThan(0.02 * 150 * RATE_HZ);
    expect(result.bytes.length).toBe(2 * result.sampleCount);
  }, 60_000);

  test("a file's audio is handed to the worker, not copied; encodeAudio leaves the caller's", async () => {
    const handedOver = speechLike(1);
    await renderAudioFile(handedOver, RATE_HZ, "wav");
    expect(handedOver.length).toBe(0);
    const kept = speechLike(1);
    await encodeAudio(kept, RATE_HZ, "wav");
    expect(kept.length).toBe(RATE_HZ);
  });

  test("every streamed format gives what its encoder gives on this thread", async () => {
    const audio = speechLike(2);
    for (const format of ["wav", "pcm", "mp3", "opus", "flac", "aac", "ulaw", "alaw"] as const) {
      const rateHz = format === "ulaw" || format === "alaw" ? 8000 : RATE_HZ;
      const chunks = Array.from({ length: 25 }, (_, index) => audio.subarray(index * 1920, (index + 1) * 1920));
      const run = async (encoder: { push(samples: Float32Array): Promise<Uint8Array>; end(): Promise<Uint8Array> }) => {
        const parts: Uint8Array[] = [];
        for (const chunk of chunks) parts.push(await encoder.push(chunk));
        parts.push(await encoder.end());
        return concatBytes(parts);
      };
      const pooled = await run(await createStreamEncoder(format, rateHz, {}));
      const local = await run(await codecOf(format).createStream(rateHz, {}));
      // An Ogg stream's serial number is random; its packets are what must match, so opus is compared decoded.
      const comparable = (bytes: Uint8Array) => Buffer.from(format === "opus" ? new Uint8Array(decodeWithFfmpeg(bytes).samples.buffer) : bytes).toString("base64");
      expect({ format, bytes: comparable(pooled) }).toEqual({ format, bytes: comparable(local) });
    }
  }, 60_000);

  test("a long aac file is encoded in segments that join as one stream, of the right length", async () => {
    const seconds = 30;
    const segmented = await encodeAudio(speechLike(seconds), RATE_HZ, "aac");
    const whole = await encodeAdtsAac(speechLike(seconds), RATE_HZ);
    // Segmented, then joined: one frame per 1024 samples plus the priming and the end padding, as one run gives.
    expect(adtsFrames(segmented).length).toBe(adtsFrames(whole).length);
    const decoded = decodeWithFfmpeg(segmented);
    const reference = decodeWithFfmpeg(whole);
    expect(decoded.samples.length).toBe(reference.samples.length);
    // Within the codec's own error of one run: the signal-to-difference ratio of the two decodes.
    let signal = 0;
    let difference = 0;
    for (let i = 0; i < reference.samples.length; i++) {
      signal += reference.samples[i]! ** 2;
      difference += (reference.samples[i]! - decoded.samples[i]!) ** 2;
    }
    expect(10 * Math.log10(signal / difference)).toBeGreaterThan(20);
  }, 60_000);

  test("a pool of two workers runs streams and files, and holds nothing once they are answered", async () => {
    const pool = new EncoderPool(2);
    const streams = await Promise.all([pool.openStream("mp3", RATE_HZ, {}), pool.openStream("mp3", RATE_HZ, {})]);
    const bytes = await Promise.all(streams.map((stream) => stream.push(speechLike(1))));
    expect(bytes.every((part) => part.length > 0)).toBe(true);
    for (const stream of streams) stream.close();
    const file = await pool.renderFile(speechLike(1), RATE_HZ, "flac", {}, 1);
    expect(decodeWithFfmpeg(file.bytes).codec).toBe("flac");
    expect(pool.inputBytesInFlight).toBe(0);
    await pool.close();
  }, 60_000);
});
