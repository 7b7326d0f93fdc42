/**
 * The speech core's vocabulary, protocol-neutral: what a front end asks for (SpeechSpec, SpeechDelivery) and
 * what it gets back (StartedSpeech: the prepared job, the audio, and how it ended).
 */
import type { UtterancePart } from "./paused-stream.ts";
import type { Lexicon } from "../text/lexicon.ts";
import type { TextNormalizationMode } from "../api/speech.ts";
import type { EncodingOptions, ResponseFormat } from "../audio/encoders.ts";
import type { DeliveryMode } from "../metrics.ts";
import type { FinishReason, SynthesisJob } from "../models/contract.ts";
import type { ResolvedVoice } from "../voices/catalog.ts";

/** What to say, with which voice, and in what audio: every front end's request once it has read it. */
export interface SpeechSpec {
  /** The text as the client sent it; the model reads its normalized form. */
  text: string;
  voice: ResolvedVoice;
  output: {
    format: ResponseFormat;
    /** The output rate; by default the format's own (G.711's 8 kHz) or else the model's. */
    rateHz?: number;
    bitrateKbps?: number;
  };
  /** Played this many times faster (a time-stretch of the whole utterance); 1 by default. */
  speed?: number;
  sampling: {
    seed?: bigint;
    maxNewTokens?: number;
    /** The model's own parameters (its paramsSchema), temperature among them. */
    params: Record<string, unknown>;
  };
  normalization?: TextNormalizationMode;
  /** The request's own alias rules (ElevenLabs' pronunciation dictionaries), before the server's --lexicon. */
  lexicon?: Lexicon;
  instructions?: string;
  language?: string;
  /** Names, in the dialect's own words, the parts of its request the model did not use. */
  nameIgnored?: (unused: UnusedParts) => string[];
}

/** What the model could not use of a spec. */
export interface UnusedParts {
  /** Part of the text was not read (a script the model does not speak). */
  text: boolean;
  /** The model does not follow instructions. */
  instructions: boolean;
  /** Keys of `sampling.params` the model's schema does not read. */
  params: string[];
}

/** How the audio leaves, which decides admission and what the metrics count it as. */
export interface SpeechDelivery {
  mode: DeliveryMode;
  /** The audio leaves piece by piece as it is made, not as one file. */
  streamed: boolean;
  /**
   * "now": admitted before `start` returns, so a refusal is still a status line; "on-read": when the audio is
   * first read (a WebSocket sentence, after its audio.start).
   */
  admit: "now" | "on-read";
  /** A full engine refuses (429), or the request waits for a place (a batch item). */
  whenFull: "reject" | "wait";
}

/** A delivery of mono float samples at the spec's rate, rather than bytes in its format. */
export type SamplesDelivery = SpeechDelivery & { audio: "samples" };

export interface PreparedSpeech {
  /** The whole utterance's job; where SSML breaks cut it, `parts` are what the engine runs. */
  job: Omit<SynthesisJob, "signal">;
  parts?: UtterancePart[];
  responseFormat: ResponseFormat;
  outputSampleRateHz: number;
  /** What the route asks of the codec beyond the format (a bitrate). */
  encoding: EncodingOptions;
  speed: number;
  delivery: DeliveryMode;
  streamed: boolean;
  inputTextTokens: number;
  inputAudioTokens: number;
  /** The parts of the request the served model ignored, as its dialect names them. */
  ignoredFields: string[];
}

export interface SpeechUsage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  input_token_details: { text_tokens: number; audio_tokens: number };
}

/** A request under way: what `start` returns. */
export interface StartedSpeech<Audio extends Uint8Array | Float32Array = Uint8Array> {
  prepared: PreparedSpeech;
  /**
   * The audio. Encoded, a file comes as one piece once it is made and a stream piece by piece as the format
   * can give them (audio/stream-encoder.ts), the joined pieces one file; as samples, chunk by chunk at the
   * output rate. Reading it runs the generation; leaving early (`return`, `break`) gives the generation up.
   * A file whose client left throws a 499.
   */
  audio: AsyncGenerator<Audio, void, undefined>;
  /** Settles (never rejects) once `audio` has ended, however it ended. */
  done: Promise<SpeechEnd>;
}

export interface SpeechEnd {
  /** "stop" (the speech ended by itself), "length" (a frame cap cut it), "abort" (the client left) or "error". */
  finishReason: FinishReason;
  usage: SpeechUsage;
  /** Seconds of audio delivered, after the speed change. */
  audioSeconds: number;
}
