/** WS /v1/audio/speech/stream: frames a SpeechStreamSession onto the runtime's WebSocket. */
import type { Hono } from "hono";
import type { Config } from "../config.ts";
import type { Logger } from "../log/logger.ts";
import type { RuntimeSupport } from "../runtime/serve.ts";
import type { SpeechService } from "../speech/service.ts";
import type { OpenAiSpeech } from "./dialect.ts";
import { SpeechStreamSession } from "./stream-session.ts";
import type { ServerLifecycle } from "../async/server-lifecycle.ts";
import { noteAudio, noteFirstAudio } from "../http/access-log.ts";
import { sessionSocketEvents } from "../http/session-socket.ts";

export interface StreamRouteDeps {
  service: SpeechService;
  openai: OpenAiSpeech;
  logger: Logger;
  config: Config;
  runtime: RuntimeSupport;
  lifecycle: ServerLifecycle;
}

export function registerStreamRoute(app: Hono, deps: StreamRouteDeps): void {
  const { service, openai, logger, config } = deps;
  app.get(
    "/v1/audio/speech/stream",
    deps.runtime.upgradeWebSocket((c) => {
      /** The sample rate of the sentence being sent when it is raw pcm16 (audio.start says), so frames count as seconds. */
      let pcmRateHz: number | undefined;
      return sessionSocketEvents(c, deps, (socket) =>
        new SpeechStreamSession(
          {
            sendJson: (message) => {
              if (message.type === "audio.start") pcmRateHz = message.format === "pcm" ? (message.sample_rate as number) : undefined;
              socket.send(JSON.stringify(message));
            },
            sendBinary: (bytes) => {
              if (pcmRateHz) noteAudio(c, bytes.byteLength / 2 / pcmRateHz);
              else noteFirstAudio(c);
              socket.send(bytes);
            },
            bufferedBytes: () => socket.bufferedBytes(),
            close: (code, reason) => socket.close(code, reason),
          },
          {
            service,
            sentences: openai,
            logger,
            configTimeoutMs: config.wsConfigTimeoutSeconds * 1000,
            idleTimeoutMs: config.wsIdleTimeoutSeconds * 1000,
            maxQueuedSegments: config.wsMaxQueuedSegments,
            maxQueuedChars: config.wsMaxQueuedChars,
            stallTimeoutMs: config.streamStallTimeoutSeconds * 1000,
          },
        ),
      );
    }),
  );
}

import type { OpenAPIRegistry, RouteConfig } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import { streamClientMessageSchema } from "../api/speech.ts";
import { bearer, errorResponses } from "../http/route-docs.ts";

/** OpenAPI has no WebSocket operation: the route is the GET that upgrades (101), its client messages an extension. */
export function describeStreamRoute(registry: OpenAPIRegistry): void {
  registry.registerPath({
    method: "get",
    path: "/v1/audio/speech/stream",
    summary: "WebSocket: session.config, input.text…, input.done; audio.start, binary pcm16 frames, audio.done, session.done",
    security: [...bearer, { apiKeyQuery: [] }],
    responses: { 101: { description: "switched to the WebSocket protocol" }, ...errorResponses(401, 503) },
    "x-websocket-client-messages": z.toJSONSchema(streamClientMessageSchema, { io: "input", unrepresentable: "any" }),
  } as RouteConfig);
}
