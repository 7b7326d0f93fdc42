/**
 * Ogg Opus (RFC 7845), mono, 20 ms frames, from mono float samples.
 *
 * Libraries:
 * - @evan/opus encodes the packets: libopus as an N-API addon with a wasm fallback, and it exposes
 *   the encoder's lookahead, which the Ogg pre-skip must equal. Under Deno without --allow-ffi the
 *   addon cannot load and the package falls back to its wasm build by itself.
 * - mediabunny writes the Ogg container: pure TypeScript (no wasm, no worker), maintained, and its
 *   Ogg muxer turns the last packet's duration into the end-trimming granule position, so decoders
 *   output exactly the input's length. opus-encdec was the alternative: one emscripten build of
 *   libopus, a resampler and an Ogg writer made for browser workers. Keeping codec and container
 *   apart lets us set pre-skip and end trimming ourselves and reuse the project's resampler.
 *
 * Rates: libopus accepts 8, 12, 16, 24 or 48 kHz. Input at another rate is resampled to the nearest
 * allowed rate at or above it (22.05 kHz → 24 kHz, 44.1 kHz → 48 kHz) with the project's resampler.
 * OpusHead carries the original input rate, as RFC 7845 intends, so a decoder may restore it; decoders
 * output 48 kHz by convention.
 *
 * Length: sample-exact at 48 kHz (the input duration × 48 kHz, rounded), through pre-skip and
 * end-trimming granule positions.
 *
 * Streaming: Ogg pages of 20 ms packets from the same encoder and muxer, a page flushed for each chunk; the
 * first bytes are the OpusHead and OpusTags pages.
 *
 * Concurrency: each call has its own encoder. Each encode() copies its input into @evan/opus's shared wasm
 * staging buffer and its packet out of it synchronously, so calls that interleave between packets (at
 * `pause`) never see each other's data.
 */
import { resample } from "../resampler.ts";
import { floatToInt16 } from "../wav.ts";
import { concatBytes } from "../../lib/concat.ts";
import { lazyLoad } from "../../lib/lazy-load.ts";
import { withResampling, type Codec, type StreamEncoder } from "../codec.ts";
import type { Pause } from "../pause.ts";

/** Sample rates libopus can encode. */
const OPUS_ENCODER_RATES_HZ = [8000, 12000, 16000, 24000, 48000] as const;
/** RFC 7845: granule positions and pre-skip always count 48 kHz samples, whatever the encoder's rate. */
const OGG_OPUS_RATE_HZ = 48000;
/** The usual Opus frame for speech: shorter frames spend more bits on overhead, longer ones add latency. */
const OPUS_FRAME_MS = 20;
const FRAME_SAMPLES_48K = (OGG_OPUS_RATE_HZ * OPUS_FRAME_MS) / 1000;
/** OPUS_GET_LOOKAHEAD_REQUEST from opus_defines.h. Asked through ctl() because the package's types
 *  misspell its `lookahead` getter as `lookhead`. */
const OPUS_GET_LOOKAHEAD = 4027;

/** Packets encoded (and muxed) between two pauses of a long file: 5 s of audio. */
const PACKETS_PER_SLICE = 250;

const loadOpus = lazyLoad(() => import("@evan/opus"));
const loadMediabunny = lazyLoad(() => import("mediabunny"));

/** `bitrateKbps` unset leaves libopus's own choice for the rate (about 32 kbps for mono speech at 48 kHz). */
async function encodeOggOpus(samples: Float32Array, sampleRateHz: number, bitrateKbps: number | undefined, pause: Pause): Promise<Uint8Array> {
  const encoderRateHz = OPUS_ENCODER_RATES_HZ.find((rateHz) => rateHz >= sampleRateHz) ?? OGG_OPUS_RATE_HZ;
  const encoderInput = encoderRateHz === sampleRateHz ? samples : await resample(samples, sampleRateHz, encoderRateHz, pause);

  const { Encoder } = await loadOpus();
  const encoder = new Encoder({ channels: 1, sample_rate: encoderRateHz, application: "audio" });
  if (bitrateKbps !== undefined) encoder.bitrate = bitrateKbps * 1000;
  const samplesPer48k = OGG_OPUS_RATE_HZ / encoderRateHz;
  const preSkip48k = encoder.ctl(OPUS_GET_LOOKAHEAD) * samplesPer48k;

  // The decoder drops pre-skip samples first, so the encoder must also be fed that much past the end.
  const outputSamples48k = Math.round((samples.length * OGG_OPUS_RATE_HZ) / sampleRateHz);
  const granuleEnd = preSkip48k + outputSamples48k;
  const packetCount = Math.max(1, Math.ceil(granuleEnd / FRAME_SAMPLES_48K));
  const frameSamples = FRAME_SAMPLES_48K / samplesPer48k;
  const pcm = new Int16Array(packetCount * frameSamples); // zero-padded to whole frames
  pcm.set(floatToInt16(encoderInput).subarray(0, pcm.length));
  const packets: Uint8Array[] = [];
  for (let i = 0; i < packetCount; i++) {
    if (i > 0 && i % PACKETS_PER_SLICE === 0) await pause();
    packets.push(encoder.encode(pcm.subarray(i * frameSamples, (i + 1) * frameSamples)));
  }

  const { BufferTarget, EncodedAudioPacketSource, EncodedPacket, OggOutputFormat, Output } = await loadMediabunny();
  const output = new Output({ format: new OggOutputFormat(), target: new BufferTarget() });
  const source = new EncodedAudioPacketSource("opus");
  output.addAudioTrack(source);
  await output.start();
  const decoderConfig = { codec: "opus", numberOfChannels: 1, sampleRate: OGG_OPUS_RATE_HZ, description: opusHead(preSkip48k, sampleRateHz) };
  for (let i = 0; i < packetCount; i++) {
    // Only the last packet is shortened; the muxer writes that as the final granule position.
    const durationSamples48k = Math.min(FRAME_SAMPLES_48K, granuleEnd - i * FRAME_SAMPLES_48K);
    const packet = new EncodedPacket(packets[i]!, "key", (i * FRAME_SAMPLES_48K) / OGG_OPUS_RATE_HZ, durationSamples48k / OGG_OPUS_RATE_HZ);
    await source.add(packet, i === 0 ? { decoderConfig } : undefined);
    if (i > 0 && i % PACKETS_PER_SLICE === 0) await pause();
  }
  await output.finalize();
  return new Uint8Array(output.target.buffer!);
}

/** The RFC 7845 identification header for one channel (mapping family 0). */
function opusHead(preSkip48k: number, inputSampleRateHz: number): Uint8Array {
  const header = new Uint8Array(19);
  const view = new DataView(header.buffer);
  header.set(new TextEncoder().encode("OpusHead"), 0);
  view.setUint8(8, 1); // version
  view.setUint8(9, 1); // channel count
  view.setUint16(10, preSkip48k, true);
  view.setUint32(12, inputSampleRateHz, true);
  view.setInt16(16, 0, true); // output gain
  view.setUint8(18, 0); // channel mapping family: mono/stereo, no mapping table
  return header;
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

export const opusCodec: Codec<"opus"> = {
  name: "opus",
  contentType: "audio/ogg",
  streamEncodesOn: "encoder-worker",
  encodeFile: (samples, sampleRateHz, options, pause) => encodeOggOpus(samples, sampleRateHz, options.bitrateKbps, pause),
  createStream: (sampleRateHz, options) => withResampling(sampleRateHz, OPUS_ENCODER_RATES_HZ, (rateHz) => opusStreamEncoder(rateHz, sampleRateHz, options.bitrateKbps)),
};
