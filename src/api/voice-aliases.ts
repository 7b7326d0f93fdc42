/**
 * OpenAI's voice names and the table that maps them to the served model's voices. Clients written for
 * OpenAI (Pipecat refuses any other name; Open WebUI falls back to six of them) send only these, so each one
 * must mean some voice of whatever model is served. A name the model or an upload has keeps its own meaning.
 */
import { z } from "zod";

export const OPENAI_VOICE_NAMES = ["alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse", "marin", "cedar"] as const;
export type OpenAiVoiceName = (typeof OPENAI_VOICE_NAMES)[number];

/** OpenAI voice name → the voice it speaks with; a name left out speaks with "default". */
export type VoiceAliasTable = Readonly<Partial<Record<OpenAiVoiceName, string>>>;

export function isOpenAiVoiceName(name: string): name is OpenAiVoiceName {
  return (OPENAI_VOICE_NAMES as readonly string[]).includes(name);
}

/** `alloy=rms,nova=slt` → { alloy: "rms", nova: "slt" }; names are case-insensitive, so both sides are lower-cased. */
export const voiceAliasTableText = z.string().transform((text, context): VoiceAliasTable => {
  const table: Partial<Record<OpenAiVoiceName, string>> = {};
  for (const entry of text.split(",").map((item) => item.trim()).filter((item) => item.length > 0)) {
    const [alias, target, ...rest] = entry.split("=").map((side) => side.trim().toLowerCase());
    if (target === undefined || rest.length > 0 || alias === "" || target === "") {
      context.addIssue({ code: "custom", message: `'${entry}' is not alias=voice` });
      return z.NEVER;
    }
    if (!isOpenAiVoiceName(alias!)) {
      context.addIssue({ code: "custom", message: `'${alias}' is not one of OpenAI's voice names (${OPENAI_VOICE_NAMES.join(", ")})` });
      return z.NEVER;
    }
    if (table[alias] !== undefined) {
      context.addIssue({ code: "custom", message: `'${alias}' is mapped twice` });
      return z.NEVER;
    }
    table[alias] = target;
  }
  return Object.freeze(table);
});
