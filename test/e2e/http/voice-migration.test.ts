/** A server started over a speaker folder that vLLM-Omni wrote: its voices list, speak and delete over HTTP. */
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testApp } from "../../support/server.ts";
import { ToneModel } from "../../support/tone-model.ts";
import { EMBEDDING_VOICE, folderSnapshot, STEREO_VOICE, writeVllmOmniFolder } from "../../support/vllm-omni-folder.ts";

const MODEL_RATE_HZ = 24_000;

function zeroCrossingFrequencyHz(samples: Float32Array, sampleRateHz: number): number {
  let crossings = 0;
  for (let i = 1; i < samples.length; i++) if (samples[i - 1]! < 0 !== samples[i]! < 0) crossings++;
  return (crossings / 2) * (sampleRateHz / samples.length);
}

test("a vLLM-Omni speaker folder: voices list with their metadata, the stereo 44.1 kHz one clones as mono at the model rate, delete removes its file", async () => {
  const speakerDir = mkdtempSync(join(tmpdir(), "voxedge-migration-http-"));
  try {
    writeVllmOmniFolder(speakerDir);
    const before = folderSnapshot(speakerDir);
    const adapter = new ToneModel({ cloning: true, sampleRateHz: MODEL_RATE_HZ, speakerEmbeddingDims: [4] });
    const { app } = await testApp(adapter, { flags: { "speaker-dir": speakerDir } });

    const list = (await (await app.request("/v1/audio/voices")).json()) as any;
    expect(list.voices.map((name: string) => name.toLowerCase())).toEqual(expect.arrayContaining(["studio voice", "emb voice"]));
    expect(list.uploaded_voices).toEqual([
      expect.objectContaining({ name: "Studio Voice", consent: "rec 2024/07#1", created_at: STEREO_VOICE.createdAt, mime_type: "audio/wav", file_size: STEREO_VOICE.uploadBytes, sample_rate: 44_100, ref_text: STEREO_VOICE.refText, speaker_description: STEREO_VOICE.speakerDescription, embedding_source: "audio" }),
      expect.objectContaining({ name: "Emb Voice", consent: "c-1", created_at: EMBEDDING_VOICE.createdAt, mime_type: "application/x-safetensors", embedding_source: "direct", embedding_dim: 4 }),
    ]);
    expect(JSON.stringify(list)).not.toContain(speakerDir);

    const spoken = await app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "hello from the old server", voice: "studio voice", response_format: "pcm" }) });
    expect(spoken.status).toBe(200);
    expect((await spoken.arrayBuffer()).byteLength).toBeGreaterThan(0);
    expect(adapter.encodedReferences).toHaveLength(1);
    const [reference] = adapter.encodedReferences;
    expect(reference!.sampleRateHz).toBe(MODEL_RATE_HZ);
    expect(reference!.transcript).toBe(STEREO_VOICE.refText);
    // 2 s at 44.1 kHz resampled to 24 kHz; interleaved stereo read as mono would be twice as long.
    expect(Math.abs(reference!.samples.length - 2 * MODEL_RATE_HZ)).toBeLessThanOrEqual(8);
    expect(Math.abs(zeroCrossingFrequencyHz(reference!.samples, MODEL_RATE_HZ) - STEREO_VOICE.frequencyHz)).toBeLessThan(2);
    // The average of the 0.6 and 0.2 channels, not one of them.
    const peak = reference!.samples.subarray(1000, -1000).reduce((max, sample) => Math.max(max, Math.abs(sample)), 0);
    expect(Math.abs(peak - (STEREO_VOICE.leftAmplitude + STEREO_VOICE.rightAmplitude) / 2)).toBeLessThan(0.01);
    expect(adapter.jobs.at(-1)!.voicePrompt).toBeDefined();
    expect(folderSnapshot(speakerDir)).toEqual(before);

    const deleted = await app.request("/v1/audio/voices/Studio%20Voice", { method: "DELETE" });
    expect(deleted.status).toBe(200);
    expect(((await deleted.json()) as any).success).toBe(true);
    expect(existsSync(join(speakerDir, STEREO_VOICE.fileName))).toBe(false);
    expect(folderSnapshot(speakerDir)).toEqual(new Map([[EMBEDDING_VOICE.fileName, before.get(EMBEDDING_VOICE.fileName)!]]));

    const restarted = await testApp(new ToneModel({ cloning: true }), { flags: { "speaker-dir": speakerDir } });
    const afterRestart = (await (await restarted.app.request("/v1/audio/voices")).json()) as any;
    expect(afterRestart.uploaded_voices.map((voice: any) => voice.name)).toEqual(["Emb Voice"]);
  } finally {
    rmSync(speakerDir, { recursive: true, force: true });
  }
});
