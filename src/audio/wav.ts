// 16-bit PCM and RIFF/WAVE framing for mono audio, and the one WAV reader
// (uploads, ref_audio, the classic model's Flite output). Pure functions, no
// codec library: these two formats are what every other encoder here is
// checked against, so they must not depend on anything that could itself be wrong.

const WAV_HEADER_BYTES = 44;
const BYTES_PER_SAMPLE = 2;
const INT16_FULL_SCALE = 32767;
// A streaming response cannot know its length up front; 0xFFFFFFFF is the
// de-facto "unknown size" that ffmpeg, browsers and sox read until EOF.
const UNKNOWN_CHUNK_BYTES = 0xffffffff;

/**
 * Converts float samples in [-1, 1] to 16-bit PCM. Values outside the range
 * are clipped rather than wrapped (a wrapped overshoot is a loud click), and
 * the scale is symmetric (±32767) so silence stays exactly 0 and a signal and
 * its negation quantise to negated integers. NaN becomes 0.
 */
export function floatToInt16(samples: Float32Array): Int16Array {
  const pcm = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    const scaled = Math.max(-1, Math.min(1, samples[i]!)) * INT16_FULL_SCALE;
    // Math.round sends halves up (-0.5 → -0), which would break the symmetry; round them away from zero.
    pcm[i] = scaled < 0 ? -Math.round(-scaled) : Math.round(scaled);
  }
  return pcm;
}

/** Little-endian 16-bit PCM bytes, the body of a WAV file and the API's "pcm" format. */
export function pcm16Bytes(samples: Float32Array): Uint8Array {
  const pcm = floatToInt16(samples);
  const bytes = new Uint8Array(pcm.length * BYTES_PER_SAMPLE);
  // Written through a DataView so the byte order does not depend on the host's endianness.
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < pcm.length; i++) view.setInt16(i * BYTES_PER_SAMPLE, pcm[i]!, true);
  return bytes;
}

/**
 * The 44-byte canonical RIFF header for mono 16-bit PCM. Pass the data length
 * in bytes, or "streaming" when the header must be sent before the audio is
 * known: both size fields then hold 0xFFFFFFFF.
 */
export function wavHeader(sampleRateHz: number, dataBytes: number | "streaming"): Uint8Array {
  if (!Number.isInteger(sampleRateHz) || sampleRateHz <= 0) {
    throw new RangeError(`sampleRateHz must be a positive integer, got ${sampleRateHz}`);
  }
  const riffBytes = dataBytes === "streaming" ? UNKNOWN_CHUNK_BYTES : WAV_HEADER_BYTES - 8 + dataBytes;
  const dataChunkBytes = dataBytes === "streaming" ? UNKNOWN_CHUNK_BYTES : dataBytes;
  if (!Number.isInteger(dataChunkBytes) || dataChunkBytes < 0 || riffBytes > UNKNOWN_CHUNK_BYTES) {
    throw new RangeError(`dataBytes must be a non-negative integer that fits a RIFF file, got ${dataBytes}`);
  }

  const header = new Uint8Array(WAV_HEADER_BYTES);
  const view = new DataView(header.buffer);
  const writeTag = (offset: number, tag: string) => {
    for (let i = 0; i < 4; i++) view.setUint8(offset + i, tag.charCodeAt(i));
  };
  const channels = 1;
  const bitsPerSample = BYTES_PER_SAMPLE * 8;

  writeTag(0, "RIFF");
  view.setUint32(4, riffBytes, true);
  writeTag(8, "WAVE");
  writeTag(12, "fmt ");
  view.setUint32(16, 16, true); // fmt chunk size for plain PCM
  view.setUint16(20, 1, true); // WAVE_FORMAT_PCM
  view.setUint16(22, channels, true);
  view.setUint32(24, sampleRateHz, true);
  view.setUint32(28, sampleRateHz * channels * BYTES_PER_SAMPLE, true); // byte rate
  view.setUint16(32, channels * BYTES_PER_SAMPLE, true); // block align
  view.setUint16(34, bitsPerSample, true);
  writeTag(36, "data");
  view.setUint32(40, dataChunkBytes, true);
  return header;
}

/** A complete mono 16-bit WAV file. */
export function encodeWav(samples: Float32Array, sampleRateHz: number): Uint8Array {
  const body = pcm16Bytes(samples);
  const file = new Uint8Array(WAV_HEADER_BYTES + body.length);
  file.set(wavHeader(sampleRateHz, body.length), 0);
  file.set(body, WAV_HEADER_BYTES);
  return file;
}

const WAVE_FORMAT_PCM = 0x0001;
const WAVE_FORMAT_IEEE_FLOAT = 0x0003;
const WAVE_FORMAT_EXTENSIBLE = 0xfffe;
/** WAVE_FORMAT_EXTENSIBLE's SubFormat GUID is the format tag followed by these 12 fixed bytes (KSDATAFORMAT_SUBTYPE_*). */
const EXTENSIBLE_SUBFORMAT_SUFFIX = [0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71];
const RIFF_HEADER_BYTES = 12;
const CHUNK_HEADER_BYTES = 8;
const FMT_PCM_BYTES = 16;
const FMT_EXTENSIBLE_BYTES = 40;

/** What a WAV file's fmt chunk says, and where its samples are. */
export interface WavLayout {
  channelCount: number;
  sampleRateHz: number;
  /** Bytes of one sample of one channel: 1-4 for integer PCM, 4 or 8 for float. */
  bytesPerSample: number;
  isFloat: boolean;
  dataByteOffset: number;
  /** What the data chunk holds of the file: never past its end, nor past the declared size. */
  dataBytes: number;
}

/**
 * Reads the header chunks of a RIFF/WAVE file up to its data chunk; throws an Error naming what is wrong.
 * Integer PCM of 8 to 32 bits and IEEE float of 32 or 64 bits, plain or WAVE_FORMAT_EXTENSIBLE.
 */
export function readWavLayout(bytes: Uint8Array): WavLayout {
  if (bytes.length < RIFF_HEADER_BYTES || !hasTag(bytes, 0, "RIFF") || !hasTag(bytes, 8, "WAVE")) throw new Error("not a RIFF/WAVE file");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let format: Omit<WavLayout, "dataByteOffset" | "dataBytes"> | undefined;
  for (let offset = RIFF_HEADER_BYTES; offset + CHUNK_HEADER_BYTES <= bytes.length; ) {
    const declaredBytes = view.getUint32(offset + 4, true);
    const bodyStart = offset + CHUNK_HEADER_BYTES;
    const availableBytes = bytes.length - bodyStart;
    if (hasTag(bytes, offset, "fmt ")) {
      if (declaredBytes > availableBytes) throw new Error("the file ends inside its fmt chunk");
      format = parseFormatChunk(new DataView(bytes.buffer, bytes.byteOffset + bodyStart, declaredBytes));
    } else if (hasTag(bytes, offset, "data")) {
      if (!format) throw new Error("the data chunk comes before the fmt chunk");
      // Streaming writers cannot seek back to fill in the size and leave 0xFFFFFFFF; a cut file declares more
      // than arrived. Either way the samples run to the end of the file. Bytes past a smaller declared size
      // belong to the next chunk, not to the audio.
      return { ...format, dataByteOffset: bodyStart, dataBytes: Math.min(declaredBytes, availableBytes) };
    }
    // Chunks are padded to an even length.
    offset = bodyStart + declaredBytes + (declaredBytes & 1);
  }
  throw new Error(format ? "no data chunk" : "no fmt chunk");
}

/** The samples `layout` describes as floats, one array per channel; a trailing partial frame (a cut file) is dropped. */
export function decodeWavSamples(bytes: Uint8Array, layout: WavLayout): { channels: Float32Array[]; sampleRateHz: number } {
  const { channelCount, bytesPerSample } = layout;
  const data = new DataView(bytes.buffer, bytes.byteOffset + layout.dataByteOffset, layout.dataBytes);
  const frameBytes = channelCount * bytesPerSample;
  const frameCount = Math.floor(data.byteLength / frameBytes);
  const readSample = sampleReader(data, layout);
  const channels = Array.from({ length: channelCount }, () => new Float32Array(frameCount));
  for (let channelIndex = 0; channelIndex < channelCount; channelIndex++) {
    const channel = channels[channelIndex]!;
    for (let frame = 0, byteOffset = channelIndex * bytesPerSample; frame < frameCount; frame++, byteOffset += frameBytes) {
      channel[frame] = readSample(byteOffset);
    }
  }
  return { channels, sampleRateHz: layout.sampleRateHz };
}

/** A whole WAV file as floats, one array per channel. */
export function decodeWav(bytes: Uint8Array): { channels: Float32Array[]; sampleRateHz: number } {
  return decodeWavSamples(bytes, readWavLayout(bytes));
}

function parseFormatChunk(fmt: DataView): Omit<WavLayout, "dataByteOffset" | "dataBytes"> {
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

function sampleReader(data: DataView, { bytesPerSample, isFloat }: Pick<WavLayout, "bytesPerSample" | "isFloat">): (byteOffset: number) => number {
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

function hasTag(bytes: Uint8Array, offset: number, tag: string): boolean {
  for (let i = 0; i < tag.length; i++) {
    if (bytes[offset + i] !== tag.charCodeAt(i)) return false;
  }
  return true;
}
