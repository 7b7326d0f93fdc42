/** POST /v1/audio/speech: one file, a raw audio stream, or SSE deltas. */
import type { Context, Hono } from "hono";
import { speechRequestSchema } from "../api/speech.ts";
import { CONTENT_TYPES } from "../audio/encoders.ts";
import { createStreamEncoder, type StreamEncoder } from "../audio/stream-encoder.ts";
import type { ServiceMetrics, StreamOutcome } from "../metrics.ts";
import { type GenerationTally, ignoredFieldsHeader, type PreparedSpeech, type SpeechService, usageHeaders } from "../speech/service.ts";
import type { Logger } from "../log/logger.ts";
import { pullStream } from "./audio-stream.ts";
import { readJsonBody, parseWith, type BodyLimits } from "./request-body.ts";
import { ApiError } from "../api/errors.ts";
import type { EngineStream } from "../engine/core.ts";
import { noteAudio, streamEnded, type ResponseEnd } from "./access-log.ts";

export interface SpeechRouteDeps {
  service: SpeechService;
  metrics: ServiceMetrics;
  logger: Logger;
  body: BodyLimits;
  stallTimeoutMs: number;
}

export function registerSpeechRoute(app: Hono, deps: SpeechRouteDeps): void {
  app.post("/v1/audio/speech", async (c) => {
    const request = parseWith(speechRequestSchema, await readJsonBody(c, deps.body));
    const requestSignal = c.req.raw.signal;
    const prepared = await deps.service.prepare(request, "http", requestSignal);

    if (prepared.streaming === null) {
      const rendered = await deps.service.render(prepared, requestSignal, "file", (seconds) => noteAudio(c, seconds));
      return new Response(rendered.audio as Uint8Array<ArrayBuffer>, {
        headers: {
          "Content-Type": rendered.contentType,
          "Content-Length": String(rendered.audio.byteLength),
          "X-Finish-Reason": rendered.finishReason,
          ...usageHeaders(rendered.usage),
          ...ignoredFieldsHeader(prepared),
        },
      });
    }

    // Admitted before the response starts, so a full engine is a 429 and not a broken stream.
    const stream = await deps.service.admit(prepared, requestSignal);
    // Until the body is handed over nobody reads or cancels the stream: any failure here must give it up,
    // or it keeps its running place and model state for good.
    try {
      return streamingResponse(deps, prepared, stream, requestSignal, c);
    } catch (error) {
      stream.cancel();
      throw error;
    }
  });
}

function streamingResponse(deps: SpeechRouteDeps, prepared: PreparedSpeech, stream: EngineStream, requestSignal: AbortSignal, c: Context): Response {
  const mode = prepared.streaming === "sse" ? "sse" : "audio_stream";
  const onAudio = (samples: Float32Array) => noteAudio(c, samples.length / prepared.outputSampleRateHz);
  const ended = streamEnded(c);
  const onEnd = (outcome: StreamOutcome, error?: unknown) => {
    ended(responseEndOf(outcome));
    deps.metrics.countStreamEnd(mode, outcome);
    if (outcome === "failed") deps.logger.error("speech stream failed", { mode, error: String(error) });
  };
  const headers =
    prepared.streaming === "audio"
      ? { "Content-Type": CONTENT_TYPES[prepared.responseFormat], "Cache-Control": "no-store", ...ignoredFieldsHeader(prepared) }
      : { "Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no", ...ignoredFieldsHeader(prepared) };
  const produce =
    prepared.streaming === "audio"
      ? (signal: AbortSignal) => rawAudioBytes(deps.service, prepared, stream, signal, onAudio)
      : (signal: AbortSignal) => sseEvents(deps.service, prepared, stream, signal, deps.logger, onAudio);
  // Headers first: they are what can throw, and the body must not exist (listening on the request) if they do.
  const checkedHeaders = new Headers(headers);
  return new Response(pullStream(produce, requestSignal, onEnd, deps.stallTimeoutMs), { headers: checkedHeaders });
}

/**
 * The stream's audio in its response format, each chunk's bytes as soon as the format can give them
 * (audio/stream-encoder.ts): the joined bytes are one file, and a player can start on the first.
 */
async function* encodedAudio(service: SpeechService, prepared: PreparedSpeech, stream: EngineStream, signal: AbortSignal, tally: GenerationTally, mode: "audio_stream" | "sse", onAudio: (samples: Float32Array) => void): AsyncGenerator<Uint8Array, void, undefined> {
  const encoder: StreamEncoder = await createStreamEncoder(prepared.responseFormat, prepared.outputSampleRateHz);
  let ended = false;
  try {
    for await (const samples of service.generatePcm(prepared, stream, signal, tally, mode)) {
      onAudio(samples);
      const bytes = await encoder.push(samples);
      if (bytes.byteLength > 0) yield bytes;
    }
    if (signal.aborted) return;
    ended = true;
    const rest = await encoder.end();
    if (rest.byteLength > 0) yield rest;
  } finally {
    if (!ended) encoder.close();
  }
}

async function* rawAudioBytes(service: SpeechService, prepared: PreparedSpeech, stream: EngineStream, signal: AbortSignal, onAudio: (samples: Float32Array) => void): AsyncGenerator<Uint8Array, void, undefined> {
  // A streamed WAV's header carries sizes 0xFFFFFFFF, which players read as "until EOF".
  yield* encodedAudio(service, prepared, stream, signal, { frames: 0, samples: 0 }, "audio_stream", onAudio);
}

const encoder = new TextEncoder();

function sseEvent(event: string, payload: unknown): Uint8Array {
  return encoder.encode(`event: ${event}\ndata: ${JSON.stringify(payload)}\n\n`);
}

/**
 * SSE deltas are base64 bytes of the response format, as in OpenAI's speech.audio.delta events: pcm16, or
 * wav (the first delta opens with the streaming WAV header, as the seed does), mp3 frames, Ogg pages, FLAC
 * frames or ADTS frames; the joined deltas are a playable file.
 */
async function* sseEvents(service: SpeechService, prepared: PreparedSpeech, stream: EngineStream, signal: AbortSignal, logger: Logger, onAudio: (samples: Float32Array) => void): AsyncGenerator<Uint8Array, void, undefined> {
  const tally: GenerationTally = { frames: 0, samples: 0 };
  const responseFormat = prepared.responseFormat;
  let audioSent = false;
  try {
    for await (const bytes of encodedAudio(service, prepared, stream, signal, tally, "sse", onAudio)) {
      audioSent = true;
      yield sseEvent("speech.audio.delta", { type: "speech.audio.delta", audio: base64(bytes), response_format: responseFormat });
    }
    if (signal.aborted) return;
    yield sseEvent("speech.audio.done", {
      type: "speech.audio.done",
      usage: service.usage(prepared, tally.frames),
      // "stop": the speech ended by itself; "length": a frame cap (max_new_tokens or the model's) cut it.
      finish_reason: tally.finishReason,
      ...(prepared.ignoredFields.length > 0 ? { ignored_fields: prepared.ignoredFields } : {}),
    });
  } catch (error) {
    if (signal.aborted) return;
    logger.error("speech generation failed mid-stream", { error: String(error) });
    const message = error instanceof ApiError ? error.message : "speech generation failed";
    yield sseEvent("speech.audio.error", {
      type: "speech.audio.error",
      error: { message, type: "server_error", param: null, code: 500, ...(audioSent ? { partial_audio: true, action: "discard" } : {}) },
    });
  }
}

/** A stream's outcome as the access log names it: "aborted" is the client leaving (or stalling). */
export function responseEndOf(outcome: StreamOutcome): ResponseEnd {
  return outcome === "aborted" ? "client_closed" : outcome;
}

export function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}
