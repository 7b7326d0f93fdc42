/**
 * The `info` event that answers `describe` (rhasspy/wyoming, wyoming/info.py): one tts program, voxedge, whose
 * voices are the model's built-in voices and the uploaded voices it can speak. Home Assistant offers a
 * program's voices by language, and streams text to it when `supports_synthesize_streaming` is set.
 *
 * Every field of an artifact is written, null where unknown: the reference reader builds dataclasses from
 * the dict and a missing required field fails it.
 */
import type { ModelCapabilities } from "../models/contract.ts";
import type { StoredVoice } from "../voices/store.ts";
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
  /** The uploaded voices, as the store lists them. */
  uploaded: readonly StoredVoice[];
  /** voxedge's own version. */
  version: string;
}

/** Uploads the model can speak: cloned from audio, by a model that clones. */
export function speakableUploads(capabilities: ModelCapabilities, uploaded: readonly StoredVoice[]): StoredVoice[] {
  return capabilities.supportsCloning ? uploaded.filter((voice) => voice.embedding_source === "audio") : [];
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
