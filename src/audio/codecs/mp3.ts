/**
 * MP3 (MPEG-1/2/2.5 Layer III, CBR, 64 kbps unless asked otherwise, mono) from mono float samples, led by a
 * LAME "Info" tag.
 *
 * Library: @breezystack/lamejs, a pure-JavaScript port of LAME 3.98, as an ES module fork of lamejs.
 * Chosen because it has no wasm or native part, so it loads identically in Bun and Deno with no
 * file-loading tricks, and it is already a dependency. Pure JS is slower than a wasm LAME, but
 * bench/encoders.ts shows it encodes speech tens of times faster than real time. LGPL-3.0.
 *
 * The Info tag: lamejs's Mp3Encoder cannot write LAME's tag frame, so we write it. It records the
 * frame count and LAME's encoder delay and end padding, which ffmpeg, mpg123 and most players use to
 * cut decoded audio to exactly the input's length (gapless) and to report the true duration. Without
 * it a decoder adds 48–72 ms of silence at 24 kHz and estimates the duration from the bitrate.
 *
 * Rates: MP3 has nine sample rates. Input at another rate is resampled to the nearest one at or
 * above it with the project's resampler, instead of letting LAME pick and resample on its own.
 *
 * Length: sample-exact for decoders that read the Info tag.
 *
 * Streaming: LAME's frames as it completes them, from the same encoder: the joined bytes are the file's frames
 * without its leading Info tag, which needs the frame count, unknown until the end.
 *
 * Concurrency: each call has its own encoder, so calls may interleave between chunks (at `pause`).
 */
import { concatBytes } from "../../lib/concat.ts";
import { lazyLoad } from "../../lib/lazy-load.ts";
import { resample } from "../resampler.ts";
import { floatToInt16 } from "../wav.ts";
import { withResampling, type Codec, type StreamEncoder } from "../codec.ts";
import type { Pause } from "../pause.ts";

/** Ample for mono speech and valid in every MPEG version's bitrate table. */
const MP3_BITRATE_KBPS = 64;
/** Bytes of the Info tag frame up to its last field (the tag CRC) for mono: a frame must hold at least this. */
const INFO_TAG_FRAME_BYTES = 4 + 17 + 120 + 36;
const MP3_RATES_HZ = [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000] as const;
/**
 * Below this bitrate LAME codes mono at 22.05 kHz at most (32 kbps: 24, 32, 44.1 and 48 kHz all come out at
 * 22.05 kHz), resampling on its own with a delay the Info tag does not count. Such audio is resampled here
 * first, to a rate LAME keeps.
 */
const MIN_KBPS_ABOVE_22050_HZ = 48;
const LOW_BITRATE_MAX_RATE_HZ = 22050;
/** Samples handed to LAME per call; lamejs sizes its output buffer to the largest input it has seen. */
const CHUNK_SAMPLES = 1152 * 32;
/** LAME delays its output by this much (ENCDELAY in LAME's encoder.h), whatever the rate. */
const LAME_ENCODER_DELAY_SAMPLES = 576;
/** lamejs is LAME 3.98.4; LAME's tag names its version in exactly nine bytes. */
const LAME_VERSION_TAG = "LAME3.98r";

const loadLame = lazyLoad(() => import("@breezystack/lamejs"));

/** The rates LAME codes at `bitrateKbps` without resampling by itself. */
function mp3RatesAt(bitrateKbps: number): readonly number[] {
  return bitrateKbps < MIN_KBPS_ABOVE_22050_HZ ? MP3_RATES_HZ.filter((rateHz) => rateHz <= LOW_BITRATE_MAX_RATE_HZ) : MP3_RATES_HZ;
}

async function encodeMp3(samples: Float32Array, sampleRateHz: number, bitrateKbps = MP3_BITRATE_KBPS, pause: Pause): Promise<Uint8Array> {
  const rates = mp3RatesAt(bitrateKbps);
  const encoderRateHz = rates.find((rateHz) => rateHz >= sampleRateHz) ?? rates.at(-1)!;
  const encoderInput = encoderRateHz === sampleRateHz ? samples : await resample(samples, sampleRateHz, encoderRateHz, pause);
  const { Mp3Encoder } = await loadLame();

  const encoder = new Mp3Encoder(1, encoderRateHz, bitrateKbps);
  const pcm = floatToInt16(encoderInput);
  const parts: Uint8Array[] = [];
  // lamejs returns views of one internal buffer that the next call overwrites, so each part is copied.
  const keep = (part: Int8Array | Uint8Array) => parts.push(new Uint8Array(part.buffer, part.byteOffset, part.byteLength).slice());
  for (let start = 0; start < pcm.length; start += CHUNK_SAMPLES) {
    if (start > 0) await pause();
    keep(encoder.encodeBuffer(pcm.subarray(start, start + CHUNK_SAMPLES)));
  }
  keep(encoder.flush());
  const audio = concatBytes(parts);
  return concatBytes([infoTagFrame(audio, pcm.length, bitrateKbps), audio]);
}

async function mp3StreamEncoder(rateHz: number, bitrateKbps: number): Promise<StreamEncoder> {
  const { Mp3Encoder } = await loadLame();
  const encoder = new Mp3Encoder(1, rateHz, bitrateKbps);
  // lamejs returns views of one internal buffer that the next call overwrites, so each part is copied.
  const copy = (part: Int8Array | Uint8Array) => new Uint8Array(part.buffer, part.byteOffset, part.byteLength).slice();
  return {
    push: async (samples) => copy(encoder.encodeBuffer(floatToInt16(samples))),
    end: async () => copy(encoder.flush()),
    close: () => undefined,
  };
}

export const mp3Codec: Codec<"mp3"> = {
  name: "mp3",
  contentType: "audio/mpeg",
  streamEncodesOn: "encoder-worker",
  encodeFile: (samples, sampleRateHz, options, pause) => encodeMp3(samples, sampleRateHz, options.bitrateKbps, pause),
  createStream: async (sampleRateHz, options) => {
    const bitrateKbps = options.bitrateKbps ?? MP3_BITRATE_KBPS;
    return withResampling(sampleRateHz, mp3RatesAt(bitrateKbps), (rateHz) => mp3StreamEncoder(rateHz, bitrateKbps));
  },
};

interface FrameHeader {
  /** The 4 header bytes, to copy into the tag frame. */
  bytes: Uint8Array;
  isMpeg1: boolean;
  frameBytes: number;
  samplesPerFrame: number;
  sampleRateHz: number;
}

const BITRATES_KBPS_MPEG1 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
const BITRATES_KBPS_MPEG2 = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];
const SAMPLE_RATES_HZ: Record<number, number[]> = { 3: [44100, 48000, 32000], 2: [22050, 24000, 16000], 0: [11025, 12000, 8000] };

function readFrameHeader(audio: Uint8Array, offset: number): FrameHeader {
  const [b0, b1, b2] = [audio[offset]!, audio[offset + 1]!, audio[offset + 2]!];
  const versionBits = (b1 >> 3) & 0x3;
  const rates = SAMPLE_RATES_HZ[versionBits];
  if (b0 !== 0xff || (b1 & 0xe0) !== 0xe0 || ((b1 >> 1) & 0x3) !== 1 || !rates) {
    throw new Error(`lamejs output has no Layer III frame header at byte ${offset}`);
  }
  const isMpeg1 = versionBits === 3;
  const bitrateKbps = (isMpeg1 ? BITRATES_KBPS_MPEG1 : BITRATES_KBPS_MPEG2)[b2 >> 4]!;
  const sampleRateHz = rates[(b2 >> 2) & 0x3]!;
  const padding = (b2 >> 1) & 0x1;
  return {
    bytes: audio.slice(offset, offset + 4),
    isMpeg1,
    frameBytes: Math.floor(((isMpeg1 ? 144 : 72) * bitrateKbps * 1000) / sampleRateHz) + padding,
    samplesPerFrame: isMpeg1 ? 1152 : 576,
    sampleRateHz,
  };
}

/**
 * A silent frame that carries the Xing "Info" header (CBR) and LAME's extension, laid out as LAME
 * writes it, for `audio` holding `inputSamples` samples.
 */
function infoTagFrame(audio: Uint8Array, inputSamples: number, bitrateKbps: number): Uint8Array {
  const first = readFrameHeader(audio, 0);
  let frameCount = 0;
  for (let offset = 0; offset < audio.length; offset += readFrameHeader(audio, offset).frameBytes) frameCount++;
  const endPaddingSamples = frameCount * first.samplesPerFrame - inputSamples - LAME_ENCODER_DELAY_SAMPLES;

  // Same version, rate and mode as the audio, without the padding slot: an ordinary frame that decoders
  // which ignore the tag play as silence (its side information is all zero). Its bitrate is the audio's,
  // or, where that frame is too small for the tag (32 kbps), the lowest that holds it, as LAME does.
  const header = first.bytes.slice();
  header[2] = header[2]! & ~0x02;
  while (readFrameHeader(header, 0).frameBytes < INFO_TAG_FRAME_BYTES) header[2] = header[2]! + 0x10;
  const frame = new Uint8Array(readFrameHeader(header, 0).frameBytes);
  const view = new DataView(frame.buffer);
  frame.set(header, 0);

  let at = 4 + (first.isMpeg1 ? 17 : 9); // after the mono side information
  frame.set(ascii("Info"), at);
  view.setUint32(at + 4, 0x0f, false); // fields present: frames, bytes, TOC, quality
  view.setUint32(at + 8, frameCount, false);
  view.setUint32(at + 12, frame.length + audio.length, false);
  for (let i = 0; i < 100; i++) frame[at + 16 + i] = Math.floor((i * 256) / 100); // CBR seeks linearly
  view.setUint32(at + 116, 100 - 10 * 4 - 3, false); // LAME's quality figure for lamejs's VBR_q 4, quality 3
  at += 120;

  // LAME extension: fields we do not track (lowpass, ReplayGain, encoder flags, preset) stay 0 = unknown.
  frame.set(ascii(LAME_VERSION_TAG), at);
  frame[at + 9] = 0x01; // tag revision 0, VBR method 1 = CBR
  frame[at + 20] = bitrateKbps;
  frame[at + 21] = LAME_ENCODER_DELAY_SAMPLES >> 4;
  frame[at + 22] = ((LAME_ENCODER_DELAY_SAMPLES & 0x0f) << 4) | (endPaddingSamples >> 8);
  frame[at + 23] = endPaddingSamples & 0xff;
  frame[at + 24] = sourceRateCode(first.sampleRateHz) << 6;
  view.setUint32(at + 28, frame.length + audio.length, false); // music length, from this frame on
  view.setUint16(at + 32, crc16(audio), false); // music CRC
  view.setUint16(at + 34, crc16(frame.subarray(0, at + 34)), false); // tag CRC, over everything before it
  return frame;
}

/** LAME's 2-bit source sample rate field. */
function sourceRateCode(sampleRateHz: number): number {
  if (sampleRateHz <= 32000) return 0;
  if (sampleRateHz === 44100) return 1;
  return sampleRateHz === 48000 ? 2 : 3;
}

function ascii(text: string): Uint8Array {
  return Uint8Array.from(text, (char) => char.charCodeAt(0));
}

/** CRC-16/ARC (reflected polynomial 0xA001), the checksum LAME uses for both tag CRCs. */
function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte;
    for (let bit = 0; bit < 8; bit++) crc = crc & 1 ? (crc >>> 1) ^ 0xa001 : crc >>> 1;
  }
  return crc;
}
