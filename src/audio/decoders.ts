/**
 * In-process decoding of uploaded and reference audio to Float32 PCM, with no ffmpeg at run time.
 *
 * The container is sniffed from the bytes, never from a MIME type or file name: browsers label a
 * MediaRecorder WebM as "video/webm", and clients send "application/octet-stream" for anything.
 *
 *   container            codec          decoder
 *   WAV (RIFF/WAVE)      PCM int/float  the parser below (PCM needs no library)
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

export interface DecodedAudio {
  /** One array per channel, all the same length; nominally within [-1, 1]. */
  channels: Float32Array[];
  sampleRateHz: number;
}

export class AudioDecodeError extends Error {
  override name = "AudioDecodeError";
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

/** Sniffs the container from the bytes (not the MIME type) and decodes it. */
export async function decodeAudio(bytes: Uint8Array): Promise<DecodedAudio> {
  if (bytes.length === 0) throw new AudioDecodeError("the audio is empty (0 bytes)");
  const located = locateContainer(bytes);
  if (!located) {
    const endsInsideTag = skipId3v2Tags(bytes) >= bytes.length;
    throw new AudioDecodeError(endsInsideTag ? "the file ends inside its ID3 tag, before any audio (truncated?)" : `unrecognised audio format: expected ${SUPPORTED_FORMATS}`);
  }
  const name = CONTAINER_NAMES[located.container];
  let audio: DecodedAudio;
  try {
    audio = await DECODERS[located.container](bytes.subarray(located.audioStartByte));
  } catch (error) {
    if (error instanceof DecoderLoadError) throw error;
    // Every other failure inside a decoder, down to a wasm trap, is the input's fault: callers answer 400, not 500.
    throw new AudioDecodeError(`${name} audio could not be decoded: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  const frameCount = audio.channels[0]?.length ?? 0;
  if (frameCount === 0) throw new AudioDecodeError(`${name} audio could not be decoded: it holds no audio samples (corrupt or truncated file?)`);
  if (!(audio.sampleRateHz > 0)) throw new AudioDecodeError(`${name} audio could not be decoded: invalid sample rate ${audio.sampleRateHz}`);
  return audio;
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

const DECODERS: Record<AudioContainer, (bytes: Uint8Array) => Promise<DecodedAudio>> = {
  wav: async (bytes) => decodeWav(bytes),
  flac: decodeFlac,
  mp3: decodeMp3,
  ogg: decodeOgg,
  webm: (bytes) => decodeDemuxed(bytes, "matroska"),
  mp4: (bytes) => decodeDemuxed(bytes, "isobmff"),
  aac: decodeAdts,
};

// ---------------------------------------------------------------------------------------------
// WAV

const WAVE_FORMAT_PCM = 0x0001;
const WAVE_FORMAT_IEEE_FLOAT = 0x0003;
const WAVE_FORMAT_EXTENSIBLE = 0xfffe;
/** WAVE_FORMAT_EXTENSIBLE's SubFormat GUID is the format tag followed by these 12 fixed bytes (KSDATAFORMAT_SUBTYPE_*). */
const EXTENSIBLE_SUBFORMAT_SUFFIX = [0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71];
const RIFF_HEADER_BYTES = 12;
const CHUNK_HEADER_BYTES = 8;
const FMT_PCM_BYTES = 16;
const FMT_EXTENSIBLE_BYTES = 40;

interface WavSampleFormat {
  channelCount: number;
  sampleRateHz: number;
  bytesPerSample: number;
  isFloat: boolean;
}

function decodeWav(bytes: Uint8Array): DecodedAudio {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let format: WavSampleFormat | undefined;
  for (let offset = RIFF_HEADER_BYTES; offset + CHUNK_HEADER_BYTES <= bytes.length; ) {
    const declaredBytes = view.getUint32(offset + 4, true);
    const bodyStart = offset + CHUNK_HEADER_BYTES;
    const availableBytes = bytes.length - bodyStart;
    if (startsWithAscii(bytes, offset, "fmt ")) {
      if (declaredBytes > availableBytes) throw new Error("the file ends inside its fmt chunk");
      format = parseWavFormat(new DataView(bytes.buffer, bytes.byteOffset + bodyStart, declaredBytes));
    } else if (startsWithAscii(bytes, offset, "data")) {
      if (!format) throw new Error("the data chunk comes before the fmt chunk");
      // Streaming writers cannot seek back to fill in the size and leave 0xFFFFFFFF; a cut file declares more
      // than arrived. Either way the samples run to the end of the file.
      return decodePcm(new DataView(bytes.buffer, bytes.byteOffset + bodyStart, Math.min(declaredBytes, availableBytes)), format);
    }
    // Chunks are padded to an even length.
    offset = bodyStart + declaredBytes + (declaredBytes & 1);
  }
  throw new Error(format ? "no data chunk" : "no fmt chunk");
}

function parseWavFormat(fmt: DataView): WavSampleFormat {
  if (fmt.byteLength < FMT_PCM_BYTES) throw new Error(`the fmt chunk is ${fmt.byteLength} bytes, shorter than the ${FMT_PCM_BYTES} that PCM needs`);
  let formatTag = fmt.getUint16(0, true);
  const channelCount = fmt.getUint16(2, true);
  const sampleRateHz = fmt.getUint32(4, true);
  const blockAlignBytes = fmt.getUint16(12, true);
  const bitsPerSample = fmt.getUint16(14, true);
  if (formatTag === WAVE_FORMAT_EXTENSIBLE) {
    if (fmt.byteLength < FMT_EXTENSIBLE_BYTES) throw new Error("the WAVE_FORMAT_EXTENSIBLE fmt chunk is truncated");
    const isStandardSubformat = EXTENSIBLE_SUBFORMAT_SUFFIX.every((value, i) => fmt.getUint8(28 + i) === value);
    if (!isStandardSubformat) throw new Error("unsupported WAVE_FORMAT_EXTENSIBLE subformat");
    formatTag = fmt.getUint16(24, true);
  }
  if (channelCount === 0) throw new Error("the fmt chunk declares 0 channels");
  if (sampleRateHz === 0) throw new Error("the fmt chunk declares a sample rate of 0 Hz");
  // Samples narrower than their container (20-bit in 24, 24-bit in 32) are left-justified, so reading the whole container is exact.
  const bytesPerSample = Math.ceil(bitsPerSample / 8);
  const isFloat = formatTag === WAVE_FORMAT_IEEE_FLOAT;
  if (formatTag !== WAVE_FORMAT_PCM && !isFloat) throw new Error(`unsupported WAV format tag 0x${formatTag.toString(16)} (expected PCM or IEEE float)`);
  if (isFloat ? bytesPerSample !== 4 && bytesPerSample !== 8 : bytesPerSample < 1 || bytesPerSample > 4) {
    throw new Error(`unsupported ${isFloat ? "float" : "PCM"} sample size of ${bitsPerSample} bits`);
  }
  if (blockAlignBytes !== channelCount * bytesPerSample) {
    throw new Error(`block align of ${blockAlignBytes} bytes does not match ${channelCount} channels of ${bytesPerSample} bytes`);
  }
  return { channelCount, sampleRateHz, bytesPerSample, isFloat };
}

function decodePcm(data: DataView, format: WavSampleFormat): DecodedAudio {
  const { channelCount, bytesPerSample } = format;
  const frameBytes = channelCount * bytesPerSample;
  // A trailing partial frame, from a cut file, is dropped.
  const frameCount = Math.floor(data.byteLength / frameBytes);
  const readSample = pcmSampleReader(data, format);
  const channels = Array.from({ length: channelCount }, () => new Float32Array(frameCount));
  for (let channelIndex = 0; channelIndex < channelCount; channelIndex++) {
    const channel = channels[channelIndex]!;
    for (let frame = 0, byteOffset = channelIndex * bytesPerSample; frame < frameCount; frame++, byteOffset += frameBytes) {
      channel[frame] = readSample(byteOffset);
    }
  }
  return { channels, sampleRateHz: format.sampleRateHz };
}

function pcmSampleReader(data: DataView, { bytesPerSample, isFloat }: WavSampleFormat): (byteOffset: number) => number {
  if (isFloat) return bytesPerSample === 4 ? (o) => data.getFloat32(o, true) : (o) => data.getFloat64(o, true);
  switch (bytesPerSample) {
    case 1:
      // 8-bit WAV is unsigned, centred on 128.
      return (o) => (data.getUint8(o) - 128) / 128;
    case 2:
      return (o) => data.getInt16(o, true) / 32768;
    case 3:
      return (o) => ((data.getInt8(o + 2) << 16) | data.getUint16(o, true)) / 8388608;
    default:
      return (o) => data.getInt32(o, true) / 2147483648;
  }
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

/** These decoders skip corrupt frames and report them, so a file with some damage still decodes; one with nothing decodable must fail. */
function fromWasmDecoder(result: WasmDecodedAudio): DecodedAudio {
  if (result.samplesDecoded === 0) {
    const firstError = result.errors[0];
    throw new Error(firstError ? `no decodable frame (${firstError.message})` : "no decodable frame");
  }
  return { channels: result.channelData, sampleRateHz: result.sampleRate };
}

async function decodeFlac(bytes: Uint8Array): Promise<DecodedAudio> {
  const { FLACDecoder } = await loadDecoder("@wasm-audio-decoders/flac", () => import("@wasm-audio-decoders/flac"));
  const decoder = new FLACDecoder();
  try {
    await decoder.ready;
    return fromWasmDecoder(await decoder.decodeFile(bytes));
  } finally {
    decoder.free();
  }
}

async function decodeMp3(bytes: Uint8Array): Promise<DecodedAudio> {
  const { MPEGDecoder } = await loadDecoder("mpg123-decoder", () => import("mpg123-decoder"));
  const decoder = new MPEGDecoder();
  try {
    await decoder.ready;
    return fromWasmDecoder(decoder.decode(bytes));
  } finally {
    decoder.free();
  }
}

/** The codec is named by the first packet of the first page: the identification header. */
function oggCodec(bytes: Uint8Array): "opus" | "vorbis" | "flac" | undefined {
  const OGG_PAGE_HEADER_BYTES = 27;
  if (bytes.length <= OGG_PAGE_HEADER_BYTES) return undefined;
  const firstPacketByte = OGG_PAGE_HEADER_BYTES + bytes[OGG_PAGE_HEADER_BYTES - 1]!;
  if (startsWithAscii(bytes, firstPacketByte, "OpusHead")) return "opus";
  if (startsWithAscii(bytes, firstPacketByte, "\x01vorbis")) return "vorbis";
  if (startsWithAscii(bytes, firstPacketByte, "\x7fFLAC")) return "flac";
  return undefined;
}

async function decodeOgg(bytes: Uint8Array): Promise<DecodedAudio> {
  switch (oggCodec(bytes)) {
    case "opus": {
      const { OggOpusDecoder } = await loadDecoder("ogg-opus-decoder", () => import("ogg-opus-decoder"));
      const decoder = new OggOpusDecoder();
      try {
        await decoder.ready;
        return fromWasmDecoder(await decoder.decodeFile(bytes));
      } finally {
        decoder.free();
      }
    }
    case "vorbis": {
      const { OggVorbisDecoder } = await loadDecoder("@wasm-audio-decoders/ogg-vorbis", () => import("@wasm-audio-decoders/ogg-vorbis"));
      const decoder = new OggVorbisDecoder();
      try {
        await decoder.ready;
        return fromWasmDecoder(await decoder.decodeFile(bytes));
      } finally {
        decoder.free();
      }
    }
    case "flac":
      // The FLAC decoder recognises the Ogg framing itself.
      return decodeFlac(bytes);
    default:
      throw new Error("the first Ogg page holds no Opus, Vorbis or FLAC header (truncated, or another codec such as Speex)");
  }
}

// ---------------------------------------------------------------------------------------------
// AAC (FAAD2) and demuxed containers (mediabunny)

async function decodeAdts(bytes: Uint8Array): Promise<DecodedAudio> {
  const { default: decodeAac } = await loadDecoder("@audio/decode-aac", () => import("@audio/decode-aac"));
  const { channelData, sampleRate } = await decodeAac(bytes);
  return { channels: channelData, sampleRateHz: sampleRate };
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

async function decodeDemuxed(bytes: Uint8Array, family: "matroska" | "isobmff"): Promise<DecodedAudio> {
  const { Input, BufferSource, EncodedPacketSink, WEBM, MATROSKA, MP4, QTFF } = await loadDecoder("mediabunny", () => import("mediabunny"));
  // Only the sniffed family is offered, so mediabunny cannot reinterpret a damaged file as something else.
  const input = new Input({ source: new BufferSource(bytes), formats: family === "matroska" ? [WEBM, MATROSKA] : [MP4, QTFF] });
  try {
    const track = await input.getPrimaryAudioTrack();
    if (!track) throw new Error("no audio track (is the file truncated before its track headers or index?)");
    const codec = track.codec;
    if (codec !== "opus" && codec !== "aac") throw new Error(`unsupported audio codec ${codec ?? "(unknown)"} (expected Opus or AAC)`);
    const config = await track.getDecoderConfig();
    const demuxed: DemuxedTrack = {
      packets: [],
      firstTimestampSeconds: Infinity,
      endTimestampSeconds: -Infinity,
      description: config?.description === undefined ? undefined : toBytes(config.description),
      channelCount: track.numberOfChannels,
      sampleRateHz: track.sampleRate,
    };
    for await (const packet of new EncodedPacketSink(track).packets()) {
      demuxed.packets.push(packet.data);
      demuxed.firstTimestampSeconds = Math.min(demuxed.firstTimestampSeconds, packet.timestamp);
      demuxed.endTimestampSeconds = Math.max(demuxed.endTimestampSeconds, packet.timestamp + packet.duration);
    }
    if (demuxed.packets.length === 0) throw new Error("the audio track has no packets");
    return codec === "opus" ? await decodeOpusPackets(demuxed, family) : await decodeAacPackets(demuxed, family);
  } finally {
    input.dispose();
  }
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

async function decodeOpusPackets(track: DemuxedTrack, family: "matroska" | "isobmff"): Promise<DecodedAudio> {
  const head = parseOpusHead(track.description, track.channelCount);
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
    const decoded = fromWasmDecoder(decoder.decodeFrames(track.packets));
    return { channels: applyWindow(decoded.channels, presentationWindow(track, family, OPUS_RATE_HZ, head.preSkipSamples)), sampleRateHz: OPUS_RATE_HZ };
  } finally {
    decoder.free();
  }
}

async function decodeAacPackets(track: DemuxedTrack, family: "matroska" | "isobmff"): Promise<DecodedAudio> {
  if (!track.description) throw new Error("the AAC track has no AudioSpecificConfig");
  const { decoder: createAacDecoder } = await loadDecoder("@audio/decode-aac", () => import("@audio/decode-aac"));
  const { startSample, endSample } = presentationWindow(track, family, track.sampleRateHz, 0);
  // The package trims, given the window in seconds: it knows that FAAD2 withholds its first frame and that SBR delays the output.
  const gapless = endSample === undefined ? undefined : { start: startSample / track.sampleRateHz, duration: (endSample - startSample) / track.sampleRateHz };
  const decoder = await createAacDecoder({ asc: track.description, gapless });
  try {
    const { channelData, sampleRate } = decoder.decode(track.packets);
    return { channels: channelData, sampleRateHz: sampleRate };
  } finally {
    decoder.free();
  }
}
