import { expect, test } from "bun:test";
import { elevenLabsSpec } from "../../src/elevenlabs/dialect.ts";
import { outputFormatOf } from "../../src/elevenlabs/schema.ts";

const voice = { kind: "built-in", name: "alba" } as const;

test("output_format becomes the spec's format, rate and bitrate; the seed an int64", () => {
  const spec = elevenLabsSpec({ text: "Hi.", format: outputFormatOf("mp3_44100_128"), seed: 7 }, voice);
  expect(spec.output).toEqual({ format: "mp3", rateHz: 44100, bitrateKbps: 128 });
  expect(spec.sampling).toEqual({ seed: 7n, params: {} });
  expect(elevenLabsSpec({ text: "Hi.", format: outputFormatOf("pcm_16000") }, voice).output).toEqual({ format: "pcm", rateHz: 16000 });
});

test("what the model did not use is named as ElevenLabs' clients sent it", () => {
  const spec = elevenLabsSpec({ text: "Hi.", format: outputFormatOf("pcm_24000"), languageCode: "de" }, voice, ["voice_settings.stability"]);
  expect(spec.nameIgnored!({ text: true, instructions: false, params: [] })).toEqual(["input", "language_code", "voice_settings.stability"]);
  const auto = elevenLabsSpec({ text: "Hi.", format: outputFormatOf("pcm_24000"), languageCode: "auto" }, voice);
  expect(auto.nameIgnored!({ text: false, instructions: false, params: [] })).toEqual([]);
});
