import { describe, expect, test } from "bun:test";
import { normalizesText, spokenText } from "../../src/speech/text-normalization.ts";
import type { ModelCapabilities } from "../../src/models/contract.ts";
import { normalizeText } from "../../src/text/normalize/index.ts";

function capabilitiesOf(kind: ModelCapabilities["kind"], language?: string): ModelCapabilities {
  return { modelId: "m", kind, description: "", voices: [], defaultVoice: "", nativeSampleRateHz: 24000, supportsCloning: false, supportsInstructions: false, supportsWordTimestamps: false, framesPerSecond: 12.5, speakerEmbeddingDims: [], languages: language ? [language] : [] };
}

describe("normalizesText", () => {
  for (const kind of ["neural", "classic-fallback"] as const) {
    test(`${kind}: auto (and no value) normalizes, on does, off does not`, () => {
      const capabilities = capabilitiesOf(kind);
      expect([undefined, "auto", "on", "off"].map((mode) => normalizesText(mode as "auto" | undefined, capabilities))).toEqual([true, true, true, false]);
    });
  }
});

describe("spokenText", () => {
  const written = "Lunch at 12:30 pm was $12.75.";

  test("rewrites written forms when on, and keeps the text as sent when off", () => {
    const capabilities = capabilitiesOf("neural", "en");
    expect(spokenText(written, "on", capabilities)).toBe(normalizeText(written, { language: "en" }));
    expect(spokenText(written, "on", capabilities)).not.toMatch(/\d/);
    expect(spokenText(written, "off", capabilities)).toBe(written);
  });

  test("a model that does not say its language is read as English", () => {
    expect(spokenText(written, "on", capabilitiesOf("neural"))).toBe(normalizeText(written, { language: "en" }));
  });

  test("text without written forms comes back unchanged", () => {
    const plain = "Nothing here needs rewriting, does it?";
    expect(spokenText(plain, "on", capabilitiesOf("classic-fallback", "en"))).toBe(plain);
  });
});
