/** ffmpeg/ffprobe as the independent decoder for every output format. */
import { spawnSync } from "node:child_process";

const INSTALL_HINT = "ffmpeg is required by these tests: apt-get install ffmpeg";

export interface DecodedAudio {
  sampleRateHz: number;
  channels: number;
  samples: Float32Array;
  codec: string;
}

/**
 * Decodes any container ffmpeg knows to mono float32 at the stream's own rate. Headerless input (s16le, mulaw,
 * alaw) names its demuxer and, where it is not the demuxer's default, its rate.
 */
export function decodeWithFfmpeg(bytes: Uint8Array, inputFormat?: string, inputSampleRateHz?: number): DecodedAudio {
  const input = [...(inputFormat ? ["-f", inputFormat] : []), ...(inputSampleRateHz ? ["-ar", String(inputSampleRateHz)] : [])];
  const probe = spawnSync("ffprobe", ["-v", "error", ...input, "-show_streams", "-of", "json", "-i", "pipe:0"], { input: bytes, maxBuffer: 1 << 26 });
  if (probe.error) throw new Error(`${INSTALL_HINT} (${probe.error.message})`);
  if (probe.status !== 0) throw new Error(`ffprobe could not read the audio: ${probe.stderr.toString()}`);
  const stream = JSON.parse(probe.stdout.toString()).streams[0];
  const sampleRateHz = Number(stream.sample_rate);
  const decode = spawnSync("ffmpeg", ["-v", "error", ...input, "-i", "pipe:0", "-f", "f32le", "-ac", "1", "-ar", String(sampleRateHz), "pipe:1"], { input: bytes, maxBuffer: 1 << 28 });
  if (decode.status !== 0) throw new Error(`ffmpeg could not decode the audio: ${decode.stderr.toString()}`);
  const out = decode.stdout as Buffer;
  const samples = new Float32Array(out.buffer.slice(out.byteOffset, out.byteOffset + out.byteLength));
  return { sampleRateHz, channels: Number(stream.channels), samples, codec: String(stream.codec_name) };
}
