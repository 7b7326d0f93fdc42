import { beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AudioDecodeError, AudioTooLongError, decodeAudio, downmixToMono, sniffContainer, type AudioContainer, type DecodedAudio } from "../../src/audio/decoders.ts";
import { constantFlac, ffmpegSilence, OGG_VORBIS, wavWithDeclaredSize, withoutOggGranules } from "../support/audio-bombs.ts";
import { dominantFrequencyHz } from "../support/spectrum.ts";
import { muxWebmLikeABrowser } from "../support/browser-recording.ts";

/** Longer than every fixture; the limit itself is tested with the bombs below. */
const LIMITS = { maxDurationSeconds: 30 };
const TONE_HZ = 440;
const SOURCE_RATE_HZ = 44100;
const DURATION_SECONDS = 1.5;
/** ffmpeg's sine source plays at 1/8 of full scale, and `-ac 2` spreads the mono source over both channels at −3 dB. */
const TONE_AMPLITUDE = 1 / 8 / Math.SQRT2;
const SOURCE = ["-f", "lavfi", "-i", `sine=frequency=${TONE_HZ}:sample_rate=${SOURCE_RATE_HZ}:duration=${DURATION_SECONDS}`, "-ac", "2"];

/** Samples per frame, the tolerance on length for codecs whose container may not trim to the exact sample. */
const OPUS_FRAME_SAMPLES = 960; // 20 ms at 48 kHz, ffmpeg's and browsers' default
const AAC_FRAME_SAMPLES = 1024;
const MP3_FRAME_SAMPLES = 1152;
const VORBIS_LONG_BLOCK_SAMPLES = 2048;

interface Fixture {
  name: string;
  fileName: string;
  ffmpegArgs: string[];
  container: AudioContainer;
  sampleRateHz: number;
  /**
   * How far the decoded length may be from the source's. Lossless formats are exact. MP3 (LAME tag),
   * Ogg (granule positions) and MP4 (edit list) declare the exact length and come out exact today; the
   * tolerance is one frame so that an encoder update cannot fail the test. WebM keeps up to one Opus frame
   * of end padding (no DiscardPadding support). ADTS declares nothing: its priming is absorbed by the frame
   * that FAAD2 withholds, and its end padding (410 samples here) stays.
   */
  toleranceSamples: number;
}

const FIXTURES: Fixture[] = [
  { name: "WAV s16", fileName: "s16.wav", ffmpegArgs: ["-c:a", "pcm_s16le"], container: "wav", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: 0 },
  { name: "WAV s24 (EXTENSIBLE)", fileName: "s24.wav", ffmpegArgs: ["-c:a", "pcm_s24le"], container: "wav", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: 0 },
  { name: "WAV s32 (EXTENSIBLE)", fileName: "s32.wav", ffmpegArgs: ["-c:a", "pcm_s32le"], container: "wav", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: 0 },
  { name: "WAV f32 (EXTENSIBLE)", fileName: "f32.wav", ffmpegArgs: ["-c:a", "pcm_f32le"], container: "wav", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: 0 },
  { name: "WAV f64 (EXTENSIBLE)", fileName: "f64.wav", ffmpegArgs: ["-c:a", "pcm_f64le"], container: "wav", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: 0 },
  { name: "WAV u8", fileName: "u8.wav", ffmpegArgs: ["-c:a", "pcm_u8"], container: "wav", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: 0 },
  { name: "FLAC", fileName: "tone.flac", ffmpegArgs: ["-c:a", "flac"], container: "flac", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: 0 },
  { name: "Ogg FLAC", fileName: "flac.oga", ffmpegArgs: ["-c:a", "flac", "-f", "ogg"], container: "ogg", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: 0 },
  // ffmpeg writes an ID3v2 tag in front of the first frame, so this also covers the tag skip.
  { name: "MP3 (ID3-tagged)", fileName: "tone.mp3", ffmpegArgs: ["-c:a", "libmp3lame"], container: "mp3", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: MP3_FRAME_SAMPLES },
  { name: "Ogg Vorbis", fileName: "vorbis.ogg", ffmpegArgs: ["-c:a", "libvorbis"], container: "ogg", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: VORBIS_LONG_BLOCK_SAMPLES },
  { name: "Ogg Opus", fileName: "tone.opus", ffmpegArgs: ["-c:a", "libopus"], container: "ogg", sampleRateHz: 48000, toleranceSamples: OPUS_FRAME_SAMPLES },
  // The layout of Chromium's MediaRecorder output: EBML, one Opus track, SimpleBlocks.
  { name: "WebM Opus", fileName: "tone.webm", ffmpegArgs: ["-c:a", "libopus", "-f", "webm"], container: "webm", sampleRateHz: 48000, toleranceSamples: OPUS_FRAME_SAMPLES },
  { name: "M4A AAC", fileName: "tone.m4a", ffmpegArgs: ["-c:a", "aac"], container: "mp4", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: AAC_FRAME_SAMPLES },
  // Fragmented, as MediaRecorder writes MP4; no edit list, so the Opus pre-skip alone trims the start.
  {
    name: "fragmented MP4 Opus",
    fileName: "fragmented.mp4",
    ffmpegArgs: ["-c:a", "libopus", "-movflags", "frag_keyframe+empty_moov+default_base_moof"],
    container: "mp4",
    sampleRateHz: 48000,
    toleranceSamples: OPUS_FRAME_SAMPLES,
  },
  { name: "ADTS AAC", fileName: "tone.aac", ffmpegArgs: ["-c:a", "aac", "-f", "adts"], container: "aac", sampleRateHz: SOURCE_RATE_HZ, toleranceSamples: AAC_FRAME_SAMPLES },
];

const encoded = new Map<string, Uint8Array>();

function runFfmpeg(args: string[]): Uint8Array {
  const result = spawnSync("ffmpeg", ["-v", "error", "-y", ...args], { maxBuffer: 1 << 26 });
  if (result.error) throw new Error(`ffmpeg is required by these tests: apt-get install ffmpeg (${result.error.message})`);
  if (result.status !== 0) throw new Error(`ffmpeg failed: ${result.stderr.toString()}`);
  return new Uint8Array(result.stdout);
}

beforeAll(() => {
  // Files, not pipes: the MP4 muxer seeks back to write its index, and a WAV written to a pipe has no sizes.
  const directory = mkdtempSync(join(tmpdir(), "voxedge-decoders-"));
  try {
    for (const fixture of FIXTURES) {
      const path = join(directory, fixture.fileName);
      runFfmpeg([...SOURCE, ...fixture.ffmpegArgs, path]);
      encoded.set(fixture.name, new Uint8Array(readFileSync(path)));
    }
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
});

function bytesOf(name: string): Uint8Array {
  const bytes = encoded.get(name);
  if (!bytes) throw new Error(`no fixture ${name}`);
  return bytes;
}

function rms(samples: Float32Array): number {
  let sum = 0;
  for (const sample of samples) sum += sample * sample;
  return Math.sqrt(sum / samples.length);
}

function expectTone(audio: DecodedAudio, sampleRateHz: number): void {
  expect(audio.sampleRateHz).toBe(sampleRateHz);
  expect(audio.channels).toHaveLength(2);
  const [left, right] = audio.channels;
  expect(right!.length).toBe(left!.length);
  const mono = downmixToMono(audio);
  expect(Math.abs(dominantFrequencyHz(mono, sampleRateHz) - TONE_HZ)).toBeLessThan(1);
  // The level catches a wrong sample scale (8-bit offset, 24-bit sign) that leaves the pitch intact.
  const middle = mono.subarray(Math.floor(mono.length / 4), Math.floor((3 * mono.length) / 4));
  // Lossy codecs keep the level within a few percent (LAME at 128 kb/s: −5%).
  expect(Math.abs(rms(middle) / (TONE_AMPLITUDE / Math.SQRT2) - 1)).toBeLessThan(0.1);
}

describe("decodeAudio: every supported format", () => {
  for (const fixture of FIXTURES) {
    test(fixture.name, async () => {
      const bytes = bytesOf(fixture.name);
      expect(sniffContainer(bytes)).toBe(fixture.container);
      const audio = await decodeAudio(bytes, LIMITS);
      expectTone(audio, fixture.sampleRateHz);
      const expectedSamples = DURATION_SECONDS * fixture.sampleRateHz;
      expect(Math.abs(audio.channels[0]!.length - expectedSamples)).toBeLessThanOrEqual(fixture.toleranceSamples);
    });
  }

  test("the 24-, 32-bit and float WAVs exercise WAVE_FORMAT_EXTENSIBLE", () => {
    for (const name of ["WAV s24 (EXTENSIBLE)", "WAV s32 (EXTENSIBLE)", "WAV f32 (EXTENSIBLE)", "WAV f64 (EXTENSIBLE)"]) {
      const formatTag = new DataView(bytesOf(name).buffer).getUint16(20, true);
      expect(formatTag).toBe(0xfffe);
    }
  });

  test("a streamed WAV (sizes left at 0xFFFFFFFF, as ffmpeg writes to a pipe) decodes to the end", async () => {
    const bytes = runFfmpeg([...SOURCE, "-c:a", "pcm_s16le", "-f", "wav", "pipe:1"]);
    expect(new DataView(bytes.buffer).getUint32(4, true)).toBe(0xffffffff);
    const audio = await decodeAudio(bytes, LIMITS);
    expectTone(audio, SOURCE_RATE_HZ);
    expect(audio.channels[0]!.length).toBe(DURATION_SECONDS * SOURCE_RATE_HZ);
  });

  test("a WebM muxed by mediabunny in live mode, like a browser's MediaRecorder", async () => {
    const audio = await decodeAudio(await muxWebmLikeABrowser(bytesOf("Ogg Opus")), LIMITS);
    expectTone(audio, 48000);
    expect(Math.abs(audio.channels[0]!.length - DURATION_SECONDS * 48000)).toBeLessThanOrEqual(OPUS_FRAME_SAMPLES);
  });

  test("concurrent decodes give the same result as sequential ones", async () => {
    const names = FIXTURES.filter((fixture) => fixture.container !== "wav").map((fixture) => fixture.name);
    const sequential: DecodedAudio[] = [];
    for (const name of names) sequential.push(await decodeAudio(bytesOf(name), LIMITS));
    const concurrent = await Promise.all(names.map((name) => decodeAudio(bytesOf(name), LIMITS)));
    concurrent.forEach((audio, i) => expect(audio.channels).toEqual(sequential[i]!.channels));
  });
});

/** Deterministic noise: a failure must reproduce. */
function pseudoRandomBytes(length: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(length);
  let state = seed;
  for (let i = 0; i < length; i++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    bytes[i] = state >>> 24;
  }
  return bytes;
}

function withPrefix(prefix: number[] | string, rest: Uint8Array): Uint8Array {
  const head = typeof prefix === "string" ? Array.from(prefix, (character) => character.charCodeAt(0)) : prefix;
  const bytes = new Uint8Array(head.length + rest.length);
  bytes.set(head);
  bytes.set(rest, head.length);
  return bytes;
}

async function expectDecodeError(bytes: Uint8Array, message: RegExp): Promise<void> {
  const error = await decodeAudio(bytes, LIMITS).then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(AudioDecodeError);
  expect((error as Error).message).toMatch(message);
}

describe("decodeAudio: bad input throws AudioDecodeError", () => {
  test("an empty buffer", async () => {
    await expectDecodeError(new Uint8Array(0), /empty/);
  });

  test("garbage bytes", async () => {
    const garbage = pseudoRandomBytes(4096, 1);
    garbage[0] = 0x00; // not the first byte of any signature
    expect(sniffContainer(garbage)).toBeUndefined();
    await expectDecodeError(garbage, /unrecognised audio format/);
  });

  // No MP3 case: an MPEG audio frame has no checksum, so a valid header over noise decodes, as noise, in mpg123 and ffmpeg alike.
  const noise = pseudoRandomBytes(4096, 2);
  const garbageBehindSignatures: [string, Uint8Array][] = [
    ["WAV", withPrefix("RIFF\xff\xff\xff\xffWAVE", noise)],
    ["Ogg", withPrefix("OggS", noise)],
    ["FLAC", withPrefix("fLaC", noise)],
    ["ADTS AAC", withPrefix([0xff, 0xf1, 0x50, 0x80], noise)],
    ["MP4", withPrefix("\x00\x00\x00\x18ftypmp42", noise)],
    ["WebM/Matroska", withPrefix([0x1a, 0x45, 0xdf, 0xa3], noise)],
  ];
  for (const [name, bytes] of garbageBehindSignatures) {
    test(`garbage behind a ${name} signature`, async () => {
      await expectDecodeError(bytes, new RegExp(`^${name} audio could not be decoded`));
    });
  }

  const COULD_NOT_DECODE = /could not be decoded/;
  const truncations: [string, string, number, RegExp][] = [
    ["WAV cut inside its fmt chunk", "WAV s16", 30, /fmt chunk/],
    ["FLAC cut inside STREAMINFO", "FLAC", 30, COULD_NOT_DECODE],
    ["MP3 cut inside its ID3 tag", "MP3 (ID3-tagged)", 20, /inside its ID3 tag/],
    ["Ogg Vorbis cut after the identification header", "Ogg Vorbis", 58, COULD_NOT_DECODE],
    ["Ogg Opus cut after the identification header", "Ogg Opus", 47, COULD_NOT_DECODE],
    ["WebM cut inside its track header", "WebM Opus", 120, COULD_NOT_DECODE],
    ["M4A cut in half (its moov index is at the end)", "M4A AAC", -1, COULD_NOT_DECODE],
    ["ADTS cut inside its first frame", "ADTS AAC", 100, COULD_NOT_DECODE],
  ];
  for (const [label, fixtureName, keptBytes, message] of truncations) {
    test(`a truncated file: ${label}`, async () => {
      const bytes = bytesOf(fixtureName);
      await expectDecodeError(bytes.subarray(0, keptBytes < 0 ? bytes.length >> 1 : keptBytes), message);
    });
  }

  test("damaged files either decode or throw AudioDecodeError, and never hang", async () => {
    const lossyNames = FIXTURES.filter((fixture) => fixture.container !== "wav").map((fixture) => fixture.name);
    for (const [index, name] of lossyNames.entries()) {
      const original = bytesOf(name);
      for (let trial = 0; trial < 4; trial++) {
        const damaged = original.slice();
        const positions = pseudoRandomBytes(32, 100 * index + trial);
        // Damage the headers (first 512 bytes) on even trials, anywhere on odd ones.
        const span = trial % 2 === 0 ? Math.min(512, damaged.length) : damaged.length;
        for (let k = 0; k < positions.length; k += 2) damaged[(positions[k]! * 257 + positions[k + 1]!) % span] = positions[k + 1]!;
        const outcome = await decodeAudio(damaged, LIMITS).then(
          () => "decoded",
          (error: unknown) => (error instanceof AudioDecodeError ? "rejected" : error),
        );
        expect([name, outcome]).toEqual([name, expect.stringMatching(/^(decoded|rejected)$/)]);
      }
    }
  });
});

describe("the part of a file that arrived", () => {
  test("a WAV cut inside its audio data decodes to the whole frames that arrived", async () => {
    const bytes = bytesOf("WAV s16");
    const dataStart = bytes.length - DURATION_SECONDS * SOURCE_RATE_HZ * 4;
    const audio = await decodeAudio(bytes.subarray(0, dataStart + 1000 * 4 + 3), LIMITS);
    expect(audio.channels[0]!.length).toBe(1000);
  });
});

describe("downmixToMono", () => {
  test("averages the channels", () => {
    const mono = downmixToMono({ channels: [new Float32Array([1, 0.5, -1]), new Float32Array([1, -0.5, 0])], sampleRateHz: 8000 });
    expect(Array.from(mono)).toEqual([1, 0, -0.5]);
  });

  test("returns a mono input's channel as is", () => {
    const channel = new Float32Array([0.25, -0.25]);
    expect(downmixToMono({ channels: [channel], sampleRateHz: 8000 })).toBe(channel);
  });
});

describe("decodeAudio: the duration limit stops decompression bombs", () => {
  const HOUR_SECONDS = 3600;
  /** Hours of audio were there; the decode must stop within one input piece (or one packet batch) of the limit. */
  const STOPPED_EARLY_SECONDS = 90;
  /** The same for FLAC, in samples across channels (32 MB of float32): at 8 kHz one piece of CONSTANT frames is over a minute. */
  const STOPPED_EARLY_SAMPLES = 8_000_000;
  const flacHour = (blockSize: number, channelCount: number, sampleRateHz: number, declared: boolean) => {
    const frameCount = Math.ceil((HOUR_SECONDS * sampleRateHz) / blockSize);
    return constantFlac({ sampleRateHz, channelCount, blockSize, frameCount, declaredTotalSamples: declared ? frameCount * blockSize : 0 });
  };

  async function tooLong(bytes: Uint8Array): Promise<AudioTooLongError> {
    const error = await decodeAudio(bytes, LIMITS).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(AudioTooLongError);
    const tooLongError = error as AudioTooLongError;
    expect(tooLongError.message).toContain("longer than the 30 s limit");
    return tooLongError;
  }

  test("FLAC of CONSTANT subframes declaring an hour in STREAMINFO: refused before decoding", async () => {
    const bomb = flacHour(65535, 1, 44100, true);
    expect(bomb.length).toBeLessThan(40_000);
    const error = await tooLong(bomb);
    expect(error.evidence).toMatch(/^the FLAC header declares 3600\.\d s$/);
    expect(error.decodedSeconds).toBe(0);
  });

  const undeclaredFlacs: [string, number, number, number][] = [
    ["65535-sample blocks, mono 44.1 kHz", 65535, 1, 44100],
    ["4096-sample blocks, stereo 48 kHz", 4096, 2, 48000],
    ["65535-sample blocks, 8 channels at 8 kHz", 65535, 8, 8000],
  ];
  for (const [label, blockSize, channelCount, sampleRateHz] of undeclaredFlacs) {
    test(`FLAC of CONSTANT subframes, an hour behind total_samples = 0 (unknown), ${label}: decoding stops past the limit`, async () => {
      const error = await tooLong(flacHour(blockSize, channelCount, sampleRateHz, false));
      expect(error.evidence).toStartWith("decoding stopped after");
      expect(error.decodedSeconds).toBeGreaterThan(31);
      expect(error.decodedSeconds * sampleRateHz * channelCount).toBeLessThan(STOPPED_EARLY_SAMPLES);
    });
  }

  test("the peak RSS of refusing a 35 kB FLAC that decodes to an hour (635 MB of float32) grows by well under 300 MB", async () => {
    const bomb = flacHour(65535, 1, 44100, false);
    // Loads the decoder first, so that only the decode is measured.
    await decodeAudio(bytesOf("FLAC"), LIMITS);
    const peakBeforeKb = process.resourceUsage().maxRSS;
    await tooLong(bomb);
    expect((process.resourceUsage().maxRSS - peakBeforeKb) / 1024).toBeLessThan(300);
  });

  test("a WAV's data size bounds the decode: 0xFFFFFFFF over 2 min is refused on its size; a size of 2 s over 2 min decodes 2 s", async () => {
    const streaming = await tooLong(wavWithDeclaredSize(8000, 120, "streaming"));
    expect(streaming.evidence).toBe("the WAV data chunk holds 120.0 s");
    expect(streaming.decodedSeconds).toBe(0);
    // What follows a data chunk is the next chunk (LIST, id3 …), never more audio: this is how ffmpeg and sox read it too.
    const lyingSmall = await decodeAudio(wavWithDeclaredSize(8000, 120, 2 * 8000 * 2), LIMITS);
    expect(lyingSmall.channels[0]!.length).toBe(2 * 8000);
  });

  describe("real encoders' silence (ffmpeg)", () => {
    const encodedSilence = new Map<string, Uint8Array>();
    beforeAll(() => {
      encodedSilence.set("Ogg Vorbis", ffmpegSilence(HOUR_SECONDS, 8000, OGG_VORBIS));
      encodedSilence.set("Ogg Opus", ffmpegSilence(300, 48000, ["-c:a", "libopus", "-b:a", "6k", "-frame_duration", "120", "-f", "ogg"]));
      encodedSilence.set("MP3", ffmpegSilence(120, 8000, ["-c:a", "libmp3lame", "-b:a", "8k", "-f", "mp3"]));
      encodedSilence.set("ADTS AAC", ffmpegSilence(120, 8000, ["-c:a", "aac", "-f", "adts"]));
    });
    const silence = (name: string) => encodedSilence.get(name)!;

    for (const [name, declaredSeconds] of [["Ogg Vorbis", /^its Ogg granule positions declare 3599\.\d s$/], ["Ogg Opus", /^its Ogg granule positions declare 29\d\.\d s$/]] as const) {
      test(`${name}: refused on its granule positions; with them all unset, decoding stops past the limit`, async () => {
        const declared = await tooLong(silence(name));
        expect(declared.evidence).toMatch(declaredSeconds);
        expect(declared.decodedSeconds).toBe(0);
        const undeclared = await tooLong(withoutOggGranules(silence(name)));
        expect(undeclared.evidence).toStartWith("decoding stopped after");
        expect(undeclared.decodedSeconds).toBeLessThan(STOPPED_EARLY_SECONDS);
      });
    }

    test("WebM muxed live (no duration in its header): refused on its packet timestamps before decoding", async () => {
      const error = await tooLong(await muxWebmLikeABrowser(silence("Ogg Opus")));
      expect(error.evidence).toMatch(/^its packet timestamps run to 31\.\d s$/);
      expect(error.decodedSeconds).toBe(0);
    });

    for (const name of ["MP3", "ADTS AAC"]) {
      test(`${name} (nothing declares the length): decoding stops past the limit`, async () => {
        const error = await tooLong(silence(name));
        expect(error.evidence).toStartWith("decoding stopped after");
        expect(error.decodedSeconds).toBeLessThan(STOPPED_EARLY_SECONDS);
      });
    }
  });

  test("M4A declaring 2 min: refused on its header", async () => {
    const directory = mkdtempSync(join(tmpdir(), "voxedge-decoders-"));
    try {
      const path = join(directory, "silence.m4a");
      runFfmpeg(["-f", "lavfi", "-i", "anullsrc=r=8000:cl=mono", "-t", "120", "-c:a", "aac", path]);
      const error = await tooLong(new Uint8Array(readFileSync(path)));
      expect(error.evidence).toMatch(/^its MP4 header declares 120\.\d s$/);
      expect(error.decodedSeconds).toBe(0);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  test("a limit just past a file's length lets it through; just under, refuses it exactly", async () => {
    const bytes = bytesOf("FLAC");
    expect((await decodeAudio(bytes, { maxDurationSeconds: DURATION_SECONDS })).channels[0]!.length).toBe(DURATION_SECONDS * SOURCE_RATE_HZ);
    const error = await decodeAudio(bytes, { maxDurationSeconds: 1.4 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(AudioTooLongError);
    expect((error as AudioTooLongError).evidence).toBe("it is 1.50 s long");
  });

  test("more channels or samples per second than the limit in seconds can bound are refused from the header", async () => {
    const wideRate = constantFlac({ sampleRateHz: 48000, channelCount: 8, blockSize: 4096, frameCount: 4, declaredTotalSamples: 4 * 4096 });
    expect((await decodeAudio(wideRate, LIMITS)).channels).toHaveLength(8);
    const streamInfoRateAt = 8 + 10;
    // STREAMINFO says 96 kHz (8 channels × 96 kHz is past 8 × 48 kHz): refused before the frames are read.
    const tooWide = wideRate.slice();
    tooWide[streamInfoRateAt] = 96000 >> 12;
    tooWide[streamInfoRateAt + 1] = (96000 >> 4) & 0xff;
    tooWide[streamInfoRateAt + 2] = ((96000 & 0x0f) << 4) | (tooWide[streamInfoRateAt + 2]! & 0x0f);
    await expectDecodeError(tooWide, /8 channels at 96000 Hz is more than is accepted/);
  });
});
