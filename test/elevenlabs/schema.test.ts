/**
 * Every `output_format` ElevenLabs' text-to-speech routes accept comes at the rate its name says, from the file
 * route and the streamed one, as ffmpeg (an independent decoder) reads it: containers by what ffprobe reports,
 * raw formats by their length and by the tone's pitch, which is right only at the right rate.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ELEVENLABS_OUTPUT_FORMATS } from "../../src/elevenlabs/schema.ts";
import { decodeWithFfmpeg } from "../support/ffmpeg.ts";
import { startTestServer, type TestServer } from "../support/server.ts";
import { dominantFrequencyHz } from "../support/spectrum.ts";
import { ToneModel } from "../support/tone-model.ts";

/** The tone adapter's "low" voice: 220 Hz, one 80 ms frame for every two characters. */
const TONE_HZ = 220;
const TEXT = "hello world this is a test"; // 26 characters: 13 frames, 1.04 s
const TEXT_SECONDS = 13 * 0.08;

/** What each name says: codec, rate and, for lossy codecs, bitrate. */
function named(outputFormat: string): { codec: string; rateHz: number; kbps?: number } {
  const [codec, rate, kbps] = outputFormat.split("_");
  return { codec: codec!, rateHz: Number(rate), kbps: kbps === undefined ? undefined : Number(kbps) };
}

/** ffmpeg's demuxer for the headerless formats, and bytes per sample. */
const RAW: Record<string, { demuxer: string; bytesPerSample: number }> = {
  pcm: { demuxer: "s16le", bytesPerSample: 2 },
  ulaw: { demuxer: "mulaw", bytesPerSample: 1 },
  alaw: { demuxer: "alaw", bytesPerSample: 1 },
};
/** ffprobe's codec name for the formats in a container. */
const CONTAINED_CODEC: Record<string, string> = { mp3: "mp3", opus: "opus", wav: "pcm_s16le" };

describe("every ElevenLabs output_format, decoded by ffmpeg", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(new ToneModel());
  });
  afterAll(() => server.stop());

  const speak = async (path: string, outputFormat: string) => {
    const response = await fetch(`${server.url}/elevenlabs/v1/text-to-speech/low${path}?output_format=${outputFormat}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ text: TEXT, model_id: "eleven_flash_v2_5" }),
    });
    expect(response.status).toBe(200);
    return new Uint8Array(await response.arrayBuffer());
  };

  const formats = Object.keys(ELEVENLABS_OUTPUT_FORMATS);
  test("the schema's formats are the ones ElevenLabs names", () => {
    expect(formats.map((format) => named(format).codec).sort()).toEqual(expect.arrayContaining(["mp3", "pcm", "ulaw", "alaw", "opus", "wav"]));
    expect(formats).toHaveLength(2 + 5 + 5 + 12 + 2);
  });

  for (const outputFormat of formats) {
    for (const route of ["", "/stream"]) {
      test(`${outputFormat} from …/text-to-speech/{voice_id}${route}: at ${named(outputFormat).rateHz} Hz`, async () => {
        const { codec, rateHz, kbps } = named(outputFormat);
        const audio = await speak(route, outputFormat);
        const raw = RAW[codec];
        const decoded = raw ? decodeWithFfmpeg(audio, raw.demuxer, rateHz) : decodeWithFfmpeg(audio);
        if (raw) {
          expect(audio.length).toBe(Math.round(TEXT_SECONDS * rateHz) * raw.bytesPerSample);
        } else {
          expect(decoded.codec).toBe(CONTAINED_CODEC[codec]!);
          expect(decoded.sampleRateHz).toBe(rateHz);
        }
        expect(decoded.channels).toBe(1);
        expect(decoded.samples.length / rateHz).toBeGreaterThan(TEXT_SECONDS - 0.01);
        expect(Math.abs(dominantFrequencyHz(decoded.samples, rateHz) - TONE_HZ)).toBeLessThan(15);
        if (codec === "mp3") {
          // The name's bitrate, except where LAME cannot keep 44.1 kHz at it (below 64 kbps): there 64 kbps.
          const codedKbps = rateHz === 44100 ? Math.max(kbps!, 64) : kbps!;
          expect(Math.abs((audio.length * 8) / TEXT_SECONDS / 1000 - codedKbps) / codedKbps).toBeLessThan(0.15);
        }
      });
    }
  }
});
