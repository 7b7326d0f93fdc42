/**
 * One voice's file in the speaker folder (vLLM-Omni's speaker storage semantics): a safetensors file holding
 * the audio (tensor `audio`, float32 mono) or a speaker embedding (tensor `speaker_embedding`), and the
 * voice's description as string metadata in the header, so restoring a folder reads only headers.
 *
 * File names are the first 128 bits of sha256(lower-case name) in hex: no user text reaches the file
 * system, and one name always maps to one file, so a re-upload is a single atomic rename over the old one.
 *
 * A file written by vLLM-Omni is read as it is: named `{name}_{consent}_{created_at}.safetensors` (each part
 * passed through its `_sanitize_filename`), it holds the same metadata and tensor `audio` as read from the
 * upload, float32 `[N]` or `[N, C]` at the upload's own rate, which monoSamples down-mixes.
 */
import { createHash } from "node:crypto";
import { badRequest } from "../api/errors.ts";
import { INVALID_VOICE_NAME_MESSAGE, isValidVoiceName } from "../api/voices.ts";
import { downmixToMono } from "../audio/decoders.ts";
import { decodeSafetensors, encodeSafetensors, type FloatTensor, type SafetensorsHeader } from "../formats/safetensors.ts";

export interface StoredVoice {
  name: string;
  consent: string;
  /** Unix seconds; strictly increasing across uploads, so (name, created_at) identifies one upload. */
  created_at: number;
  mime_type: string;
  /** Bytes of the uploaded audio file, or of the stored safetensors file for a direct embedding. */
  file_size: number;
  sample_rate?: number;
  ref_text?: string;
  speaker_description?: string;
  embedding_source: "audio" | "direct";
  embedding_dim?: number;
}

export const VOICE_FILE_SUFFIX = ".safetensors";
export const AUDIO_TENSOR = "audio";
export const EMBEDDING_TENSOR = "speaker_embedding";
const EMBEDDING_MIME_TYPE = "application/x-safetensors";
const FILE_NAME_HASH_HEX_CHARS = 32;
const INTEGER_METADATA_KEYS = ["created_at", "file_size", "sample_rate", "embedding_dim"] as const;

/** Trims and rejects names that are empty or could act as a path; the trimmed name is the voice's name. */
export function validateVoiceName(raw: string): string {
  const name = raw.trim();
  if (!isValidVoiceName(name)) throw badRequest(INVALID_VOICE_NAME_MESSAGE, "name");
  return name;
}

export class InvalidVoiceFileError extends Error {
  constructor(reason: string) {
    super(`Invalid voice file: ${reason}`);
    this.name = "InvalidVoiceFileError";
  }
}

/** The name as voices are told apart: case and surrounding spaces do not make another voice. */
export function voiceKey(name: string): string {
  return name.trim().toLowerCase();
}

/** The file a voice of this key is written to. */
export function voiceFileName(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex").slice(0, FILE_NAME_HASH_HEX_CHARS) + VOICE_FILE_SUFFIX;
}

/** vLLM-Omni's `{_sanitize_filename(name)}_{_sanitize_filename(consent)}_{created_at}.safetensors`. */
function vllmOmniFileNameOf(voice: StoredVoice): string {
  return `${sanitizeAsVllmOmni(voice.name)}_${sanitizeAsVllmOmni(voice.consent)}_${voice.created_at}${VOICE_FILE_SUFFIX}`;
}

/**
 * vLLM-Omni's `_sanitize_filename`: the POSIX basename, each code point outside [A-Za-z0-9_.-] replaced by
 * `_` (hence the `u` flag: one `_` per code point, as in Python), "file" if empty, at most 255 characters.
 */
function sanitizeAsVllmOmni(text: string): string {
  const sanitized = text.slice(text.lastIndexOf("/") + 1).replace(/[^a-zA-Z0-9_.\-]/gu, "_");
  return sanitized === "" ? "file" : sanitized.slice(0, 255);
}

/** What a voice is made from: the samples of an audio upload, or a speaker embedding given directly. */
export type VoiceBody = { kind: "audio"; samples: Float32Array } | { kind: "embedding"; embedding: Float32Array };

/** The file of a voice whose metadata is already decided (a copy keeps its `created_at` and consent). */
export function encodeVoiceBody(voice: StoredVoice, body: VoiceBody): { voice: StoredVoice; fileBytes: Uint8Array } {
  if (body.kind === "embedding") return encodeEmbeddingVoiceFile(voice.name, voice.consent, voice.created_at, body.embedding);
  return { voice, fileBytes: encodeAudioVoiceFile(voice, body.samples) };
}

/** The file of an audio upload: its samples as `[N]` float32 at `voice.sample_rate`. */
export function encodeAudioVoiceFile(voice: StoredVoice, samples: Float32Array): Uint8Array {
  return encodeSafetensors({ [AUDIO_TENSOR]: { dtype: "F32", shape: [samples.length], data: samples } }, voiceMetadata(voice));
}

/** The file of a direct embedding, and its voice, whose file_size is that file's own size. */
export function encodeEmbeddingVoiceFile(name: string, consent: string, createdAt: number, embedding: Float32Array): { voice: StoredVoice; fileBytes: Uint8Array } {
  const embeddingDim = embedding.length;
  // As upstream, file_size is the stored file's own size; it cannot sit in the header it measures,
  // so a read takes it from the file (see voiceFromHeader).
  const metadata = voiceMetadata({ name, consent, created_at: createdAt, mime_type: EMBEDDING_MIME_TYPE, embedding_source: "direct", embedding_dim: embeddingDim });
  const fileBytes = encodeSafetensors({ [EMBEDDING_TENSOR]: { dtype: "F32", shape: [embeddingDim], data: embedding } }, metadata);
  const voice: StoredVoice = {
    name,
    consent,
    created_at: createdAt,
    mime_type: EMBEDDING_MIME_TYPE,
    file_size: fileBytes.length,
    embedding_source: "direct",
    embedding_dim: embeddingDim,
  };
  return { voice, fileBytes };
}

/**
 * The voice a file's header describes, checked as voiceFromHeader does; the file must also be named for it:
 * only the file its name hashes to, or the one vLLM-Omni named after it, can hold it; anything else is a copy.
 */
export function voiceFromFileHeader(fileName: string, header: SafetensorsHeader): StoredVoice {
  const voice = voiceFromHeader(header);
  if (fileName !== voiceFileName(voiceKey(voice.name)) && fileName !== vllmOmniFileNameOf(voice)) {
    throw new InvalidVoiceFileError("file name does not match the voice name (neither its hash nor vLLM-Omni's {name}_{consent}_{created_at})");
  }
  return voice;
}

/**
 * A whole voice file read back: the `created_at` it records (which upload it holds, as written) and its
 * tensor `tensorName`, undefined when that is missing or not of a voice tensor's shape.
 */
export function decodeVoiceFile(fileBytes: Uint8Array, tensorName: string): { createdAt: string | undefined; tensor: FloatTensor | undefined } {
  const decoded = decodeSafetensors(fileBytes);
  const tensor = decoded.tensors[tensorName];
  return { createdAt: decoded.metadata.created_at, tensor: tensor !== undefined && hasVoiceTensorShape(tensorName, tensor.shape) ? tensor : undefined };
}

/** Audio is `[N]` mono, or `[N, C]` frames × channels as vLLM-Omni stores an upload; an embedding is `[D]`. */
function hasVoiceTensorShape(tensorName: string, shape: readonly number[]): boolean {
  if (shape.length === 0 || shape.some((dimension) => dimension === 0)) return false;
  return shape.length === 1 || (tensorName === AUDIO_TENSOR && shape.length === 2);
}

/** `[N]` as is; `[N, C]` (interleaved frames) split into channels and averaged like any decoded upload. */
export function monoSamples(tensor: FloatTensor): Float32Array {
  if (tensor.shape.length === 1) return tensor.data;
  const [frameCount, channelCount] = tensor.shape as [number, number];
  const channels = Array.from({ length: channelCount }, () => new Float32Array(frameCount));
  for (let frame = 0; frame < frameCount; frame++) {
    for (let channel = 0; channel < channelCount; channel++) channels[channel]![frame] = tensor.data[frame * channelCount + channel]!;
  }
  return downmixToMono({ channels, sampleRateHz: 0 });
}

/** safetensors metadata is string → string: every present field as a string, plus the lookup key. */
function voiceMetadata(voice: Omit<StoredVoice, "file_size"> & { file_size?: number }): Record<string, string> {
  const metadata: Record<string, string> = { voice_name_lower: voiceKey(voice.name) };
  for (const [key, value] of Object.entries(voice)) {
    if (value !== undefined) metadata[key] = String(value);
  }
  return metadata;
}

/** The reverse of voiceMetadata, checking everything a StoredVoice promises; never echoes metadata values. */
function voiceFromHeader(header: SafetensorsHeader): StoredVoice {
  const metadata = header.metadata;
  const integers: Partial<Record<(typeof INTEGER_METADATA_KEYS)[number], number>> = {};
  for (const key of INTEGER_METADATA_KEYS) {
    const text = metadata[key];
    if (text === undefined) continue;
    const value = Number(text);
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(value)) throw new InvalidVoiceFileError(`metadata '${key}' is not a non-negative integer`);
    integers[key] = value;
  }
  for (const key of ["name", "consent", "mime_type"] as const) {
    if (metadata[key] === undefined) throw new InvalidVoiceFileError(`metadata '${key}' is missing`);
  }
  if (integers.created_at === undefined) throw new InvalidVoiceFileError("metadata 'created_at' is missing");
  let name: string;
  try {
    name = validateVoiceName(metadata.name!);
  } catch {
    throw new InvalidVoiceFileError("metadata 'name' is not a valid voice name");
  }

  const source = metadata.embedding_source;
  const tensorName = source === "audio" ? AUDIO_TENSOR : source === "direct" ? EMBEDDING_TENSOR : undefined;
  if (tensorName === undefined) throw new InvalidVoiceFileError("metadata 'embedding_source' is not 'audio' or 'direct'");
  const tensor = header.tensors[tensorName];
  if (tensor === undefined || tensor.dtype !== "F32" || !hasVoiceTensorShape(tensorName, tensor.shape)) {
    throw new InvalidVoiceFileError(`no non-empty F32 '${tensorName}' tensor of shape ${tensorName === AUDIO_TENSOR ? "[N] or [N, C]" : "[D]"}`);
  }
  if (source === "audio" && (integers.sample_rate === undefined || integers.sample_rate === 0)) throw new InvalidVoiceFileError("audio voice without a positive 'sample_rate'");
  if (source === "audio" && integers.file_size === undefined) throw new InvalidVoiceFileError("metadata 'file_size' is missing");
  if (source === "direct" && integers.embedding_dim !== tensor.shape[0]) throw new InvalidVoiceFileError("'embedding_dim' does not match the tensor length");

  return {
    name,
    consent: metadata.consent!,
    created_at: integers.created_at,
    mime_type: metadata.mime_type!,
    file_size: integers.file_size ?? header.fileSizeBytes,
    ...(integers.sample_rate === undefined ? {} : { sample_rate: integers.sample_rate }),
    ...(metadata.ref_text === undefined ? {} : { ref_text: metadata.ref_text }),
    ...(metadata.speaker_description === undefined ? {} : { speaker_description: metadata.speaker_description }),
    embedding_source: source as StoredVoice["embedding_source"],
    ...(integers.embedding_dim === undefined ? {} : { embedding_dim: integers.embedding_dim }),
  };
}
