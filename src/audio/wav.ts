// 16-bit PCM and RIFF/WAVE framing for mono audio. Pure functions, no codec
// library: these two formats are what every other encoder here is checked
// against, so they must not depend on anything that could itself be wrong.

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
