/**
 * In-process decoding of uploaded and reference audio to Float32 PCM, with no ffmpeg at run time.
 *
 * The container is sniffed from the bytes, never from a MIME type or file name: browsers label a
 * MediaRecorder WebM as "video/webm", and clients send "application/octet-stream" for anything.
 *
 *   container            codec          decoder
 *   WAV (RIFF/WAVE)      PCM int/float  wav.ts (PCM needs no library)
 *   FLAC, Ogg FLAC       FLAC           @wasm-audio-decoders/flac (libFLAC)
 *   MP3                  MPEG audio     mpg123-decoder (libmpg123; reads the LAME tag, so gapless)
 *   Ogg                  Vorbis         @wasm-audio-decoders/ogg-vorbis (libvorbis)
 *   Ogg                  Opus           ogg-opus-decoder (libopus)
 *   WebM/Matroska, MP4   Opus, AAC      mediabunny demuxes; opus-decoder (libopus) or @audio/decode-aac
 *   ADTS (.aac)          AAC            @audio/decode-aac (FAAD2)
 *
 * WebCodecs' AudioDecoder does not exist in Bun or Deno, so demuxed packets go to wasm decoders.
 * AAC: @audio/decode-aac is FAAD2 in 360 kB of wasm, loads in tens of milliseconds and reads MP4
 * edit lists for gapless trimming. The alternative in our tree, @ffmpeg/core, is a 32 MB browser build
 * of the whole ffmpeg CLI (0.4 s to load, 200 MB RSS, needs a fake `location` global). Both are GPL;
 * FFmpeg's LGPL AAC decoder is not published as a wasm package. Only AAC is affected: a deployment
 * that must avoid GPL code can drop this one lazy import.
 *
 * Lengths: each decoder trims what its container declares. WAV, FLAC, Ogg (granule positions), MP3
 * with a LAME tag and MP4 (edit list) come out sample-exact. WebM keeps up to one Opus frame (20 ms) of
 * end padding: mediabunny does not expose Matroska's DiscardPadding. Raw ADTS declares nothing: FAAD2
 * withholds its first 1024-sample frame, which absorbs the usual encoder priming, and the end padding
 * (under one frame) stays.
 *
 * Length limit (decompression bombs): FLAC's CONSTANT subframes hold 65535 samples in ~14 bytes, and an
 * Opus or Vorbis packet of silence can be one or two bytes, so a file of a few hundred kB can decode to
 * hours (gigabytes of float32). Every decode therefore takes a maximum duration. It is checked first on
 * the length the container declares (WAV data size, FLAC STREAMINFO, Ogg granule positions, MP4/WebM
 * duration), then, since headers lie or say "unknown", on the samples as they come out: input goes to
 * the decoders in small pieces (demuxed packets in small batches) and the decode stops once the output
 * passes the limit. The channel count and sample rate are capped as well, so that the limit in seconds
 * is also a limit in bytes.
 *
 * Damage: garbage, a file cut inside its headers, or one with no decodable frame throws
 * AudioDecodeError. A file cut inside its audio data decodes to the part that arrived, as ffmpeg does:
 * a streamed WAV leaves its data size unset, so a cut file and a live stream look alike.
 *
 * Concurrency: every decode gets its own decoder instance and frees it. @audio/decode-aac shares one
 * wasm module between instances, which is safe because each decode runs on it synchronously.
 *
 * Each decoder package is imported on first use, so a server that is never sent AAC never loads FAAD2.
 * The wasm-audio-decoders packages print one console.error line per corrupt frame; they have no switch for it.
 */

import { decodeWavSamples, readWavLayout } from "./wav.ts";

export interface DecodedAudio {
  /** One array per channel, all the same length; nominally within [-1, 1]. */
  channels: Float32Array[];
  sampleRateHz: number;
}

export interface DecodeLimits {
  /**
   * The longest audio accepted. Decoding stops with AudioTooLongError as soon as more is known to be
   * there, from the length the container declares or from the samples decoded so far, so that a small
   * file that decodes to hours (a decompression bomb) costs no more than this much audio.
   */
  maxDurationSeconds: number;
}

export class AudioDecodeError extends Error {
  override name = "AudioDecodeError";
}

export class AudioTooLongError extends AudioDecodeError {
  override name = "AudioTooLongError";

  constructor(
    readonly maxDurationSeconds: number,
    /** What showed it, e.g. "the FLAC header declares 3600.0 s" or "decoding stopped after 31.0 s". */
    readonly evidence: string,
    /** How much had been decoded when the decode stopped: 0 when the container's declared length gave it away. */
    readonly decodedSeconds: number,
  ) {
    super(`the audio is longer than the ${maxDurationSeconds} s limit (${evidence})`);
  }
}

export type AudioContainer = "wav" | "flac" | "mp3" | "ogg" | "webm" | "mp4" | "aac";

/** A decoder package that fails to load is a broken install (a server fault), not bad input, so it is not an AudioDecodeError. */
class DecoderLoadError extends Error {
  override name = "DecoderLoadError";
}

function loadDecoder<Module>(packageName: string, load: () => Promise<Module>): Promise<Module> {
  return load().catch((error: unknown) => {
    throw new DecoderLoadError(`the ${packageName} package could not be loaded`, { cause: error });
  });
}

const CONTAINER_NAMES: Record<AudioContainer, string> = {
  wav: "WAV",
  flac: "FLAC",
  mp3: "MP3",
  ogg: "Ogg",
  webm: "WebM/Matroska",
  mp4: "MP4",
  aac: "ADTS AAC",
};

const SUPPORTED_FORMATS = "WAV, FLAC, MP3, Ogg (Vorbis, Opus, FLAC), WebM/Matroska (Opus, AAC), MP4/M4A (AAC, Opus) or ADTS AAC";

/** Sniffs the container from the bytes (not the MIME type) and decodes it, refusing audio longer than the limit. */
export async function decodeAudio(bytes: Uint8Array, limits: DecodeLimits): Promise<DecodedAudio> {
  if (bytes.length === 0) throw new AudioDecodeError("the audio is empty (0 bytes)");
  const located = locateContainer(bytes);
  if (!located) {
    const endsInsideTag = skipId3v2Tags(bytes) >= bytes.length;
    throw new AudioDecodeError(endsInsideTag ? "the file ends inside its ID3 tag, before any audio (truncated?)" : `unrecognised audio format: expected ${SUPPORTED_FORMATS}`);
  }
  const name = CONTAINER_NAMES[located.container];
  let audio: DecodedAudio;
  try {
    audio = await DECODERS[located.container](bytes.subarray(located.audioStartByte), new CappedPcm(limits.maxDurationSeconds));
  } catch (error) {
    if (error instanceof DecoderLoadError || error instanceof AudioTooLongError) throw error;
    // Every other failure inside a decoder, down to a wasm trap, is the input's fault: callers answer 400, not 500.
    throw new AudioDecodeError(`${name} audio could not be decoded: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  const frameCount = audio.channels[0]?.length ?? 0;
  if (frameCount === 0) throw new AudioDecodeError(`${name} audio could not be decoded: it holds no audio samples (corrupt or truncated file?)`);
  if (!(audio.sampleRateHz > 0)) throw new AudioDecodeError(`${name} audio could not be decoded: invalid sample rate ${audio.sampleRateHz}`);
  const seconds = frameCount / audio.sampleRateHz;
  if (seconds > limits.maxDurationSeconds) throw new AudioTooLongError(limits.maxDurationSeconds, `it is ${seconds.toFixed(2)} s long`, seconds);
  return audio;
}

/**
 * What the decoded audio may cost whatever its headers say: 8 channels at 48 kHz, or stereo at 192 kHz.
 * With a 30 s limit the decoded float32 stays under 50 MB.
 */
const MAX_CHANNELS = 8;
const MAX_SAMPLES_PER_SECOND_ALL_CHANNELS = 8 * 48000;
/**
 * How far past the limit the running count may go before the decode stops: decoders emit whole frames,
 * and Opus pre-skip, MP4 edit lists and Ogg end trimming are applied only at the end. The exact limit is
 * checked on the trimmed result.
 */
const RUNNING_MARGIN_SECONDS = 1;

/** Collects decoded chunks and stops the decode, by throwing, as soon as the audio is known to be too long. */
class CappedPcm {
  readonly #chunks: Float32Array[][] = [];
  #frameCount = 0;
  #channelCount = 0;
  #sampleRateHz = 0;

  constructor(readonly maxDurationSeconds: number) {}

  /** The most seconds a decoder may produce (or a container declare) before the decode is refused. */
  get runningLimitSeconds(): number {
    return this.maxDurationSeconds + RUNNING_MARGIN_SECONDS;
  }

  get frameCount(): number {
    return this.#frameCount;
  }

  /** A length the container states, checked before anything is decoded. */
  checkDeclared(seconds: number, evidence: string): void {
    if (seconds > this.runningLimitSeconds) throw new AudioTooLongError(this.maxDurationSeconds, `${evidence} ${seconds.toFixed(1)} s`, 0);
  }

  /** Called with what a header states, before decoding, and again with every decoded chunk's own shape. */
  checkShape(channelCount: number, sampleRateHz: number): void {
    if (channelCount > MAX_CHANNELS || channelCount * sampleRateHz > MAX_SAMPLES_PER_SECOND_ALL_CHANNELS) {
      throw new Error(`${channelCount} channels at ${sampleRateHz} Hz is more than is accepted (at most ${MAX_CHANNELS} channels and ${MAX_SAMPLES_PER_SECOND_ALL_CHANNELS} samples per second across them, e.g. 8 channels at 48 kHz or stereo at 192 kHz)`);
    }
  }

  add(channels: Float32Array[], sampleRateHz: number): void {
    const frameCount = channels[0]?.length ?? 0;
    if (frameCount === 0) return;
    if (this.#chunks.length === 0) {
      this.checkShape(channels.length, sampleRateHz);
      this.#channelCount = channels.length;
      this.#sampleRateHz = sampleRateHz;
    } else if (channels.length !== this.#channelCount || sampleRateHz !== this.#sampleRateHz) {
      throw new Error(`the stream changes from ${this.#channelCount} channels at ${this.#sampleRateHz} Hz to ${channels.length} at ${sampleRateHz} Hz`);
    }
    this.#frameCount += frameCount;
    const decodedSeconds = this.#frameCount / sampleRateHz;
    if (decodedSeconds > this.runningLimitSeconds) {
      throw new AudioTooLongError(this.maxDurationSeconds, `decoding stopped after ${decodedSeconds.toFixed(1)} s`, decodedSeconds);
    }
    this.#chunks.push(channels);
  }

  audio(): DecodedAudio {
    const [first, ...rest] = this.#chunks;
    if (!first) return { channels: [], sampleRateHz: this.#sampleRateHz };
    if (rest.length === 0) return { channels: first, sampleRateHz: this.#sampleRateHz };
    const channels = Array.from({ length: this.#channelCount }, () => new Float32Array(this.#frameCount));
    let offset = 0;
    for (const chunk of this.#chunks) {
      chunk.forEach((samples, channelIndex) => channels[channelIndex]!.set(samples, offset));
      offset += chunk[0]!.length;
    }
    return { channels, sampleRateHz: this.#sampleRateHz };
  }
}

/** The average of all channels: averaging, not summing, keeps a full-scale stereo file from clipping. A mono input is returned as is, not copied. */
export function downmixToMono(audio: DecodedAudio): Float32Array {
  const { channels } = audio;
  if (channels.length === 1) return channels[0]!;
  const mono = new Float32Array(channels[0]?.length ?? 0);
  for (const channel of channels) {
    for (let i = 0; i < mono.length; i++) mono[i]! += channel[i]!;
  }
  for (let i = 0; i < mono.length; i++) mono[i]! /= channels.length;
  return mono;
}

export function sniffContainer(bytes: Uint8Array): AudioContainer | undefined {
  return locateContainer(bytes)?.container;
}

interface LocatedContainer {
  container: AudioContainer;
  /** Past any ID3v2 tags: taggers put them in front of MP3, ADTS and FLAC streams alike. */
  audioStartByte: number;
}

function locateContainer(bytes: Uint8Array): LocatedContainer | undefined {
  if (startsWithAscii(bytes, 0, "RIFF") && startsWithAscii(bytes, 8, "WAVE")) return { container: "wav", audioStartByte: 0 };
  if (startsWithAscii(bytes, 0, "OggS")) return { container: "ogg", audioStartByte: 0 };
  if (startsWithAscii(bytes, 4, "ftyp")) return { container: "mp4", audioStartByte: 0 };
  if (startsWithBytes(bytes, 0, EBML_MAGIC)) return { container: "webm", audioStartByte: 0 };
  const audioStartByte = skipId3v2Tags(bytes);
  if (startsWithAscii(bytes, audioStartByte, "fLaC")) return { container: "flac", audioStartByte };
  if (isAdtsHeader(bytes, audioStartByte)) return { container: "aac", audioStartByte };
  if (isMpegAudioHeader(bytes, audioStartByte)) return { container: "mp3", audioStartByte };
  return undefined;
}

/** The EBML header ID that opens every Matroska and WebM file. */
const EBML_MAGIC = [0x1a, 0x45, 0xdf, 0xa3];

const ID3V2_HEADER_BYTES = 10;
const ID3V2_FOOTER_FLAG = 0x10;

function skipId3v2Tags(bytes: Uint8Array): number {
  let offset = 0;
  while (startsWithAscii(bytes, offset, "ID3") && offset + ID3V2_HEADER_BYTES <= bytes.length) {
    // The tag size is "syncsafe": four 7-bit bytes, so that no tag byte can look like an MPEG frame sync.
    const tagBytes = (bytes[offset + 6]! << 21) | (bytes[offset + 7]! << 14) | (bytes[offset + 8]! << 7) | bytes[offset + 9]!;
    const footerBytes = bytes[offset + 5]! & ID3V2_FOOTER_FLAG ? ID3V2_HEADER_BYTES : 0;
    offset += ID3V2_HEADER_BYTES + tagBytes + footerBytes;
  }
  return offset;
}

/** 12 sync bits, then layer 00 (MPEG audio uses 01–11 there), and a defined sampling-frequency index. */
function isAdtsHeader(bytes: Uint8Array, offset: number): boolean {
  if (offset + 3 > bytes.length) return false;
  return bytes[offset] === 0xff && (bytes[offset + 1]! & 0xf6) === 0xf0 && ((bytes[offset + 2]! >> 2) & 0x0f) < 13;
}

/** 11 sync bits, then no reserved version, layer, bitrate or sample-rate value. */
function isMpegAudioHeader(bytes: Uint8Array, offset: number): boolean {
  if (offset + 3 > bytes.length) return false;
  const versionBits = (bytes[offset + 1]! >> 3) & 0x03;
  const layerBits = (bytes[offset + 1]! >> 1) & 0x03;
  const bitrateIndex = bytes[offset + 2]! >> 4;
  const sampleRateIndex = (bytes[offset + 2]! >> 2) & 0x03;
  return bytes[offset] === 0xff && (bytes[offset + 1]! & 0xe0) === 0xe0 && versionBits !== 1 && layerBits !== 0 && bitrateIndex !== 15 && sampleRateIndex !== 3;
}

function startsWithAscii(bytes: Uint8Array, offset: number, text: string): boolean {
  if (offset + text.length > bytes.length) return false;
  for (let i = 0; i < text.length; i++) {
    if (bytes[offset + i] !== text.charCodeAt(i)) return false;
  }
  return true;
}

function startsWithBytes(bytes: Uint8Array, offset: number, expected: readonly number[]): boolean {
  return offset + expected.length <= bytes.length && expected.every((value, i) => bytes[offset + i] === value);
}

const DECODERS: Record<AudioContainer, (bytes: Uint8Array, pcm: CappedPcm) => Promise<DecodedAudio>> = {
  wav: async (bytes, pcm) => decodeWav(bytes, pcm),
  flac: decodeNativeFlac,
  mp3: decodeMp3,
  ogg: decodeOgg,
  webm: (bytes, pcm) => decodeDemuxed(bytes, "matroska", pcm),
  mp4: (bytes, pcm) => decodeDemuxed(bytes, "isobmff", pcm),
  aac: decodeAdts,
};

// ---------------------------------------------------------------------------------------------
// WAV

function decodeWav(bytes: Uint8Array, pcm: CappedPcm): DecodedAudio {
  const layout = readWavLayout(bytes);
  pcm.checkShape(layout.channelCount, layout.sampleRateHz);
  pcm.checkDeclared(Math.floor(layout.dataBytes / (layout.channelCount * layout.bytesPerSample)) / layout.sampleRateHz, "the WAV data chunk holds");
  return decodeWavSamples(bytes, layout);
}

// ---------------------------------------------------------------------------------------------
// wasm-audio-decoders family: FLAC, MP3, Ogg Vorbis, Ogg Opus

/** What every wasm-audio-decoders decoder returns. */
interface WasmDecodedAudio {
  channelData: Float32Array[];
  samplesDecoded: number;
  sampleRate: number;
  errors: { message: string }[];
}

/** The streaming side of the wasm-audio-decoders API: `decode` takes any slice of the file, `flush` ends the stream. */
interface StreamingDecoder {
  decode(bytes: Uint8Array): WasmDecodedAudio | Promise<WasmDecodedAudio>;
  flush?(): Promise<WasmDecodedAudio>;
}

/**
 * Input is fed in pieces this small because of the densest frames: CONSTANT FLAC frames (~14 bytes per
 * 65535 samples) and one-byte Vorbis or two-byte Opus packets. A 512-byte piece of CONSTANT frames decodes
 * to ~2.4 M samples mono (9 MB), ~7.3 M across 8 channels (29 MB): the decode stops at most that far
 * past the limit. Smaller pieces cost time on ordinary files: 512 bytes decode a 30 s stereo FLAC or
 * Vorbis file about 1.3× slower than whole, 256 bytes about 2×.
 */
const DECODE_PIECE_BYTES = 512;

/**
 * Decodes piece by piece into `pcm`, which stops the decode once it is too long. These decoders skip
 * corrupt frames and report them, so a file with some damage still decodes; one with nothing decodable must fail.
 */
async function decodeInPieces(decoder: StreamingDecoder, bytes: Uint8Array, pcm: CappedPcm): Promise<DecodedAudio> {
  let firstError: string | undefined;
  const take = (decoded: WasmDecodedAudio) => {
    firstError ??= decoded.errors[0]?.message;
    if (decoded.samplesDecoded > 0) pcm.add(decoded.channelData, decoded.sampleRate);
  };
  for (let offset = 0; offset < bytes.length; offset += DECODE_PIECE_BYTES) take(await decoder.decode(bytes.subarray(offset, offset + DECODE_PIECE_BYTES)));
  if (decoder.flush) take(await decoder.flush());
  if (pcm.frameCount === 0) throw new Error(firstError ? `no decodable frame (${firstError})` : "no decodable frame");
  return pcm.audio();
}

/** The STREAMINFO fields that bound a FLAC stream (RFC 9639 §8.2); totalSamples 0 means unknown. */
interface FlacStreamInfo {
  sampleRateHz: number;
  channelCount: number;
  totalSamples: number;
}

const STREAMINFO_BYTES = 34;

function parseFlacStreamInfo(bytes: Uint8Array, offset: number): FlacStreamInfo | undefined {
  if (offset + STREAMINFO_BYTES > bytes.length) return undefined;
  const at = (index: number) => bytes[offset + index]!;
  // Bytes 10–17: sample rate (20 bits), channels − 1 (3), bits per sample − 1 (5), total samples (36).
  const sampleRateHz = (at(10) << 12) | (at(11) << 4) | (at(12) >> 4);
  const channelCount = ((at(12) >> 1) & 0x07) + 1;
  const totalSamples = (at(13) & 0x0f) * 2 ** 32 + ((at(14) << 24) >>> 0) + ((at(15) << 16) | (at(16) << 8) | at(17));
  return { sampleRateHz, channelCount, totalSamples };
}

function checkFlacStreamInfo(streamInfo: FlacStreamInfo | undefined, pcm: CappedPcm): void {
  if (!streamInfo || streamInfo.sampleRateHz === 0) return;
  pcm.checkShape(streamInfo.channelCount, streamInfo.sampleRateHz);
  pcm.checkDeclared(streamInfo.totalSamples / streamInfo.sampleRateHz, "the FLAC header declares");
}

/** "fLaC", then the first metadata block's 4-byte header; STREAMINFO must be that block. */
const NATIVE_STREAMINFO_AT = 8;

async function decodeNativeFlac(bytes: Uint8Array, pcm: CappedPcm): Promise<DecodedAudio> {
  const isStreamInfoFirst = bytes.length > 4 && (bytes[4]! & 0x7f) === 0;
  if (isStreamInfoFirst) checkFlacStreamInfo(parseFlacStreamInfo(bytes, NATIVE_STREAMINFO_AT), pcm);
  return decodeFlac(bytes, pcm);
}

async function decodeFlac(bytes: Uint8Array, pcm: CappedPcm): Promise<DecodedAudio> {
  const { FLACDecoder } = await loadDecoder("@wasm-audio-decoders/flac", () => import("@wasm-audio-decoders/flac"));
  const decoder = new FLACDecoder();
  try {
    await decoder.ready;
    return await decodeInPieces(decoder, bytes, pcm);
  } finally {
    decoder.free();
  }
}

async function decodeMp3(bytes: Uint8Array, pcm: CappedPcm): Promise<DecodedAudio> {
  const { MPEGDecoder } = await loadDecoder("mpg123-decoder", () => import("mpg123-decoder"));
  const decoder = new MPEGDecoder();
  try {
    await decoder.ready;
    return await decodeInPieces(decoder, bytes, pcm);
  } finally {
    decoder.free();
  }
}

const OGG_PAGE_HEADER_BYTES = 27;
const OGG_GRANULE_AT = 6;
const OGG_SERIAL_AT = 14;
const OGG_SEGMENT_COUNT_AT = 26;
const OPUS_HEAD_BYTES = 19;
const VORBIS_IDENTIFICATION_BYTES = 30;
/** "\x7fFLAC", mapping version (2 bytes), header count (2), "fLaC", the STREAMINFO block header (4). */
const OGG_FLAC_STREAMINFO_AT = 17;

/** What the identification header, the first packet of the first page, says about the stream. */
type OggStreamHead =
  | { codec: "opus"; channelCount: number; preSkipSamples: number }
  | { codec: "vorbis"; channelCount: number; sampleRateHz: number }
  | { codec: "flac"; streamInfo: FlacStreamInfo | undefined };

function readOggStreamHead(bytes: Uint8Array): OggStreamHead | undefined {
  if (bytes.length <= OGG_PAGE_HEADER_BYTES) return undefined;
  const packetAt = OGG_PAGE_HEADER_BYTES + bytes[OGG_SEGMENT_COUNT_AT]!;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (startsWithAscii(bytes, packetAt, "OpusHead") && packetAt + OPUS_HEAD_BYTES <= bytes.length) {
    return { codec: "opus", channelCount: bytes[packetAt + 9]!, preSkipSamples: view.getUint16(packetAt + 10, true) };
  }
  if (startsWithAscii(bytes, packetAt, "\x01vorbis") && packetAt + VORBIS_IDENTIFICATION_BYTES <= bytes.length) {
    return { codec: "vorbis", channelCount: bytes[packetAt + 11]!, sampleRateHz: view.getUint32(packetAt + 12, true) };
  }
  if (startsWithAscii(bytes, packetAt, "\x7fFLAC")) return { codec: "flac", streamInfo: parseFlacStreamInfo(bytes, packetAt + OGG_FLAC_STREAMINFO_AT) };
  return undefined;
}

/**
 * Granule positions: the sample count at the end of each page. The span from the first audio page to
 * the last of the first logical stream is the declared length, short by the first page's own samples;
 * a stream cut from a live one starts at a high granule, so the first is subtracted rather than trusted
 * to be 0. Pages are walked by their headers; a damaged stretch ends the walk (the decoded count still holds).
 */
function oggGranuleSpan(bytes: Uint8Array): number | undefined {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const serial = view.getUint32(OGG_SERIAL_AT, true);
  let firstGranule: bigint | undefined;
  let lastGranule: bigint | undefined;
  for (let offset = 0; offset + OGG_PAGE_HEADER_BYTES <= bytes.length && startsWithAscii(bytes, offset, "OggS"); ) {
    const segmentCount = bytes[offset + OGG_SEGMENT_COUNT_AT]!;
    if (offset + OGG_PAGE_HEADER_BYTES + segmentCount > bytes.length) break;
    let bodyBytes = 0;
    for (let i = 0; i < segmentCount; i++) bodyBytes += bytes[offset + OGG_PAGE_HEADER_BYTES + i]!;
    // Header pages carry granule 0; −1 marks a page on which no packet ends.
    const granule = view.getBigInt64(offset + OGG_GRANULE_AT, true);
    if (view.getUint32(offset + OGG_SERIAL_AT, true) === serial && granule > 0n) {
      firstGranule ??= granule;
      lastGranule = granule;
    }
    offset += OGG_PAGE_HEADER_BYTES + segmentCount + bodyBytes;
  }
  return firstGranule === undefined || lastGranule === undefined ? undefined : Number(lastGranule - firstGranule);
}

async function decodeOgg(bytes: Uint8Array, pcm: CappedPcm): Promise<DecodedAudio> {
  const head = readOggStreamHead(bytes);
  if (!head) throw new Error("the first Ogg page holds no Opus, Vorbis or FLAC header (truncated, or another codec such as Speex)");
  const granuleSpan = oggGranuleSpan(bytes);
  const checkGranules = (sampleRateHz: number) => {
    if (granuleSpan !== undefined && sampleRateHz > 0) pcm.checkDeclared(granuleSpan / sampleRateHz, "its Ogg granule positions declare");
  };
  switch (head.codec) {
    case "opus": {
      pcm.checkShape(head.channelCount, OPUS_RATE_HZ);
      checkGranules(OPUS_RATE_HZ);
      const { OggOpusDecoder } = await loadDecoder("ogg-opus-decoder", () => import("ogg-opus-decoder"));
      const decoder = new OggOpusDecoder();
      try {
        await decoder.ready;
        return await decodeInPieces(decoder, bytes, pcm);
      } finally {
        decoder.free();
      }
    }
    case "vorbis": {
      pcm.checkShape(head.channelCount, head.sampleRateHz);
      checkGranules(head.sampleRateHz);
      const { OggVorbisDecoder } = await loadDecoder("@wasm-audio-decoders/ogg-vorbis", () => import("@wasm-audio-decoders/ogg-vorbis"));
      const decoder = new OggVorbisDecoder();
      try {
        await decoder.ready;
        return await decodeInPieces(decoder, bytes, pcm);
      } finally {
        decoder.free();
      }
    }
    case "flac":
      checkFlacStreamInfo(head.streamInfo, pcm);
      checkGranules(head.streamInfo?.sampleRateHz ?? 0);
      // The FLAC decoder recognises the Ogg framing itself.
      return decodeFlac(bytes, pcm);
  }
}

// ---------------------------------------------------------------------------------------------
// AAC (FAAD2) and demuxed containers (mediabunny)

async function decodeAdts(bytes: Uint8Array, pcm: CappedPcm): Promise<DecodedAudio> {
  const { decoder: createAacDecoder } = await loadDecoder("@audio/decode-aac", () => import("@audio/decode-aac"));
  const decoder = await createAacDecoder();
  try {
    // No await between pieces: the decoders share one wasm module (see Concurrency above).
    for (let offset = 0; offset < bytes.length; offset += DECODE_PIECE_BYTES) {
      const { channelData, sampleRate } = decoder.decode(bytes.subarray(offset, offset + DECODE_PIECE_BYTES));
      pcm.add(channelData, sampleRate);
    }
    if (pcm.frameCount === 0) throw new Error("no decodable frame");
    return pcm.audio();
  } finally {
    decoder.free();
  }
}

/**
 * The part of the decoded stream to keep, as sample indices into it. ISOBMFF timestamps follow the
 * edit list, so priming sits before zero and the end is exact. Matroska timestamps are rounded to
 * 1 ms and mediabunny applies neither CodecDelay nor DiscardPadding, so there only the codec's own
 * pre-skip (Opus) is known.
 */
interface PresentationWindow {
  startSample: number;
  endSample: number | undefined;
}

interface DemuxedTrack {
  packets: Uint8Array[];
  firstTimestampSeconds: number;
  endTimestampSeconds: number;
  description: Uint8Array | undefined;
  channelCount: number;
  sampleRateHz: number;
}

/** The shortest packet either codec makes (an Opus frame is 2.5–120 ms, an AAC one 1024 samples or 960), so a count past limit / this is too long. */
const MIN_PACKET_SECONDS = 0.0025;
/** Packets per decoder call: 64 Opus packets decode to at most 7.7 s, 64 AAC ones (with SBR) to 131072 samples. */
const PACKETS_PER_DECODE = 64;

async function decodeDemuxed(bytes: Uint8Array, family: "matroska" | "isobmff", pcm: CappedPcm): Promise<DecodedAudio> {
  const { Input, BufferSource, EncodedPacketSink, WEBM, MATROSKA, MP4, QTFF } = await loadDecoder("mediabunny", () => import("mediabunny"));
  // Only the sniffed family is offered, so mediabunny cannot reinterpret a damaged file as something else.
  const input = new Input({ source: new BufferSource(bytes), formats: family === "matroska" ? [WEBM, MATROSKA] : [MP4, QTFF] });
  try {
    const track = await input.getPrimaryAudioTrack();
    if (!track) throw new Error("no audio track (is the file truncated before its track headers or index?)");
    const codec = track.codec;
    if (codec !== "opus" && codec !== "aac") throw new Error(`unsupported audio codec ${codec ?? "(unknown)"} (expected Opus or AAC)`);
    pcm.checkShape(track.numberOfChannels, track.sampleRate);
    const declaredSeconds = await track.getDurationFromMetadata();
    if (declaredSeconds !== null) pcm.checkDeclared(declaredSeconds, `its ${CONTAINER_NAMES[family === "matroska" ? "webm" : "mp4"]} header declares`);
    const config = await track.getDecoderConfig();
    const demuxed: DemuxedTrack = {
      packets: [],
      firstTimestampSeconds: Infinity,
      endTimestampSeconds: -Infinity,
      description: config?.description === undefined ? undefined : toBytes(config.description),
      channelCount: track.numberOfChannels,
      sampleRateHz: track.sampleRate,
    };
    const maxPackets = Math.ceil(pcm.runningLimitSeconds / MIN_PACKET_SECONDS);
    for await (const packet of new EncodedPacketSink(track).packets()) {
      if (demuxed.packets.length === maxPackets) {
        throw new AudioTooLongError(pcm.maxDurationSeconds, `it holds more than ${maxPackets} packets of at least ${MIN_PACKET_SECONDS * 1000} ms each`, 0);
      }
      demuxed.packets.push(packet.data);
      demuxed.firstTimestampSeconds = Math.min(demuxed.firstTimestampSeconds, packet.timestamp);
      demuxed.endTimestampSeconds = Math.max(demuxed.endTimestampSeconds, packet.timestamp + packet.duration);
      pcm.checkDeclared(demuxed.endTimestampSeconds - demuxed.firstTimestampSeconds, "its packet timestamps run to");
    }
    if (demuxed.packets.length === 0) throw new Error("the audio track has no packets");
    return codec === "opus" ? await decodeOpusPackets(demuxed, family, pcm) : await decodeAacPackets(demuxed, family, pcm);
  } finally {
    input.dispose();
  }
}

function packetBatches(packets: Uint8Array[]): Uint8Array[][] {
  const batches: Uint8Array[][] = [];
  for (let start = 0; start < packets.length; start += PACKETS_PER_DECODE) batches.push(packets.slice(start, start + PACKETS_PER_DECODE));
  return batches;
}

function toBytes(source: AllowSharedBufferSource): Uint8Array {
  return ArrayBuffer.isView(source) ? new Uint8Array(source.buffer, source.byteOffset, source.byteLength) : new Uint8Array(source);
}

function presentationWindow(track: DemuxedTrack, family: "matroska" | "isobmff", rateHz: number, codecPreSkipSamples: number): PresentationWindow {
  if (family === "matroska") return { startSample: codecPreSkipSamples, endSample: undefined };
  // Decoded sample i lies at firstTimestamp + i / rate; the presentation runs from time 0 (or the first packet, if later) to the end.
  const toSampleIndex = (seconds: number) => Math.round((seconds - track.firstTimestampSeconds) * rateHz);
  // An MP4 edit list and Opus' pre-skip describe the same priming, and a fragmented MP4 may carry only the pre-skip: take the larger.
  const startSample = Math.max(codecPreSkipSamples, toSampleIndex(Math.max(0, track.firstTimestampSeconds)));
  return { startSample, endSample: Math.max(startSample, toSampleIndex(track.endTimestampSeconds)) };
}

function applyWindow(channels: Float32Array[], { startSample, endSample }: PresentationWindow): Float32Array[] {
  return channels.map((channel) => channel.subarray(startSample, endSample));
}

/** Opus always decodes at 48 kHz, whatever rate the encoder was fed. */
const OPUS_RATE_HZ = 48000;

interface OpusHead {
  channelCount: number;
  preSkipSamples: number;
  streamCount: number;
  coupledStreamCount: number;
  channelMappingTable: number[];
}

/** RFC 7845 §5.1. WebM's CodecPrivate holds it as is; mediabunny rebuilds it from MP4's dOps box. */
function parseOpusHead(head: Uint8Array | undefined, fallbackChannelCount: number): OpusHead {
  if (!head || head.length < 19 || !startsWithAscii(head, 0, "OpusHead")) {
    return { channelCount: fallbackChannelCount, preSkipSamples: 0, streamCount: 1, coupledStreamCount: fallbackChannelCount - 1, channelMappingTable: fallbackChannelCount === 2 ? [0, 1] : [0] };
  }
  const channelCount = head[9]!;
  const preSkipSamples = head[10]! | (head[11]! << 8);
  const mappingFamily = head[18]!;
  if (mappingFamily === 0) {
    return { channelCount, preSkipSamples, streamCount: 1, coupledStreamCount: channelCount - 1, channelMappingTable: channelCount === 2 ? [0, 1] : [0] };
  }
  if (head.length < 21 + channelCount) throw new Error("the OpusHead channel mapping is truncated");
  return { channelCount, preSkipSamples, streamCount: head[19]!, coupledStreamCount: head[20]!, channelMappingTable: Array.from(head.subarray(21, 21 + channelCount)) };
}

async function decodeOpusPackets(track: DemuxedTrack, family: "matroska" | "isobmff", pcm: CappedPcm): Promise<DecodedAudio> {
  const head = parseOpusHead(track.description, track.channelCount);
  pcm.checkShape(head.channelCount, OPUS_RATE_HZ);
  const { OpusDecoder } = await loadDecoder("opus-decoder", () => import("opus-decoder"));
  // Pre-skip is applied below through the window, not by the decoder, so that MP4's edit list cannot trim it twice.
  const decoder = new OpusDecoder({
    channels: head.channelCount,
    streamCount: head.streamCount,
    coupledStreamCount: head.coupledStreamCount,
    channelMappingTable: head.channelMappingTable,
    preSkip: 0,
  });
  try {
    await decoder.ready;
    let firstError: string | undefined;
    for (const batch of packetBatches(track.packets)) {
      const decoded = decoder.decodeFrames(batch);
      firstError ??= decoded.errors[0]?.message;
      if (decoded.samplesDecoded > 0) pcm.add(decoded.channelData, decoded.sampleRate);
    }
    if (pcm.frameCount === 0) throw new Error(firstError ? `no decodable frame (${firstError})` : "no decodable frame");
    return { channels: applyWindow(pcm.audio().channels, presentationWindow(track, family, OPUS_RATE_HZ, head.preSkipSamples)), sampleRateHz: OPUS_RATE_HZ };
  } finally {
    decoder.free();
  }
}

async function decodeAacPackets(track: DemuxedTrack, family: "matroska" | "isobmff", pcm: CappedPcm): Promise<DecodedAudio> {
  if (!track.description) throw new Error("the AAC track has no AudioSpecificConfig");
  const { decoder: createAacDecoder } = await loadDecoder("@audio/decode-aac", () => import("@audio/decode-aac"));
  const { startSample, endSample } = presentationWindow(track, family, track.sampleRateHz, 0);
  // The package trims, given the window in seconds: it knows that FAAD2 withholds its first frame and that SBR delays the output.
  const gapless = endSample === undefined ? undefined : { start: startSample / track.sampleRateHz, duration: (endSample - startSample) / track.sampleRateHz };
  const decoder = await createAacDecoder({ asc: track.description, gapless });
  try {
    // No await between batches: the decoders share one wasm module (see Concurrency above).
    for (const batch of packetBatches(track.packets)) {
      const { channelData, sampleRate } = decoder.decode(batch);
      pcm.add(channelData, sampleRate);
    }
    return pcm.audio();
  } finally {
    decoder.free();
  }
}
