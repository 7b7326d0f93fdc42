/**
 * Decompression bombs: small files that decode to hours of audio, written byte by byte so that a test
 * controls exactly what the headers claim.
 */
import { spawnSync } from "node:child_process";
import { wavHeader } from "../../src/audio/wav.ts";

export interface ConstantFlacOptions {
  /** 8000, 16000, 44100 or 48000: the rates a frame header can name with a 4-bit code. */
  sampleRateHz: number;
  /** 1–8. */
  channelCount: number;
  /** Samples per channel in each frame; 65535 is FLAC's largest, which packs the most audio per byte. */
  blockSize: number;
  frameCount: number;
  /** STREAMINFO's total sample count; 0 is FLAC's "unknown" (a stream written without seeking back). */
  declaredTotalSamples: number;
}

const FRAME_SAMPLE_RATE_CODES: Record<number, number> = { 8000: 0b0100, 16000: 0b0101, 44100: 0b1001, 48000: 0b1010 };
const BITS_PER_SAMPLE = 16;
/** Frame header sample-size code for 16 bits. */
const SAMPLE_SIZE_CODE_16 = 0b100;
/** Block-size code: a 16-bit (blocksize − 1) follows the frame number. */
const BLOCK_SIZE_CODE_16_BIT = 0b0111;

/**
 * Native FLAC in which every subframe is CONSTANT (RFC 9639 §9.2.1): one 16-bit value stands for a whole
 * block, so each frame is ~14 bytes for up to 65535 samples per channel.
 */
export function constantFlac({ sampleRateHz, channelCount, blockSize, frameCount, declaredTotalSamples }: ConstantFlacOptions): Uint8Array {
  const sampleRateCode = FRAME_SAMPLE_RATE_CODES[sampleRateHz];
  if (sampleRateCode === undefined) throw new Error(`no frame-header code for ${sampleRateHz} Hz`);
  const parts: number[][] = [[..."fLaC"].map((character) => character.charCodeAt(0)), streamInfo(sampleRateHz, channelCount, blockSize, declaredTotalSamples)];
  for (let frameNumber = 0; frameNumber < frameCount; frameNumber++) {
    const header = [0xff, 0xf8, (BLOCK_SIZE_CODE_16_BIT << 4) | sampleRateCode, ((channelCount - 1) << 4) | (SAMPLE_SIZE_CODE_16 << 1), ...utf8CodedNumber(frameNumber), (blockSize - 1) >> 8, (blockSize - 1) & 0xff];
    header.push(crc8(header));
    // Per channel: subframe header 0 (type CONSTANT, no wasted bits), then the value; a quiet nonzero one.
    const subframes = Array.from({ length: channelCount }, () => [0x00, 0x00, 0x10]).flat();
    const frame = [...header, ...subframes];
    const crc = crc16(frame);
    parts.push([...frame, crc >> 8, crc & 0xff]);
  }
  return Uint8Array.from(parts.flat());
}

function streamInfo(sampleRateHz: number, channelCount: number, blockSize: number, totalSamples: number): number[] {
  const bits: [value: number, width: number][] = [
    [blockSize, 16],
    [blockSize, 16],
    [0, 24], // minimum frame size: unknown
    [0, 24], // maximum frame size: unknown
    [sampleRateHz, 20],
    [channelCount - 1, 3],
    [BITS_PER_SAMPLE - 1, 5],
    [Math.floor(totalSamples / 2 ** 32), 4],
    [totalSamples % 2 ** 32, 32],
  ];
  const body: number[] = [];
  let accumulator = 0;
  let accumulatedBits = 0;
  for (const [value, width] of bits) {
    for (let bit = width - 1; bit >= 0; bit--) {
      accumulator = (accumulator << 1) | (Math.floor(value / 2 ** bit) & 1);
      if (++accumulatedBits === 8) {
        body.push(accumulator);
        accumulator = 0;
        accumulatedBits = 0;
      }
    }
  }
  body.push(...new Array<number>(16).fill(0)); // MD5: unknown
  // Metadata block header: last-block flag, type 0 (STREAMINFO), 24-bit length.
  return [0x80, 0, 0, body.length, ...body];
}

/** FLAC's frame number coding: UTF-8's scheme, extended to 36 bits. */
function utf8CodedNumber(value: number): number[] {
  if (value < 0x80) return [value];
  const continuation: number[] = [];
  let rest = value;
  let leadingCapacity = 0x3f;
  while (rest > leadingCapacity >> 1) {
    continuation.unshift(0x80 | (rest & 0x3f));
    rest = Math.floor(rest / 64);
    leadingCapacity >>= 1;
  }
  const prefix = (0xff << (7 - continuation.length)) & 0xff;
  return [prefix | rest, ...continuation];
}

function crc8(bytes: number[]): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x80 ? ((crc << 1) ^ 0x07) & 0xff : (crc << 1) & 0xff;
  }
  return crc;
}

function crc16(bytes: number[]): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x8005) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/**
 * Mono 16-bit WAV holding `bodySeconds` of quiet samples behind a header whose data size says
 * `declaredDataBytes` (a number, or "streaming" for 0xFFFFFFFF as a live writer leaves it).
 */
export function wavWithDeclaredSize(sampleRateHz: number, bodySeconds: number, declaredDataBytes: number | "streaming"): Uint8Array {
  const header = wavHeader(sampleRateHz, declaredDataBytes);
  const file = new Uint8Array(header.length + Math.round(bodySeconds * sampleRateHz) * 2);
  file.set(header);
  for (let offset = header.length; offset < file.length; offset += 2) file[offset] = 0x10;
  return file;
}

const OGG_PAGE_HEADER_BYTES = 27;
const OGG_GRANULE_AT = 6;
const OGG_CRC_AT = 22;

/**
 * The same Ogg stream with every page's granule position set to -1 ("no packet ends here"), CRCs
 * recomputed: nothing in the container then says how long the audio is.
 */
export function withoutOggGranules(ogg: Uint8Array): Uint8Array {
  const copy = ogg.slice();
  const view = new DataView(copy.buffer);
  for (let offset = 0; offset + OGG_PAGE_HEADER_BYTES <= copy.length; ) {
    const segmentCount = copy[offset + 26]!;
    let pageBytes = OGG_PAGE_HEADER_BYTES + segmentCount;
    for (let i = 0; i < segmentCount; i++) pageBytes += copy[offset + OGG_PAGE_HEADER_BYTES + i]!;
    // Header pages (granule 0) keep theirs: decoders read them to find the stream's start.
    if (view.getBigUint64(offset + OGG_GRANULE_AT, true) !== 0n) view.setBigInt64(offset + OGG_GRANULE_AT, -1n, true);
    view.setUint32(offset + OGG_CRC_AT, 0, true);
    view.setUint32(offset + OGG_CRC_AT, oggCrc(copy.subarray(offset, offset + pageBytes)), true);
    offset += pageBytes;
  }
  return copy;
}

/** Ogg's CRC-32: polynomial 0x04c11db7, not reflected, initial value 0. */
function oggCrc(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 24;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x80000000 ? (crc << 1) ^ 0x04c11db7 : crc << 1;
  }
  return crc >>> 0;
}

/**
 * Silence encoded by ffmpeg, written to a pipe (Ogg, ADTS and MP3 need no seeking): `codecArgs` picks the
 * codec and container, e.g. ["-c:a", "libvorbis", "-f", "ogg"]. Silence is what real encoders pack tightest.
 */
export function ffmpegSilence(seconds: number, sampleRateHz: number, codecArgs: string[]): Uint8Array {
  const result = spawnSync("ffmpeg", ["-v", "error", "-f", "lavfi", "-i", `anullsrc=r=${sampleRateHz}:cl=mono`, "-t", String(seconds), ...codecArgs, "pipe:1"], { maxBuffer: 1 << 26 });
  if (result.error) throw new Error(`ffmpeg is required by these tests: apt-get install ffmpeg (${result.error.message})`);
  if (result.status !== 0) throw new Error(`ffmpeg failed: ${result.stderr.toString()}`);
  return new Uint8Array(result.stdout);
}

export const OGG_VORBIS = ["-c:a", "libvorbis", "-q:a", "0", "-f", "ogg"];

export interface ReferenceBomb {
  label: string;
  bytes: Uint8Array;
  /** Decoded seconds named in the refusal, when decoding had to start (nothing declared the length). */
  stopsWhileDecoding: boolean;
}

/** One of each kind, as the routes see them: each decodes (or claims) an hour. */
export function referenceBombs(): ReferenceBomb[] {
  const hourOfFrames = Math.ceil((3600 * 44100) / 65535);
  const flac = (declaredTotalSamples: number) => constantFlac({ sampleRateHz: 44100, channelCount: 1, blockSize: 65535, frameCount: hourOfFrames, declaredTotalSamples });
  const vorbisHour = ffmpegSilence(3600, 8000, OGG_VORBIS);
  return [
    { label: "FLAC of CONSTANT subframes declaring an hour", bytes: flac(hourOfFrames * 65535), stopsWhileDecoding: false },
    { label: "FLAC of CONSTANT subframes, an hour behind total_samples = 0", bytes: flac(0), stopsWhileDecoding: true },
    { label: "WAV with data size 0xFFFFFFFF over 10 min", bytes: wavWithDeclaredSize(8000, 600, "streaming"), stopsWhileDecoding: false },
    { label: "Ogg Vorbis: an hour of silence", bytes: vorbisHour, stopsWhileDecoding: false },
    { label: "Ogg Vorbis: an hour of silence, granule positions unset", bytes: withoutOggGranules(vorbisHour), stopsWhileDecoding: true },
  ];
}

/** The seconds a refusal says were decoded before the decode stopped ("decoding stopped after 52.0 s"), or undefined. */
export function decodedSecondsInRefusal(message: string): number | undefined {
  const match = /decoding stopped after (\d+(?:\.\d+)?) s/.exec(message);
  return match ? Number(match[1]) : undefined;
}
