/**
 * A speaker folder as vLLM-Omni's `upload_voice` and `upload_voice_embedding` write it: one file per voice
 * named `{sanitized name}_{sanitized consent}_{created_at}.safetensors`, tensor `audio` as soundfile read the
 * upload (float32 `[N]`, or `[N, C]` frames × channels, at the upload's own rate) or `speaker_embedding`
 * (float32 `[D]`), and the speaker record as string metadata with `None` values left out.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { encodeSafetensors } from "../../src/formats/safetensors.ts";

/** "Studio Voice" by consent "rec 2024/07#1", a 2 s 44.1 kHz stereo WAV upload: 0.6 and 0.2 × a 200 Hz sine. */
export const STEREO_VOICE = {
  name: "Studio Voice",
  consent: "rec 2024/07#1",
  createdAt: 1_700_000_000,
  // What `_sanitize_filename` makes of name and consent: basename, then [^A-Za-z0-9_.-] → "_".
  fileName: "Studio_Voice_07_1_1700000000.safetensors",
  sampleRateHz: 44_100,
  frameCount: 88_200,
  frequencyHz: 200,
  leftAmplitude: 0.6,
  rightAmplitude: 0.2,
  uploadBytes: 352_844,
  refText: "The studio take.",
  speakerDescription: "warm, close-miked",
};

export const EMBEDDING_VOICE = {
  name: "Emb Voice",
  consent: "c-1",
  createdAt: 1_700_000_005,
  fileName: "Emb_Voice_c-1_1700000005.safetensors",
  embedding: Float32Array.of(0.25, -0.5, 1, 0.125),
};

export function stereoFrames(): Float32Array {
  const { frameCount, frequencyHz, sampleRateHz, leftAmplitude, rightAmplitude } = STEREO_VOICE;
  const interleaved = new Float32Array(frameCount * 2);
  for (let frame = 0; frame < frameCount; frame++) {
    const wave = Math.sin((2 * Math.PI * frequencyHz * frame) / sampleRateHz);
    interleaved[frame * 2] = leftAmplitude * wave;
    interleaved[frame * 2 + 1] = rightAmplitude * wave;
  }
  return interleaved;
}

export function writeVllmOmniFolder(dir: string): void {
  const stereo = STEREO_VOICE;
  writeFileSync(
    join(dir, stereo.fileName),
    encodeSafetensors(
      { audio: { dtype: "F32", shape: [stereo.frameCount, 2], data: stereoFrames() } },
      {
        name: stereo.name,
        voice_name_lower: stereo.name.toLowerCase(),
        consent: stereo.consent,
        created_at: String(stereo.createdAt),
        mime_type: "audio/wav",
        original_filename: "studio take.wav",
        file_size: String(stereo.uploadBytes),
        sample_rate: String(stereo.sampleRateHz),
        ref_text: stereo.refText,
        embedding_source: "audio",
        speaker_description: stereo.speakerDescription,
      },
    ),
  );
  const embedding = EMBEDDING_VOICE;
  // upload_voice_embedding measures file_size after saving, so it is not in the header.
  writeFileSync(
    join(dir, embedding.fileName),
    encodeSafetensors(
      { speaker_embedding: { dtype: "F32", shape: [embedding.embedding.length], data: embedding.embedding } },
      {
        name: embedding.name,
        voice_name_lower: embedding.name.toLowerCase(),
        consent: embedding.consent,
        created_at: String(embedding.createdAt),
        mime_type: "application/x-safetensors",
        original_filename: embedding.fileName,
        embedding_source: "direct",
        embedding_dim: String(embedding.embedding.length),
      },
    ),
  );
}

/** Every file of the folder and its bytes, to show that nothing was rewritten. */
export function folderSnapshot(dir: string): Map<string, Buffer> {
  return new Map(
    readdirSync(dir)
      .sort()
      .map((file) => [file, readFileSync(join(dir, file))]),
  );
}
