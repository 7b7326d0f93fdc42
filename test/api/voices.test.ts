import { describe, expect, test } from "bun:test";
import { ApiError } from "../../src/api/errors.ts";
import { parseVoiceUpload, type UploadFile } from "../../src/api/voices.ts";

const wav: UploadFile = { filename: "clip.wav", contentType: "audio/wav", bytes: new Uint8Array(4) };

function refusal(parts: Record<string, string | UploadFile | undefined>): { param: string | null; message: string } {
  try {
    parseVoiceUpload(parts);
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    return { param: (error as ApiError).param, message: (error as ApiError).message };
  }
  throw new Error("the upload was accepted");
}

describe("voice upload form", () => {
  test("absent required fields are refused like empty ones", () => {
    expect(refusal({ consent: "c", audio_sample: wav })).toEqual({ param: "name", message: expect.stringContaining("Invalid voice name") });
    expect(refusal({ name: "x", audio_sample: wav })).toEqual({ param: "consent", message: expect.stringContaining("consent is required") });
    expect(refusal({ name: "x", consent: " \n ", audio_sample: wav }).param).toBe("consent");
  });

  test("fields are checked in form order, then which source is sent, then that source's content", () => {
    expect(refusal({ name: "a/b", consent: "c".repeat(300) }).param).toBe("name");
    expect(refusal({ name: "x", consent: "c".repeat(300), ref_text: "r".repeat(5000) }).message).toBe("consent must be at most 256 characters (got 300)");
    expect(refusal({ name: "x", consent: "c", ref_text: "r".repeat(5000) }).param).toBe("ref_text");
    expect(refusal({ name: "x", consent: "c", audio_sample: wav, speaker_embedding: "not json" })).toEqual({ param: "speaker_embedding", message: expect.stringContaining("exactly one") });
    expect(refusal({ name: "x", consent: "c", speaker_embedding: "not json" })).toEqual({ param: "speaker_embedding", message: expect.stringContaining("valid JSON") });
    expect(refusal({ name: "x", consent: "c", speaker_embedding: "[1,\"x\",1e999]" }).message).toBe("speaker_embedding must contain only numbers");
    expect(refusal({ name: "x", consent: "c", speaker_embedding: "[1,1e999]" }).message).toBe("speaker_embedding values must be finite (no NaN or Infinity)");
    expect(refusal({ name: "x", consent: "c", speaker_embedding: "[1,1e300]" }).message).toBe("speaker_embedding values must fit in float32");
  });

  test("an accepted upload is trimmed, with whitespace-only optional fields absent and the MIME type guessed for octet-stream", () => {
    const audio = parseVoiceUpload({ name: "  Alice ", consent: " rec-1 ", ref_text: "  ", speaker_description: " calm ", audio_sample: { ...wav, filename: "clip.m4a", contentType: "application/octet-stream" } });
    expect(audio).toEqual({ name: "Alice", consent: "rec-1", refText: undefined, speakerDescription: "calm", source: { kind: "audio", file: expect.anything(), mimeType: "audio/mp4" } });
    const embedding = parseVoiceUpload({ name: "e", consent: "c", speaker_embedding: "[0.5, -1]" });
    expect(embedding.source).toEqual({ kind: "embedding", embedding: new Float32Array([0.5, -1]) });
  });
});
