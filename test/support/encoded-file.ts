/**
 * A response format's bytes decoded as a client that saved them would: from a file, by ffmpeg, with what
 * ffprobe says of the stream. The response-format tests (test/audio/encoders.test.ts, test/audio/codecs/) share it.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "bun:test";
import { concatBytes } from "../../src/lib/concat.ts";
import type { DecodedAudio } from "./ffmpeg.ts";

export interface ProbedAudio extends DecodedAudio {
  startTimeSeconds: number;
  encoderTag: string | undefined;
}

/** ffmpeg's demuxers for the headerless formats. */
const RAW_DEMUXERS: Record<string, string> = { pcm: "s16le", ulaw: "mulaw", alaw: "alaw" };

/** A pure tone, mono, in [-amplitude, amplitude]. */
export function sine(frequencyHz: number, sampleRateHz: number, sampleCount: number, amplitude = 0.5): Float32Array {
  const samples = new Float32Array(sampleCount);
  for (let i = 0; i < sampleCount; i++) samples[i] = amplitude * Math.sin((2 * Math.PI * frequencyHz * i) / sampleRateHz);
  return samples;
}

/**
 * Decodes from a file, as a client that saved the response would: ffmpeg applies an MP3 Info tag's
 * end trimming only to seekable input, so from a pipe (decodeWithFfmpeg) MP3 keeps its padding.
 * Raw PCM and G.711 have no header, so ffmpeg is told their layout.
 */
export function decodeFile(bytes: Uint8Array, format: string, sampleRateHz: number): ProbedAudio {
  const scratchDir = mkdtempSync(join(tmpdir(), "voxedge-encoded-"));
  try {
    const path = join(scratchDir, `audio.${format === "opus" ? "ogg" : format}`);
    writeFileSync(path, bytes);
    const demuxer = RAW_DEMUXERS[format];
    const rawInput = demuxer ? ["-f", demuxer, "-ar", String(sampleRateHz), "-ac", "1"] : [];
    const probe = spawnSync("ffprobe", ["-v", "error", ...rawInput, "-show_streams", "-of", "json", path]);
    if (probe.error) throw new Error(`ffprobe not found; these tests decode with it: apt-get install ffmpeg (${probe.error.message})`);
    if (probe.status !== 0) throw new Error(`ffprobe could not read ${format}: ${probe.stderr}`);
    const stream = JSON.parse(probe.stdout.toString()).streams[0];
    const decoded = spawnSync("ffmpeg", ["-v", "error", ...rawInput, "-i", path, "-f", "f32le", "pipe:1"], { maxBuffer: 1 << 26 });
    if (decoded.status !== 0) throw new Error(`ffmpeg could not decode ${format}: ${decoded.stderr}`);
    const out = decoded.stdout as Buffer;
    return {
      sampleRateHz: Number(stream.sample_rate),
      channels: stream.channels,
      codec: stream.codec_name,
      samples: new Float32Array(out.buffer.slice(out.byteOffset, out.byteOffset + out.byteLength)),
      startTimeSeconds: Number(stream.start_time ?? 0),
      encoderTag: stream.tags?.encoder,
    };
  } finally {
    rmSync(scratchDir, { recursive: true, force: true });
  }
}

/** Every sample of a 16-bit source comes back from ffmpeg's s16 → f32 conversion as value / 32768. */
export function expectBitExact(decoded: Float32Array, expected: Int16Array): void {
  expect(decoded.length).toBe(expected.length);
  let mismatches = 0;
  for (let i = 0; i < expected.length; i++) if (Math.round(decoded[i]! * 32768) !== expected[i]) mismatches++;
  expect(mismatches).toBe(0);
}

/** The bytes of a stream fed `samples` in chunks of `chunkSamples`, then ended, joined. */
export async function streamed(encoder: { push(samples: Float32Array): Promise<Uint8Array>; end(): Promise<Uint8Array> }, samples: Float32Array, chunkSamples: number): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for (let start = 0; start < samples.length; start += chunkSamples) parts.push(await encoder.push(samples.subarray(start, start + chunkSamples)));
  parts.push(await encoder.end());
  return concatBytes(parts);
}
