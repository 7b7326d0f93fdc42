/**
 * A model adapter that speaks in tones: deterministic for a (text, seed) pair, 80 ms frames, optional
 * per-frame delay, and a count of frames produced, so route tests can check streaming, seeds and aborts
 * without depending on a real engine.
 */
import type { AdapterCapabilities, AudioChunk, SpeechModelAdapter, SynthesisJob } from "../../src/engine/adapter.ts";

export interface ToneAdapterOptions {
  sampleRateHz?: number;
  frameDelayMs?: number;
  /** Frames per character of input. */
  framesPerChar?: number;
  /** Throw after this many frames (to test mid-stream failures). */
  failAfterFrames?: number;
}

export class ToneAdapter implements SpeechModelAdapter {
  framesProduced = 0;
  readonly capabilities: AdapterCapabilities;
  readonly jobs: SynthesisJob[] = [];

  constructor(private readonly options: ToneAdapterOptions = {}) {
    const sampleRateHz = options.sampleRateHz ?? 24000;
    this.capabilities = {
      modelId: "tone-test",
      kind: "neural",
      description: "test tones",
      voices: ["low", "high"],
      defaultVoice: "low",
      nativeSampleRateHz: sampleRateHz,
      supportedSampleRatesHz: [8000, 16000, 22050, 24000, 44100, 48000],
      supportsCloning: false,
      supportsInstructions: false,
      supportsWordTimestamps: false,
      maxInputChars: 4096,
      framesPerSecond: 12.5,
      speakerEmbeddingDims: [],
    };
  }

  countInputTokens(text: string): number {
    return text.split(/\s+/).filter(Boolean).length;
  }

  async *synthesize(job: SynthesisJob): AsyncGenerator<AudioChunk, void, undefined> {
    this.jobs.push(job);
    const rate = this.capabilities.nativeSampleRateHz;
    const frameSamples = Math.round(rate / 12.5);
    const totalFrames = Math.min(job.maxNewTokens ?? Infinity, Math.max(1, Math.round(job.text.length * (this.options.framesPerChar ?? 0.5))));
    const frequencyHz = (job.voice === "high" ? 440 : 220) + ((job.seed ?? 0) % 7) * 10;
    for (let frame = 0; frame < totalFrames; frame++) {
      if (job.signal.aborted) return;
      if (this.options.frameDelayMs) await new Promise((resolve) => setTimeout(resolve, this.options.frameDelayMs));
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
