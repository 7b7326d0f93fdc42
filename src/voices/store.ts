/**
 * Uploaded voices as every front end sees them (OpenAI and ElevenLabs routes, Wyoming's info, the page), with
 * two places to keep them: a speaker folder (folder-store.ts, the default, vLLM-Omni's layout) or an
 * S3-compatible bucket shared by replicas (s3-store.ts, `--voice-store s3://…`). Both keep the same rules:
 * names are case-insensitive, at most `maxVoices` are kept, `created_at` strictly increases, a re-upload
 * replaces, and a voice another replica saved or deleted is seen on the next request that names it.
 */
import type { FloatTensor } from "../formats/safetensors.ts";
import { monoSamples, validateVoiceName, type StoredVoice, type VoiceBody } from "./voice-file.ts";

export type { StoredVoice, VoiceBody } from "./voice-file.ts";

export interface SaveAudioInput {
  name: string;
  consent: string;
  mimeType: string;
  fileSizeBytes: number;
  samples: Float32Array;
  sampleRateHz: number;
  refText?: string;
  speakerDescription?: string;
}

export interface SaveEmbeddingInput {
  name: string;
  consent: string;
  embedding: Float32Array;
}

export interface VoiceStore {
  /** Brings one name up to date with what every replica did (uploads, replacements, deletions). */
  refreshName(name: string): Promise<void>;
  /** Brings every voice up to date: a listing sees the voices every replica has. */
  rescan(): Promise<void>;
  /** The voices as last read, oldest first (refreshName or rescan first for what other replicas did since). */
  list(): StoredVoice[];
  get(name: string): StoredVoice | undefined;
  /** Resolves once every save and delete queued so far has finished (a shutdown waits for it). */
  settled(): Promise<void>;
  /** Called with the lower-cased name of every voice that was replaced or deleted, here or by a replica. */
  onEvict(listener: (nameLower: string) => void): void;
  saveAudio(input: SaveAudioInput): Promise<StoredVoice>;
  saveEmbedding(input: SaveEmbeddingInput): Promise<StoredVoice>;
  /** A voice as another store holds it, metadata kept; "kept" when this store has the name at the same or a newer `created_at`. */
  importVoice(voice: StoredVoice, body: VoiceBody): Promise<"imported" | "kept">;
  delete(name: string): Promise<boolean>;
  /** Mono samples at the voice's own `sample_rate`. */
  loadAudio(name: string): Promise<{ voice: StoredVoice; samples: Float32Array; sampleRateHz: number } | undefined>;
  loadEmbedding(name: string): Promise<{ voice: StoredVoice; embedding: Float32Array } | undefined>;
}

/** A voice's body as a store loads it, for copying it into another store. */
export async function loadVoiceBody(store: VoiceStore, voice: StoredVoice): Promise<VoiceBody | undefined> {
  if (voice.embedding_source === "direct") {
    const loaded = await store.loadEmbedding(voice.name);
    return loaded && { kind: "embedding", embedding: loaded.embedding };
  }
  const loaded = await store.loadAudio(voice.name);
  return loaded && { kind: "audio", samples: loaded.samples };
}

/** An audio save's name, checked, with its samples and rate (a RangeError for what no route should pass on). */
export function checkedAudioSave(input: SaveAudioInput): string {
  const name = validateVoiceName(input.name);
  if (input.samples.length === 0) throw new RangeError("Cannot store a voice with no samples");
  if (!Number.isInteger(input.sampleRateHz) || input.sampleRateHz <= 0) throw new RangeError(`Invalid sample rate ${input.sampleRateHz}`);
  return name;
}

/** An embedding save's name, checked, with its embedding. */
export function checkedEmbeddingSave(input: SaveEmbeddingInput): string {
  const name = validateVoiceName(input.name);
  if (input.embedding.length === 0) throw new RangeError("Cannot store an empty speaker embedding");
  return name;
}

/** The voice an audio save stores under `name` at `createdAt`. */
export function audioVoice(input: SaveAudioInput, name: string, createdAt: number): StoredVoice {
  return {
    name,
    consent: input.consent,
    created_at: createdAt,
    mime_type: input.mimeType,
    file_size: input.fileSizeBytes,
    sample_rate: input.sampleRateHz,
    ...(input.refText === undefined ? {} : { ref_text: input.refText }),
    ...(input.speakerDescription === undefined ? {} : { speaker_description: input.speakerDescription }),
    embedding_source: "audio",
  };
}

type LoadedTensor = { voice: StoredVoice; tensor: FloatTensor } | undefined;

/** loadAudio's answer from a store's audio tensor: mono samples at the voice's own rate (a multi-channel vLLM-Omni upload is down-mixed). */
export function loadedAudio(loaded: LoadedTensor): { voice: StoredVoice; samples: Float32Array; sampleRateHz: number } | undefined {
  return loaded && { voice: loaded.voice, samples: monoSamples(loaded.tensor), sampleRateHz: loaded.voice.sample_rate! };
}

/** loadEmbedding's answer from a store's embedding tensor. */
export function loadedEmbedding(loaded: LoadedTensor): { voice: StoredVoice; embedding: Float32Array } | undefined {
  return loaded && { voice: loaded.voice, embedding: loaded.tensor.data };
}

