/** POST /v1/audio/speech: one file, a raw audio stream, or SSE deltas. */
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import type { Context, Hono } from "hono";
import { speechRequestSchema } from "../api/speech.ts";
import { CONTENT_TYPES } from "../audio/encoders.ts";
import { wholeAudio } from "../speech/service.ts";
import type { OpenAiSpeech } from "./dialect.ts";
import type { Logger } from "../log/logger.ts";
import { clientAbort, streamedResponse } from "../http/audio-stream.ts";
import { readJsonBody, parseWith, type BodyLimits } from "../http/request-body.ts";
import { noteAudio } from "../http/access-log.ts";
import { audioStreamHeaders, fileHeaders } from "../http/speech-headers.ts";
import { speechAudioEvents, sseHeaders } from "./sse.ts";
import { bearer, binary, errorResponses, json } from "../http/route-docs.ts";

export interface SpeechRouteDeps {
  openai: OpenAiSpeech;
  logger: Logger;
  body: BodyLimits;
  stallTimeoutMs: number;
}

const AUDIO_MEDIA_TYPES = [...new Set(Object.values(CONTENT_TYPES))];

export function describeSpeechRoute(registry: OpenAPIRegistry): void {
  registry.registerPath({
    method: "post",
    path: "/v1/audio/speech",
    summary: "Synthesize speech: one file, a raw audio stream (stream_format audio) or SSE (stream_format sse)",
    security: bearer,
    request: { body: { required: true, ...json(speechRequestSchema) } },
    responses: {
      200: {
        description: "the audio; raw streams are pcm16 (wav adds a streaming header); SSE carries speech.audio.delta then speech.audio.done",
        content: { ...Object.fromEntries(AUDIO_MEDIA_TYPES.map((type) => [type, { schema: binary }])), "text/event-stream": { schema: { type: "string" } } },
      },
      ...errorResponses(400, 401, 404, 408, 413, 429, 500, 503),
    },
  });
}

export function registerSpeechRoute(app: Hono, deps: SpeechRouteDeps): void {
  app.post("/v1/audio/speech", async (c) => {
    const abort = clientAbort(c.req.raw.signal);
    // Every delivery of this route takes a running place now: a full server refuses before the body is read.
    return deps.openai.withPlace(abort.signal, () => speechResponse(c, deps, abort));
  });
}

/** The route's answer once its place is held: the request read, its audio as a file, a raw stream or SSE. */
async function speechResponse(c: Context, deps: SpeechRouteDeps, abort: AbortController): Promise<Response> {
  const request = parseWith(speechRequestSchema, await readJsonBody(c, deps.body));
  const speech = await deps.openai.start(request, "speech", abort.signal, (seconds) => noteAudio(c, seconds));
  const { prepared } = speech;

  if (prepared.delivery === "file") {
    const file = await wholeAudio(speech.audio);
    return new Response(file as Uint8Array<ArrayBuffer>, { headers: fileHeaders(prepared, file.byteLength, await speech.done) });
  }

  const sse = prepared.delivery === "sse";
  return streamedResponse(
    c,
    abort,
    () => {
      const headers = new Headers(sse ? sseHeaders(prepared.ignoredFields) : audioStreamHeaders(prepared));
      return { headers, bytes: sse ? speechAudioEvents(speech, abort.signal, deps.logger) : speech.audio };
    },
    deps.stallTimeoutMs,
    (error) => deps.logger.error("speech stream failed", { mode: prepared.delivery, error: String(error) }),
  );
}
