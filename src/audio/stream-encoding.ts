/**
 * Every response format as a stream: bytes for each chunk of audio as it is made, each a valid continuation of
 * the ones before, so that the joined bytes are one playable file and a player can start on the first chunk.
 * OpenAI streams all six formats; LiveKit's plugin asks for streamed mp3 by default.
 *
 * - pcm: 16-bit little-endian samples. wav: the streaming header (sizes 0xFFFFFFFF, "until EOF"), then pcm.
 *   ulaw, alaw: one G.711 byte per sample, as they come.
 * - mp3: LAME's frames as it completes them (the same encoder as a file, mp3.ts): the joined bytes are the
 *   file's frames without its leading Info tag, which needs the frame count, unknown until the end.
 * - opus: Ogg pages of 20 ms Opus packets (the file's encoder and muxer, opus.ts), a page flushed for each
 *   chunk; the first bytes are the OpusHead and OpusTags pages.
 * - flac: STREAMINFO with the length unknown (0, which the format allows for streams), then one FLAC frame
 *   per 1920 samples (80 ms at 24 kHz) as each is complete.
 * - aac: ADTS frames. The only AAC-LC encoder that runs here is ffmpeg's CLI (aac.ts), which encodes whole
 *   inputs, so each chunk's frames come from an encode of the last few frames' audio and the new one, and only
 *   the frames past those already sent are kept: every frame is encoded with the audio around it, and the
 *   joined frames decode as one continuous stream (within the codec's own error), not as chunks each with its
 *   own priming.
 *
 * Concurrency: the libraries' calls are synchronous within a push (see each file encoder's note), so streams
 * never interleave inside one library call.
 */
import type { EncodingOptions, ResponseFormat } from "./response-format.ts";
import { encodeG711 } from "./g711.ts";
import { createAacStreamEncoder } from "./aac.ts";
import { concatBytes } from "../lib/concat.ts";
import { createStreamingResampler, type StreamingResampler } from "./resampler.ts";
import { floatToInt16, pcm16Bytes, wavHeader } from "./wav.ts";
import { loadLame, MP3_BITRATE_KBPS, mp3RatesAt } from "./mp3.ts";
import { loadMediabunny, loadOpus, OPUS_ENCODER_RATES_HZ, OPUS_FRAME_MS, opusHead, OGG_OPUS_RATE_HZ, OPUS_GET_LOOKAHEAD } from "./opus.ts";
import { loadFlac } from "./flac.ts";

export interface StreamEncoder {
  /** The bytes the format can give for the audio so far (possibly none yet): whole frames or pages. */
  push(samples: Float32Array): Promise<Uint8Array>;
  /** The rest, and the end of the stream. */
  end(): Promise<Uint8Array>;
  /** Frees the encoder without finishing (the client left). Safe to call after `end`, and twice. */
  close(): void;
}

const EMPTY = new Uint8Array(0);

/** An encoder for a stream of mono samples in [-1, 1] at `sampleRateHz` in `format`. */
export async function createStreamEncoderOnThisThread(format: ResponseFormat, sampleRateHz: number, options: EncodingOptions = {}): Promise<StreamEncoder> {
  switch (format) {
    case "pcm":
      return { push: async (samples) => pcm16Bytes(samples), end: async () => EMPTY, close: () => undefined };
    case "ulaw":
    case "alaw":
      return { push: async (samples) => encodeG711(samples, format), end: async () => EMPTY, close: () => undefined };
    case "wav": {
      let headerSent = false;
      return {
        push: async (samples) => {
          const pcm = pcm16Bytes(samples);
          if (headerSent) return pcm;
          headerSent = true;
          return concatBytes([wavHeader(sampleRateHz, "streaming"), pcm]);
        },
        end: async () => (headerSent ? EMPTY : ((headerSent = true), wavHeader(sampleRateHz, "streaming"))),
        close: () => undefined,
      };
    }
    case "mp3":
    {
      const bitrateKbps = options.bitrateKbps ?? MP3_BITRATE_KBPS;
      return withResampling(sampleRateHz, mp3RatesAt(bitrateKbps), (rateHz) => mp3StreamEncoder(rateHz, bitrateKbps));
    }
    case "opus":
      return withResampling(sampleRateHz, OPUS_ENCODER_RATES_HZ, (rateHz) => opusStreamEncoder(rateHz, sampleRateHz, options.bitrateKbps));
    case "flac":
      return flacStreamEncoder(sampleRateHz);
    case "aac":
      return createAacStreamEncoder(sampleRateHz);
  }
}

/** The encoder at the first rate it accepts at or above `sampleRateHz`, fed through a streaming resampler if that differs. */
async function withResampling(sampleRateHz: number, rates: readonly number[], make: (rateHz: number) => Promise<StreamEncoder>): Promise<StreamEncoder> {
  const rateHz = rates.find((rate) => rate >= sampleRateHz) ?? rates.at(-1)!;
  const inner = await make(rateHz);
  if (rateHz === sampleRateHz) return inner;
  const resampler: StreamingResampler = await createStreamingResampler(sampleRateHz, rateHz);
  return {
    push: (samples) => inner.push(resampler.push(samples)),
    end: async () => {
      const tail = await inner.push(resampler.flush());
      resampler.close();
      return concatBytes([tail, await inner.end()]);
    },
    close: () => {
      inner.close();
      try {
        resampler.close();
      } catch {
        // Already closed by end().
      }
    },
  };
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

async function opusStreamEncoder(encoderRateHz: number, inputRateHz: number, bitrateKbps: number | undefined): Promise<StreamEncoder> {
  const { Encoder } = await loadOpus();
  const { NullTarget, EncodedAudioPacketSource, EncodedPacket, OggOutputFormat, Output } = await loadMediabunny();
  const encoder = new Encoder({ channels: 1, sample_rate: encoderRateHz as (typeof OPUS_ENCODER_RATES_HZ)[number], application: "audio" });
  if (bitrateKbps !== undefined) encoder.bitrate = bitrateKbps * 1000;
  const samplesPer48k = OGG_OPUS_RATE_HZ / encoderRateHz;
  const preSkip48k = encoder.ctl(OPUS_GET_LOOKAHEAD) * samplesPer48k;
  const frameSamples = (encoderRateHz * OPUS_FRAME_MS) / 1000;
  const frame48k = (OGG_OPUS_RATE_HZ * OPUS_FRAME_MS) / 1000;

  const pages: Uint8Array[] = [];
  // A page at most every 20 ms of audio: each push's packets leave with it.
  const output = new Output({ format: new OggOutputFormat({ maximumPageDuration: OPUS_FRAME_MS / 1000, onPage: (data) => void pages.push(data.slice()) }), target: new NullTarget() });
  const source = new EncodedAudioPacketSource("opus");
  output.addAudioTrack(source);
  await output.start();
  const decoderConfig = { codec: "opus" as const, numberOfChannels: 1, sampleRate: OGG_OPUS_RATE_HZ, description: opusHead(preSkip48k, inputRateHz) };

  let pending = new Int16Array(0);
  let packets = 0;
  let inputSamples = 0;
  const take = () => {
    const out = concatBytes(pages);
    pages.length = 0;
    return out;
  };
  const addPacket = async (pcm: Int16Array, durationSamples48k: number) => {
    const packet = new EncodedPacket(encoder.encode(pcm), "key", (packets * frame48k) / OGG_OPUS_RATE_HZ, durationSamples48k / OGG_OPUS_RATE_HZ);
    await source.add(packet, packets === 0 ? { decoderConfig } : undefined);
    packets++;
  };
  const encodeWhole = async () => {
    let at = 0;
    for (; at + frameSamples <= pending.length; at += frameSamples) await addPacket(pending.subarray(at, at + frameSamples), frame48k);
    pending = pending.slice(at);
  };
  return {
    push: async (samples) => {
      inputSamples += samples.length;
      const next = new Int16Array(pending.length + samples.length);
      next.set(pending);
      next.set(floatToInt16(samples), pending.length);
      pending = next;
      await encodeWhole();
      return take();
    },
    end: async () => {
      // As the file encoder: fed past the end by the pre-skip, the last packet shortened to the true length.
      const granuleEnd = preSkip48k + Math.round(inputSamples * samplesPer48k);
      const totalPackets = Math.max(1, Math.ceil(granuleEnd / frame48k));
      while (packets < totalPackets) {
        const pcm = new Int16Array(frameSamples);
        pcm.set(pending.subarray(0, frameSamples));
        pending = pending.slice(Math.min(frameSamples, pending.length));
        await addPacket(pcm, Math.min(frame48k, granuleEnd - packets * frame48k));
      }
      await output.finalize();
      return take();
    },
    close: () => {
      void output.cancel().catch(() => undefined);
    },
  };
}

/** One FLAC frame per this many samples: 80 ms at 24 kHz, the engine's chunk, so each chunk leaves at once. */
const FLAC_STREAM_BLOCK_SAMPLES = 1920;

async function flacStreamEncoder(sampleRateHz: number): Promise<StreamEncoder> {
  const library = await loadFlac();
  const encoder = library.create_libflac_encoder(sampleRateHz, 1, 16, 5, 0, false, FLAC_STREAM_BLOCK_SAMPLES);
  if (!encoder) throw new Error(`libFLAC refused to create an encoder for ${sampleRateHz} Hz mono`);
  const parts: Uint8Array[] = [];
  const status = library.init_encoder_stream(encoder, (data) => void parts.push(data.slice()), () => undefined);
  if (status !== 0) {
    library.FLAC__stream_encoder_delete(encoder);
    throw new Error(`libFLAC encoder init failed with status ${status}`);
  }
  let open = true;
  const take = () => {
    const out = concatBytes(parts);
    parts.length = 0;
    return out;
  };
  const release = () => {
    if (!open) return;
    open = false;
    library.FLAC__stream_encoder_delete(encoder);
  };
  return {
    push: async (samples) => {
      if (!open) throw new Error("the FLAC stream encoder is closed");
      if (samples.length > 0 && !library.FLAC__stream_encoder_process_interleaved(encoder, Int32Array.from(floatToInt16(samples)), samples.length)) {
        throw new Error(`libFLAC encoding failed in state ${library.FLAC__stream_encoder_get_state(encoder)}`);
      }
      return take();
    },
    end: async () => {
      if (!open) throw new Error("the FLAC stream encoder is closed");
      const finished = library.FLAC__stream_encoder_finish(encoder);
      const rest = take();
      release();
      if (!finished) throw new Error("libFLAC could not finish the stream");
      return rest;
    },
    close: release,
  };
}
