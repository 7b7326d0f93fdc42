import { expect, test } from "bun:test";
import { configHelp, ConfigError, describeConfig, loadConfig } from "../src/config.ts";

test("flags override environment, environment overrides defaults", () => {
  expect(loadConfig({}, {}).port).toBe(8000);
  expect(loadConfig({}, { VOXEDGE_PORT: "9000" }).port).toBe(9000);
  expect(loadConfig({ port: "9100" }, { VOXEDGE_PORT: "9000" }).port).toBe(9100);
  expect(loadConfig({}, { SPEAKER_MAX_UPLOADED: "5" }).maxUploadedVoices).toBe(5);
  expect(loadConfig({}, { VOXEDGE_ALLOWED_MEDIA_DOMAINS: "a.example, b.example" }).allowedMediaDomains).toEqual(["a.example", "b.example"]);
});

test("bad values name the option", () => {
  expect(() => loadConfig({ port: "http" }, {})).toThrow(ConfigError);
  expect(() => loadConfig({ port: "http" }, {})).toThrow("--port");
  expect(() => loadConfig({}, { VOXEDGE_DEVICE: "tpu" })).toThrow("VOXEDGE_DEVICE");
});

test("--voice-aliases: OpenAI voice names to voices, case-insensitive; a malformed table names the option and the entry", () => {
  expect(loadConfig({}, {}).voiceAliases).toEqual({});
  expect(loadConfig({}, { VOXEDGE_VOICE_ALIASES: " Alloy = RMS ,nova=slt," }).voiceAliases).toEqual({ alloy: "rms", nova: "slt" });
  expect(() => loadConfig({ "voice-aliases": "alloy" }, {})).toThrow("--voice-aliases: 'alloy' is not alias=voice");
  expect(() => loadConfig({ "voice-aliases": "alloy=" }, {})).toThrow("'alloy=' is not alias=voice");
  expect(() => loadConfig({ "voice-aliases": "alloy=a=b" }, {})).toThrow("is not alias=voice");
  expect(() => loadConfig({}, { VOXEDGE_VOICE_ALIASES: "rachel=rms" })).toThrow("VOXEDGE_VOICE_ALIASES: 'rachel' is not one of OpenAI's voice names");
  expect(() => loadConfig({ "voice-aliases": "alloy=rms,ALLOY=slt" }, {})).toThrow("'alloy' is mapped twice");
});

test("secrets are masked in the logged config and help lists every option", () => {
  const shown = describeConfig(loadConfig({ "api-key": "hunter2" }, {}));
  expect(shown.apiKeys).toEqual(["***"]);
  expect(JSON.stringify(shown)).not.toContain("hunter2");
  const help = configHelp();
  for (const flag of ["--host", "--port", "--engine", "--device", "--speaker-dir", "--allowed-local-media-path", "--allowed-media-domains", "--log-level", "SPEAKER_SAMPLES_DIR"]) {
    expect(help).toContain(flag);
  }
});
