/**
 * The `info` event that answers `describe` (rhasspy/wyoming, wyoming/info.py): one tts program, voxedge, whose
 * voices are the model's built-in voices and the uploaded voices it can speak. Home Assistant offers a
 * program's voices by language, and streams text to it when `supports_synthesize_streaming` is set.
 *
 * Every field of an artifact is written, null where unknown: the reference reader builds dataclasses from
 * the dict and a missing required field fails it.
 */
import type { ModelCapabilities } from "../models/contract.ts";
import type { StoredVoice, VoiceStore } from "../voices/store.ts";
import { canSpeakUpload, type VoiceCatalog } from "../voices/catalog.ts";
import type { WyomingEvent } from "./protocol.ts";

interface Attribution {
  name: string;
  url: string;
}

/** Who made each model's voices, by model id; a model not listed is credited to voxedge. */
const VOICE_ATTRIBUTIONS: Readonly<Record<string, Attribution>> = {
  "pocket-tts": { name: "Kyutai", url: "https://github.com/kyutai-labs/pocket-tts" },
  "voxedge-classic": { name: "CMU Flite", url: "http://cmuflite.org" },
};

export const PROGRAM_NAME = "voxedge";

export interface ProgramFacts {
  capabilities: ModelCapabilities;
  /** The uploaded voices to list, as the store lists them (none when uploads are kept off Wyoming). */
  uploaded: readonly StoredVoice[];
  /** voxedge's own version. */
  version: string;
}

/** Uploads the model can speak: cloned from audio, by a model that clones. */
export function speakableUploads(capabilities: ModelCapabilities, uploaded: readonly StoredVoice[]): StoredVoice[] {
  return uploaded.filter((voice) => canSpeakUpload(voice, capabilities));
}

export function infoEvent({ capabilities, uploaded, version }: ProgramFacts): WyomingEvent {
  const program: Attribution = { name: PROGRAM_NAME, url: "" };
  const voiceAttribution = VOICE_ATTRIBUTIONS[capabilities.modelId] ?? program;
  const languages = [...capabilities.languages];
  const voice = (name: string, description: string) => ({ name, description, attribution: voiceAttribution, installed: true, version: null, languages, speakers: null });
  const builtIn = capabilities.voices.map((name) => voice(name, name === capabilities.defaultVoice ? `${name} (default)` : name));
  // An upload with a built-in voice's name shadows it (the speech service speaks the upload): one entry.
  const builtInNames = new Set(capabilities.voices);
  const uploads = speakableUploads(capabilities, uploaded)
    .filter((stored) => !builtInNames.has(stored.name.toLowerCase()))
    .map((stored) => voice(stored.name, `${stored.name} (uploaded)`));
  return {
    type: "info",
    data: {
      asr: [],
      tts: [
        {
          name: PROGRAM_NAME,
          description: capabilities.description,
          attribution: program,
          installed: true,
          version,
          voices: [...builtIn, ...uploads],
          supports_synthesize_streaming: true,
        },
      ],
      handle: [],
      intent: [],
      wake: [],
      mic: [],
      snd: [],
    },
  };
}

/**
 * How long one `info` answers every `describe`. Replicas sharing the speaker folder see each other's uploads
 * only by scanning it; scanning at every describe let one client that repeats describe keep the folder busy.
 */
export const INFO_TTL_MS = 5000;

export interface InfoSourceOptions {
  capabilities: () => ModelCapabilities;
  catalog: VoiceCatalog;
  voices: VoiceStore;
  /** Uploaded voices are listed; when false, `info` names the model's voices alone and never scans the folder. */
  uploadedVoices: boolean;
  version: string;
}

/**
 * The `info` every connection of a listener answers describe with: built at most once per INFO_TTL_MS
 * (concurrent describes share one build), and again at once when the model or an uploaded voice changes.
 */
export class InfoSource {
  #cached: { event: WyomingEvent; capabilities: ModelCapabilities; builtAtMs: number } | undefined;
  #building: Promise<WyomingEvent> | undefined;
  /** Counts voice changes, so a build that read the folder before one is not kept. */
  #voiceChanges = 0;

  constructor(private readonly options: InfoSourceOptions) {
    // A voice replaced or deleted here (or seen changed in the folder) is news at once; uploads by other replicas within the TTL.
    if (options.uploadedVoices) {
      options.voices.onEvict(() => {
        this.#voiceChanges++;
        this.#cached = undefined;
      });
    }
  }

  /** Throws what `capabilities` throws while the model is not ready (the speech service's 503). */
  async info(): Promise<WyomingEvent> {
    const capabilities = this.options.capabilities();
    const cached = this.#cached;
    if (cached && cached.capabilities === capabilities && performance.now() - cached.builtAtMs < INFO_TTL_MS) return cached.event;
    this.#building ??= this.#build(capabilities).finally(() => (this.#building = undefined));
    return this.#building;
  }

  async #build(capabilities: ModelCapabilities): Promise<WyomingEvent> {
    const { catalog, uploadedVoices, version } = this.options;
    const voiceChangesBefore = this.#voiceChanges;
    // What every replica sharing the speaker folder uploaded or deleted, as GET /v1/audio/voices sees it.
    const listed = await catalog.list({ uploads: uploadedVoices });
    const event = infoEvent({ capabilities, uploaded: listed.uploaded.map(({ voice }) => voice), version });
    if (this.#voiceChanges === voiceChangesBefore) this.#cached = { event, capabilities, builtAtMs: performance.now() };
    return event;
  }
}
