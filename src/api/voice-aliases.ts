/**
 * The voice names clients send without asking the server which voices it has, and the table that maps names to
 * the served model's voices. Clients written for OpenAI (Pipecat refuses any other name; Open WebUI falls back
 * to six of them) send OpenAI's names; clients written for ElevenLabs send one of its premade voices by id
 * (the AI SDK: Rachel, LiveKit's plugin: Will, Mastra: Aria) or by name (the legacy `elevenlabs` SDK looks
 * "Sarah" up in the voice list). Each of them must mean some voice of whatever model is served. A name the
 * model or an upload has keeps its own meaning.
 */
import { z } from "zod";

export const OPENAI_VOICE_NAMES = ["alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse", "marin", "cedar"] as const;
export type OpenAiVoiceName = (typeof OPENAI_VOICE_NAMES)[number];

export function isOpenAiVoiceName(name: string): name is OpenAiVoiceName {
  return (OPENAI_VOICE_NAMES as readonly string[]).includes(name);
}

export interface PremadeVoice {
  /** ElevenLabs' id, in its own case (ids are matched case-insensitively here). */
  voiceId: string;
  name: string;
}

/**
 * ElevenLabs' premade voices: the default voices its API lists today, then the legacy ones it still answers
 * (GET /v1/voices?show_legacy=true), whose ids older clients and tutorials keep as defaults.
 */
export const ELEVENLABS_PREMADE_VOICES: readonly PremadeVoice[] = [
  ["EXAVITQu4vr4xnSDxMaL", "Sarah"],
  ["9BWtsMINqrJLrRacOk9x", "Aria"],
  ["CwhRBWXzGAHq8TQ4Fs17", "Roger"],
  ["FGY2WhTYpPnrIDTdsKH5", "Laura"],
  ["IKne3meq5aSn9XLyUdCD", "Charlie"],
  ["JBFqnCBsd6RMkjVDRZzb", "George"],
  ["N2lVS1w4EtoT3dr4eOWO", "Callum"],
  ["SAz9YHcvj6GT2YYXdXww", "River"],
  ["TX3LPaxmHKxFdv7VOQHJ", "Liam"],
  ["XB0fDUnXU5powFXDhCwa", "Charlotte"],
  ["Xb7hH8MSUJpSbSDYk0k2", "Alice"],
  ["XrExE9yKIg1WjnnlVkGX", "Matilda"],
  ["bIHbv24MWmeRgasZH58o", "Will"],
  ["cgSgspJ2msm6clMCkdW9", "Jessica"],
  ["cjVigY5qzO86Huf0OWal", "Eric"],
  ["iP95p4xoKVk53GoZ742B", "Chris"],
  ["nPczCjzI2devNBz1zQrb", "Brian"],
  ["onwK4e9ZLuTAKqWW03F9", "Daniel"],
  ["pFZP5JQG7iQjIQuC4Bku", "Lily"],
  ["pqHfZKP75CvOlQylNhV4", "Bill"],
  ["21m00Tcm4TlvDq8ikWAM", "Rachel"],
  ["29vD33N1CtxCmqQRPOHJ", "Drew"],
  ["2EiwWnXFnvU5JabPnv8n", "Clyde"],
  ["5Q0t7uMcjvnagumLfvZi", "Paul"],
  ["AZnzlk1XvdvUeBnXmlld", "Domi"],
  ["CYw3kZ02Hs0563khs1Fj", "Dave"],
  ["D38z5RcWu1voky8WS1ja", "Fin"],
  ["ErXwobaYiN019PkySvjV", "Antoni"],
  ["GBv7mTt0atIp3Br8iCZE", "Thomas"],
  ["LcfcDJNUP1GQjkzn1xUU", "Emily"],
  ["MF3mGyEYCl7XYWbV9V6O", "Elli"],
  ["ODq5zmih8GrVes37Dizd", "Patrick"],
  ["SOYHLrjzK2X1ezoPC6cr", "Harry"],
  ["ThT5KcBeYPX3keUQqHPh", "Dorothy"],
  ["TxGEqnHWrfWFTfGW9XjX", "Josh"],
  ["VR6AewLTigWG4xSOukaG", "Arnold"],
  ["ZQe5CZNOzWyzPSCn5a3c", "James"],
  ["Zlb1dXrM653N07WRdFW3", "Joseph"],
  ["bVMeCyTHy58xNoL34h3p", "Jeremy"],
  ["flq6f7yk4E4fJM5XTYuZ", "Michael"],
  ["g5CIjZEefAph4nQFvHAz", "Ethan"],
  ["jBpfuIE2acCO8z3wKNLl", "Gigi"],
  ["jsCqWAovK2LkecY7zXl4", "Freya"],
  ["oWAxZDx7w5VEj9dCyTzz", "Grace"],
  ["pMsXgVXv3BLzUgSXRplE", "Serena"],
  ["pNInz6obpgDQGcFmaJgB", "Adam"],
  ["piTKgcLEGmPE4e6mEKli", "Nicole"],
  ["t0jbNlBVZ17f02VDIeMI", "Jessie"],
  ["yoZ06aMxZJJ28mfd3POQ", "Sam"],
  ["z9fAnlkpzviPz146aGWa", "Glinda"],
  ["zcAOhNBS3c14rBihAFp1", "Giovanni"],
  ["zrHiDhphv9ZnVXBqCLjz", "Mimi"],
].map(([voiceId, name]) => ({ voiceId: voiceId!, name: name! }));

/** A premade voice by its lower-case id or name. */
const PREMADE_VOICE_BY_SPELLING: ReadonlyMap<string, PremadeVoice> = new Map(ELEVENLABS_PREMADE_VOICES.flatMap((voice) => [[voice.voiceId.toLowerCase(), voice] as const, [voice.name.toLowerCase(), voice] as const]));

export function premadeVoiceNamed(name: string): PremadeVoice | undefined {
  return PREMADE_VOICE_BY_SPELLING.get(name.toLowerCase());
}

/** Lower-case name or id → the lower-case voice it speaks with. */
export type VoiceAliasTable = Readonly<Record<string, string>>;

/**
 * The voice a lower-case name speaks with as an alias: the table's; for a premade voice, what the table gives
 * its id or its name (the legacy SDK looks "Sarah" up and sends her id); else "default" for OpenAI's names and
 * ElevenLabs' premade voices. Undefined for any other name.
 */
export function voiceAliasTarget(table: VoiceAliasTable, name: string): string | undefined {
  if (Object.hasOwn(table, name)) return table[name];
  const premade = PREMADE_VOICE_BY_SPELLING.get(name);
  if (premade) {
    for (const spelling of [premade.voiceId.toLowerCase(), premade.name.toLowerCase()]) if (Object.hasOwn(table, spelling)) return table[spelling];
    return "default";
  }
  return isOpenAiVoiceName(name) ? "default" : undefined;
}

/**
 * `alloy=rms,21m00Tcm4TlvDq8ikWAM=slt,narrator=slt` → { alloy: "rms", "21m00tcm4tlvdq8ikwam": "slt", narrator: "slt" }:
 * any name or id may be an alias; names are case-insensitive, so both sides are lower-cased.
 */
export const voiceAliasTableText = z.string().transform((text, context): VoiceAliasTable => {
  const table = new Map<string, string>();
  for (const entry of text.split(",").map((item) => item.trim()).filter((item) => item.length > 0)) {
    const [alias, target, ...rest] = entry.split("=").map((side) => side.trim().toLowerCase());
    if (target === undefined || rest.length > 0 || alias === "" || target === "") {
      context.addIssue({ code: "custom", message: `'${entry}' is not alias=voice` });
      return z.NEVER;
    }
    if (alias === "default") {
      context.addIssue({ code: "custom", message: "'default' is the model's default voice (or an upload named default), not an alias" });
      return z.NEVER;
    }
    if (table.has(alias!)) {
      context.addIssue({ code: "custom", message: `'${alias}' is mapped twice` });
      return z.NEVER;
    }
    table.set(alias!, target);
  }
  // fromEntries defines each key as an own property, so an alias such as "__proto__" stays an ordinary key.
  return Object.freeze(Object.fromEntries(table));
});
