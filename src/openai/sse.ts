/**
 * Server-sent events: the one encoding of an event, the headers of an event stream, and the speech route's
 * events (OpenAI's speech.audio.delta and speech.audio.done, and speech.audio.error).
 */
import type { Logger } from "../log/logger.ts";
import type { StartedSpeech } from "../speech/service.ts";
import { base64 } from "../http/base64.ts";
import { ignoredFieldsHeader } from "../http/speech-headers.ts";
import { asApiError } from "../speech/errors.ts";

const encoder = new TextEncoder();

/** One event: JSON.stringify writes no newline, so one `data:` line holds the payload. */
export function sseEvent(event: string, payload: unknown): Uint8Array {
  return encoder.encode(`event: ${event}\ndata: ${JSON.stringify(payload)}\n\n`);
}

/** An event stream's headers: X-Accel-Buffering keeps nginx from holding events back until its buffer fills. */
export function sseHeaders(ignoredFields: readonly string[]): Record<string, string> {
  return { "Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no", ...ignoredFieldsHeader(ignoredFields) };
}

/**
 * SSE deltas are base64 bytes of the response format, as in OpenAI's speech.audio.delta events: pcm16, or
 * wav (the first delta opens with the streaming WAV header, as the seed does), mp3 frames, Ogg pages, FLAC
 * frames or ADTS frames; the joined deltas are a playable file. A failure is an event too, since the status
 * line has long left.
 */
export async function* speechAudioEvents(speech: StartedSpeech, signal: AbortSignal, logger: Logger): AsyncGenerator<Uint8Array, void, undefined> {
  const { responseFormat, ignoredFields } = speech.prepared;
  let audioSent = false;
  try {
    for await (const bytes of speech.audio) {
      audioSent = true;
      yield sseEvent("speech.audio.delta", { type: "speech.audio.delta", audio: base64(bytes), response_format: responseFormat });
    }
    if (signal.aborted) return;
    const end = await speech.done;
    yield sseEvent("speech.audio.done", {
      type: "speech.audio.done",
      usage: end.usage,
      // "stop": the speech ended by itself; "length": a frame cap (max_new_tokens or the model's) cut it.
      finish_reason: end.finishReason,
      ...(ignoredFields.length > 0 ? { ignored_fields: ignoredFields } : {}),
    });
  } catch (error) {
    if (signal.aborted) return;
    logger.error("speech generation failed mid-stream", { error: String(error) });
    const message = asApiError(error)?.message ?? "speech generation failed";
    yield sseEvent("speech.audio.error", {
      type: "speech.audio.error",
      error: { message, type: "server_error", param: null, code: 500, ...(audioSent ? { partial_audio: true, action: "discard" } : {}) },
    });
  }
}
