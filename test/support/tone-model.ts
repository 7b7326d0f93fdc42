/**
 * A model adapter that speaks in tones: deterministic for a (text, seed) pair, 80 ms frames, optional
 * per-frame delay, and a count of frames produced, so route tests can check streaming, seeds and aborts
 * without depending on a real engine.
 */
import { z } from "zod";
import type { ModelCapabilities, AudioChunk, ReferenceAudio, SpeechModel, SynthesisJob, VoicePrompt } from "../../src/models/contract.ts";
import { GeneratorRunner } from "../../src/models/generator-runner.ts";

/** Bytes the tone model says each live request holds, so state-gauge tests see state come and go. */
export const TONE_REQUEST_STATE_BYTES = 4096;

export interface ToneModelOptions {
  sampleRateHz?: number;
  frameDelayMs?: number;
  /**
   * Lets the event loop turn every this many frames, as a real model's worker replies do; without it (and
   * without a frame delay) a long generation runs as one chain of microtasks.
   */
  macrotaskEveryFrames?: number;
  /** Frames per character of input. */
  framesPerChar?: number;
  /** Throw after this many frames (to test mid-stream failures). */
  failAfterFrames?: number;
  /** Accept reference audio: the voice prompt's tone follows the reference's dominant pitch. */
  cloning?: boolean;
  speakerEmbeddingDims?: number[];
  /** The extra_params the adapter reads; by default every key passes through to the job. */
  paramsSchema?: z.ZodType<Record<string, unknown>>;
  /** Built-in voices (default: low, high); an empty list is a model that speaks only uploaded or reference voices. */
  voices?: string[];
}

export interface TonePromptState {
  reference: ReferenceAudio;
  frequencyHz: number;
}

export class ToneModel implements SpeechModel {
  framesProduced = 0;
  readonly capabilities: ModelCapabilities;
  readonly paramsSchema: z.ZodType<Record<string, unknown>>;
  readonly jobs: SynthesisJob[] = [];
  readonly encodedReferences: ReferenceAudio[] = [];
  encodeVoice?: (reference: ReferenceAudio, signal: AbortSignal) => Promise<VoicePrompt>;
  /** One frame per engine step. */
  readonly runner = new GeneratorRunner((job) => this.frameSteps(job), { bytesPerRequest: TONE_REQUEST_STATE_BYTES });

  constructor(private readonly options: ToneModelOptions = {}) {
    const sampleRateHz = options.sampleRateHz ?? 24000;
    const voices = options.voices ?? ["low", "high"];
    this.capabilities = {
      modelId: "tone-test",
      kind: "neural",
      description: "test tones",
      voices,
      defaultVoice: voices[0] ?? "",
      nativeSampleRateHz: sampleRateHz,
      supportsCloning: options.cloning ?? false,
      supportsInstructions: false,
      supportsWordTimestamps: false,
      framesPerSecond: 12.5,
      speakerEmbeddingDims: options.speakerEmbeddingDims ?? [],
      languages: ["en"],
    };
    this.paramsSchema = options.paramsSchema ?? z.record(z.string(), z.unknown());
    if (options.cloning) {
      this.encodeVoice = async (reference) => {
        this.encodedReferences.push(reference);
        const state: TonePromptState = { reference, frequencyHz: zeroCrossingFrequencyHz(reference.samples, reference.sampleRateHz) };
        return { audioFrameCount: Math.ceil(reference.samples.length / (reference.sampleRateHz / 12.5)), byteSize: reference.samples.byteLength, state };
      };
    }
  }

  countInputTokens(text: string): number {
    return text.split(/\s+/).filter(Boolean).length;
  }

  async *frameSteps(job: SynthesisJob): AsyncGenerator<AudioChunk[], void, undefined> {
    for await (const chunk of this.synthesize(job)) yield [chunk];
  }

  async *synthesize(job: SynthesisJob): AsyncGenerator<AudioChunk, void, undefined> {
    this.jobs.push(job);
    // As the real models do: a voice that is neither built in nor a prompt fails only once generation runs.
    if (!job.voicePrompt && !this.capabilities.voices.includes(job.voice)) throw new Error(`no built-in voice '${job.voice}'`);
    const rate = this.capabilities.nativeSampleRateHz;
    const frameSamples = Math.round(rate / 12.5);
    const totalFrames = Math.min(job.maxNewTokens ?? Infinity, Math.max(1, Math.round(job.text.length * (this.options.framesPerChar ?? 0.5))));
    const prompt = job.voicePrompt?.state as TonePromptState | undefined;
    const frequencyHz = prompt ? prompt.frequencyHz : (job.voice === "high" ? 440 : 220) + Number((job.seed ?? 0n) % 7n) * 10;
    for (let frame = 0; frame < totalFrames; frame++) {
      if (job.signal.aborted) return;
      if (this.options.frameDelayMs) await new Promise((resolve) => setTimeout(resolve, this.options.frameDelayMs));
      else if (this.options.macrotaskEveryFrames && frame % this.options.macrotaskEveryFrames === 0) await new Promise((resolve) => setImmediate(resolve));
      if (job.signal.aborted) return;
      if (this.options.failAfterFrames !== undefined && frame >= this.options.failAfterFrames) throw new Error("tone generator broke");
      const samples = new Float32Array(frameSamples);
      for (let i = 0; i < frameSamples; i++) samples[i] = 0.5 * Math.sin((2 * Math.PI * frequencyHz * (frame * frameSamples + i)) / rate);
      this.framesProduced++;
      yield { samples, sampleRateHz: rate, frameCount: 1 };
    }
  }

  async close(): Promise<void> {}
}

function zeroCrossingFrequencyHz(samples: Float32Array, sampleRateHz: number): number {
  let crossings = 0;
  for (let i = 1; i < samples.length; i++) if (samples[i - 1]! < 0 !== samples[i]! < 0) crossings++;
  return Math.round((crossings / 2) * (sampleRateHz / samples.length));
}
