/**
 * Cloned voices as model prompts: an uploaded voice or a reference clip is encoded once (the model's voice
 * encoder), kept in a bounded cache, and shared by every request that speaks with it meanwhile. Encodes run
 * one at a time and count in the engine's admission.
 */
import { LRUCache } from "lru-cache";
import { createHash } from "node:crypto";
import { Semaphore } from "../async/semaphore.ts";
import { badRequest } from "../api/errors.ts";
import { resample } from "../audio/resampler.ts";
import type { Engine } from "../engine/core.ts";
import type { SpeechModel, VoicePrompt } from "../models/contract.ts";
import type { ResolvedVoice } from "../voices/catalog.ts";
import type { StoredVoice, VoiceStore } from "../voices/store.ts";

/** Encoded voice prompts kept in memory, at most this many. */
const VOICE_PROMPT_CACHE_ENTRIES = 64;
/**
 * And at most this many bytes of them: a prompt is a model state, 6–10 MiB for a 5–10 s clip on the real-size
 * Pocket bundle, so 64 of them could take 600 MiB of a 1 GiB container; this keeps the 6–10 voices used last.
 */
export const VOICE_PROMPT_CACHE_BYTES = 64 * 1024 ** 2;

export class VoicePrompts {
  /**
   * Prompts keyed by lower-case name, created_at and transcript (a request's ref_text overrides the stored
   * one): a delete + re-upload gets a new created_at, so a stale prompt can never be served even before the
   * eviction below runs. Reference clips are keyed by their content.
   */
  readonly #prompts = new LRUCache<string, { prompt: Promise<VoicePrompt> }>({ max: VOICE_PROMPT_CACHE_ENTRIES, maxSize: VOICE_PROMPT_CACHE_BYTES });
  /**
   * One voice encode at a time: on two cores a second would only halve the speed of both, and take a core
   * from the playing streams. Others wait, as many as the engine runs streams; past that a 429.
   */
  readonly #encodeGate = new Semaphore(1);
  #encodesWaiting = 0;

  constructor(private readonly store: VoiceStore) {
    store.onEvict((nameLower) => {
      for (const key of this.#prompts.keys()) if (key.startsWith(`${nameLower}\u0000`)) this.#prompts.delete(key);
    });
  }

  get count(): number {
    return this.#prompts.size;
  }

  /** Bytes of the cached prompts (one byte for each still being encoded). */
  get bytes(): number {
    return this.#prompts.calculatedSize;
  }

  /** The prompt a cloned voice speaks with; none for a built-in voice, which the model loads by name. */
  async promptFor(voice: ResolvedVoice, model: SpeechModel, engine: Engine, signal: AbortSignal): Promise<VoicePrompt | undefined> {
    if (voice.kind === "built-in") return undefined;
    const rateHz = model.capabilities.nativeSampleRateHz;
    if (voice.kind === "reference") {
      const { samples, transcript } = voice;
      // Keyed by content: the items of a batch, a WebSocket session's sentences and repeat callers that send
      // the same clip (by any URL or data: spelling) share one encode.
      const key = `\u0000ref\u0000${createHash("sha256").update(new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength)).digest("base64")}\u0000${transcript ?? ""}`;
      return this.#shared(key, signal, () => this.#encode(model, engine, { samples, sampleRateHz: rateHz, transcript }));
    }
    const { voice: uploaded, transcript } = voice;
    const key = `${uploaded.name.toLowerCase()}\u0000${uploaded.created_at}\u0000${transcript ?? ""}`;
    return this.#shared(key, signal, async () => {
      const stored = await this.store.loadAudio(uploaded.name);
      if (!stored || stored.voice.created_at !== uploaded.created_at) throw replaced(uploaded);
      const samples = await resample(stored.samples, stored.sampleRateHz, rateHz);
      return this.#encode(model, engine, { samples, sampleRateHz: rateHz, transcript });
    });
  }

  /**
   * The cached prompt under `key`, or the one `encode` makes, shared with every caller that asks meanwhile.
   * Encoding is not tied to the first caller's signal, since later callers wait for it too; a failed encode
   * (a 429 included) is not kept.
   */
  #shared(key: string, signal: AbortSignal, encode: () => Promise<VoicePrompt>): Promise<VoicePrompt> {
    let prompt = this.#prompts.get(key)?.prompt;
    if (!prompt) {
      prompt = encode();
      // Its size is known once encoded; until then it counts a byte. (A new entry object, since the cache
      // keeps the old size when the same value is set again.)
      this.#prompts.set(key, { prompt }, { size: 1 });
      const made = prompt;
      made.then(
        (value) => {
          if (this.#prompts.peek(key)?.prompt === made) this.#prompts.set(key, { prompt: made }, { size: Math.max(1, value.byteSize) });
        },
        () => {
          if (this.#prompts.peek(key)?.prompt === made) this.#prompts.delete(key);
        },
      );
    }
    return prompt.then((value) => {
      if (signal.aborted) throw signal.reason;
      return value;
    });
  }

  /**
   * A voice encode counts in admission: with no room in the engine, or more encodes waiting than the engine
   * runs streams, it is a 429 before any work. Its model work runs between two engine ticks; the encoder
   * itself, where the model has it in a worker, off the JS thread.
   */
  async #encode(model: SpeechModel, engine: Engine, reference: Parameters<NonNullable<SpeechModel["encodeVoice"]>>[0]): Promise<VoicePrompt> {
    const encodeVoice = model.encodeVoice?.bind(model);
    if (!encodeVoice) throw new Error(`model ${model.capabilities.modelId} claims cloning but has no encodeVoice`);
    engine.refuseIfFull();
    if (this.#encodesWaiting >= engine.limits.maxStreams) throw engine.fullError();
    this.#encodesWaiting++;
    let release: () => void;
    try {
      release = await this.#encodeGate.acquire();
    } finally {
      this.#encodesWaiting--;
    }
    const signal = new AbortController().signal;
    try {
      return await encodeVoice(reference, signal, (task) => engine.runTask(task, signal));
    } finally {
      release();
    }
  }
}

function replaced(voice: StoredVoice) {
  return badRequest(`voice '${voice.name}' was replaced or deleted; retry`, "voice");
}
