/**
 * What this server can speak with, and by what name: the one place that turns a voice name (or a reference
 * clip) into a voice, lists the voices a front end offers, and checks a name without speaking. Every front
 * end asks it (the OpenAI routes, ElevenLabs, Wyoming's info and synthesize, the page's built-in names), so a
 * name means the same everywhere.
 *
 * A name is, in order: an uploaded voice the model can speak (it shadows a built-in voice of the same name,
 * and one named "default" is what "default" means, as in vLLM-Omni), a built-in voice, "default" (the model's
 * default voice), an uploaded voice the model cannot speak (a 400 that says why), or an alias (--voice-aliases,
 * OpenAI's names, ElevenLabs' premade ids and names), which speaks with the voice the alias table gives.
 */
import { ApiError, badRequest } from "../api/errors.ts";
import { MAX_VOICE_NAME_CHARS } from "../api/speech.ts";
import { voiceAliasTarget, type VoiceAliasTable } from "../api/voice-aliases.ts";
import type { RefAudioResolver } from "./ref-audio.ts";
import type { StoredVoice, VoiceStore } from "./store.ts";

/** What the catalog needs to know of the served model (its capabilities, models/contract.ts). */
export interface SpeakingModel {
  modelId: string;
  description: string;
  voices: readonly string[];
  defaultVoice: string;
  supportsCloning: boolean;
  nativeSampleRateHz: number;
}

/** A voice the catalog found: a built-in voice by name, an upload, or a clip to clone from. */
export type ResolvedVoice =
  | { kind: "built-in"; name: string }
  | { kind: "uploaded"; voice: StoredVoice; transcript: string | undefined }
  | { kind: "reference"; samples: Float32Array; transcript: string | undefined };

/** What a request names: a voice (default "default"), or a reference clip (a URL or data: URI), which wins. */
export interface VoiceRequest {
  name?: string;
  refAudio?: string;
  /** The transcript of the clip or of an uploaded voice (overriding the stored one when not blank). */
  refText?: string;
}

export interface CatalogScope {
  /** Whether uploaded voices are served to this caller (Wyoming with API keys set does not serve them). */
  uploads: boolean;
}

/** A name before an alias is followed: a built-in voice, or an upload (which may be one the model cannot use). */
type NamedVoice = { builtIn: string } | { uploaded: StoredVoice };

/** Names an unknown-voice error lists; the rest are only counted (GET /v1/audio/voices lists them all). */
const LISTED_VOICE_NAMES = 10;

export class VoiceCatalog {
  constructor(
    private readonly model: () => SpeakingModel,
    private readonly store: VoiceStore,
    private readonly aliases: VoiceAliasTable,
    private readonly refAudio: RefAudioResolver,
  ) {}

  /** --voice-aliases, for the listings that show each alias beside the voices. */
  get aliasTable(): VoiceAliasTable {
    return this.aliases;
  }

  /** The voice a request names. Throws a 400 (unknown voice, one the model cannot use) or a 500 (an alias naming nothing). */
  async resolve(request: VoiceRequest, scope: CatalogScope, signal: AbortSignal): Promise<ResolvedVoice> {
    const model = this.model();
    if (request.refAudio !== undefined) {
      if (!model.supportsCloning) throw badRequest(`model '${model.modelId}' (${model.description}) cannot clone voices from ref_audio; use one of the built-in voices`, "ref_audio");
      const samples = await this.refAudio.resolve(request.refAudio, model.nativeSampleRateHz, signal);
      return { kind: "reference", samples, transcript: request.refText?.trim() || undefined };
    }
    const requested = request.name?.trim().toLowerCase() || "default";
    const named = await this.#named(requested, scope);
    if ("builtIn" in named) {
      if (request.refText !== undefined) throw badRequest(`ref_text is the transcript of ref_audio or of an uploaded voice, and voice '${requested}' is built in`, "ref_text");
      return { kind: "built-in", name: named.builtIn };
    }
    const { uploaded } = named;
    if (!model.supportsCloning) {
      throw badRequest(`voice '${uploaded.name}' is an uploaded voice, and model '${model.modelId}' (${model.description}) cannot clone voices; use a built-in voice`, "voice");
    }
    if (uploaded.embedding_source === "direct") {
      throw badRequest(`voice '${uploaded.name}' is a speaker embedding, which model '${model.modelId}' cannot use; upload audio instead`, "voice");
    }
    // As vLLM-Omni: a blank ref_text leaves the stored transcript in place.
    return { kind: "uploaded", voice: uploaded, transcript: request.refText?.trim() || uploaded.ref_text };
  }

  /** Throws as `resolve` would for this name, without loading anything: for a caller that speaks later. */
  async check(name: string | undefined, scope: CatalogScope): Promise<void> {
    await this.resolve({ name }, scope, new AbortController().signal);
  }

  /**
   * Whether a name means anything here (an upload, speakable or not, a built-in voice, "default" or an
   * alias), without judging whether the model can speak it: ElevenLabs answers an unknown voice_id 404.
   */
  async knows(name: string, scope: CatalogScope): Promise<boolean> {
    const lower = name.trim().toLowerCase();
    // Replicas share the speaker folder: the upload as the folder holds it now.
    await this.store.refreshName(lower);
    return (scope.uploads && this.store.get(lower) !== undefined) || lower === "default" || this.model().voices.includes(lower) || voiceAliasTarget(this.aliases, lower) !== undefined;
  }

  /**
   * The voices as the folder holds them now (re-scanned: replicas share it): the model's built-in voices and
   * the uploads served to this caller, oldest first, with whether the model can speak each.
   */
  async list(scope: CatalogScope): Promise<{ builtIn: readonly string[]; uploaded: { voice: StoredVoice; speakable: boolean }[] }> {
    const model = this.model();
    if (!scope.uploads) return { builtIn: model.voices, uploaded: [] };
    await this.store.rescan();
    return { builtIn: model.voices, uploaded: this.store.list().map((voice) => ({ voice, speakable: canSpeakUpload(voice, model) })) };
  }

  /** What a lower-case name means to this model, after the folder is re-read for it and its alias target. */
  async #named(requested: string, scope: CatalogScope): Promise<NamedVoice> {
    const model = this.model();
    await this.store.refreshName(requested);
    const aliasTarget = voiceAliasTarget(this.aliases, requested);
    if (aliasTarget !== undefined) await this.store.refreshName(aliasTarget);
    const named = this.#lookUp(requested, model, scope) ?? this.#lookUpAlias(requested, model, scope);
    if (named !== undefined) return named;
    if (model.voices.length === 0 && (!scope.uploads || this.store.list().length === 0)) throw badRequest(`Unknown voice '${requested}'. ${noVoicesHint(model)}`, "voice");
    throw badRequest(`Unknown voice '${requested}'. Accepted: ${this.#someVoiceNames(model.voices, scope)}`, "voice");
  }

  #lookUp(name: string, model: SpeakingModel, scope: CatalogScope): NamedVoice | undefined {
    const uploaded = scope.uploads ? this.store.get(name) : undefined;
    // An upload the model cannot speak must not take the name from a built-in voice that works.
    if (uploaded && canSpeakUpload(uploaded, model)) return { uploaded };
    if (model.voices.includes(name)) return { builtIn: name };
    if (name === "default") return { builtIn: defaultBuiltInVoice(model) };
    return uploaded && { uploaded };
  }

  #lookUpAlias(name: string, model: SpeakingModel, scope: CatalogScope): NamedVoice | undefined {
    const target = voiceAliasTarget(this.aliases, name);
    if (target === undefined) return undefined;
    const named = this.#lookUp(target, model, scope);
    if (named) return named;
    // An alias of an upload names nothing where uploads are not served (Wyoming with API keys): an unknown voice.
    if (!scope.uploads && this.store.get(target)) return undefined;
    // The client asked for a name the server promises to accept; the table, not the request, is wrong.
    throw new ApiError(500, `voice '${name}' is mapped to '${target}' by --voice-aliases, and model '${model.modelId}' has no voice '${target}'; fix --voice-aliases`, "voice");
  }

  /** The first few accepted names and a count of the rest: the message stays short with a thousand voices. */
  #someVoiceNames(builtIn: readonly string[], scope: CatalogScope): string {
    const uploaded = scope.uploads ? this.store.list() : [];
    const total = (builtIn.length > 0 ? 1 : 0) + builtIn.length + uploaded.length;
    const listed = [...(builtIn.length > 0 ? ["default"] : []), ...builtIn, ...uploaded.slice(0, LISTED_VOICE_NAMES).map((voice) => voice.name)].slice(0, LISTED_VOICE_NAMES);
    // Voices restored from an older folder may carry names longer than uploads now allow.
    const shown = listed.map((name) => (name.length > MAX_VOICE_NAME_CHARS ? `${name.slice(0, MAX_VOICE_NAME_CHARS)}…` : name)).join(", ");
    return total > listed.length ? `${shown} … and ${total - listed.length} more (GET /v1/audio/voices lists them all)` : shown;
  }
}

/** The built-in voice a name means, for a caller without uploads (the page): the same rule as `resolve`'s. */
export function builtInVoiceNamed(name: string | undefined, model: Pick<SpeakingModel, "voices" | "defaultVoice">, aliases: VoiceAliasTable = {}): string | undefined {
  const lower = name?.trim().toLowerCase() || "default";
  const target = model.voices.includes(lower) || lower === "default" ? lower : voiceAliasTarget(aliases, lower);
  if (target === undefined) return undefined;
  if (model.voices.includes(target)) return target;
  return target === "default" && model.voices.includes(model.defaultVoice) ? model.defaultVoice : undefined;
}

export function canSpeakUpload(voice: StoredVoice, model: Pick<SpeakingModel, "supportsCloning">): boolean {
  return model.supportsCloning && voice.embedding_source === "audio";
}

/** What "default" (or no voice) means without an uploaded "default": the model's default voice, which a model without built-in voices lacks. */
function defaultBuiltInVoice(model: SpeakingModel): string {
  if (model.voices.includes(model.defaultVoice)) return model.defaultVoice;
  throw badRequest(`Model '${model.modelId}' has no built-in voices, so "default" names none. ${noVoicesHint(model)}`, "voice");
}

function noVoicesHint(model: SpeakingModel): string {
  return model.supportsCloning
    ? "Upload a voice (POST /v1/audio/voices) and pass its name as voice, or pass ref_audio with a 1–30 s clip to clone"
    : "It cannot clone voices either, so this server has no voice to speak with";
}
