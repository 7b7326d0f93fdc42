/**
 * The data of the Wyoming events a text-to-speech client sends (rhasspy/wyoming, wyoming/tts.py): a one-shot
 * `synthesize`, and the streaming run `synthesize-start`, `synthesize-chunk`…, `synthesize-stop`. Fields the
 * protocol may add later are ignored, as the reference implementation's readers do.
 */
import { z } from "zod";
import { MAX_VOICE_NAME_CHARS } from "../api/speech.ts";

/**
 * The voice a client asks for: by name (our voice names, as `info` lists them), else by language (the first
 * voice that speaks it). `speaker` picks a speaker of a multi-speaker voice; none of ours has several.
 */
const voiceSelection = z
  .looseObject({
    name: z.string().max(MAX_VOICE_NAME_CHARS).nullish(),
    language: z.string().max(64).nullish(),
    speaker: z.string().nullish(),
  })
  .nullish();

export type WyomingVoiceSelection = NonNullable<z.output<typeof voiceSelection>>;

export const synthesizeDataSchema = z.looseObject({ text: z.string({ error: "synthesize needs data.text, a string" }), voice: voiceSelection });
export const synthesizeStartDataSchema = z.looseObject({ voice: voiceSelection });
export const synthesizeChunkDataSchema = z.looseObject({ text: z.string({ error: "synthesize-chunk needs data.text, a string" }) });
