/** WS /v1/audio/speech/stream: frames a SpeechStreamSession onto the runtime's WebSocket. */
import type { Hono } from "hono";
import type { WSContext } from "hono/ws";
import type { Config } from "../config.ts";
import type { Logger } from "../log/logger.ts";
import type { StreamOutcome } from "../metrics.ts";
import type { RuntimeSupport } from "../runtime/serve.ts";
import type { SpeechService } from "../speech/service.ts";
import type { OpenAiSpeech } from "./openai-speech.ts";
import { outcomeOfClose, SpeechStreamSession } from "../speech/stream-session.ts";
import type { ServerLifecycle } from "./lifecycle.ts";
import { noteAudio, noteFirstAudio, streamEnded } from "./access-log.ts";

/**
 * How long a close handshake may take before the connection is dropped: a client that reads nothing never
 * takes the close frame queued behind its unread audio, so its socket would otherwise stay open for good.
 */
const CLOSE_HANDSHAKE_MS = 5000;

export interface StreamRouteDeps {
  service: SpeechService;
  openai: OpenAiSpeech;
  logger: Logger;
  config: Config;
  runtime: RuntimeSupport;
  lifecycle: ServerLifecycle;
}

export function registerStreamRoute(app: Hono, { service, openai, logger, config, runtime, lifecycle }: StreamRouteDeps): void {
  app.get(
    "/v1/audio/speech/stream",
    runtime.upgradeWebSocket((c) => {
      let session: SpeechStreamSession | undefined;
      let untrack = () => {};
      // The session's access log line is written when the socket closes, with the audio it carried.
      const ended = streamEnded(c);
      let serverCloseCode: number | undefined;
      let socketClosed = false;
      /** The sample rate of the sentence being sent when it is raw pcm16 (audio.start says), so frames count as seconds. */
      let pcmRateHz: number | undefined;
      const finish = (outcome: StreamOutcome) => {
        session?.closed();
        untrack();
        ended(outcome);
      };
      return {
        onOpen(_event, ws) {
          const socket = ws as WSContext<unknown>;
          session = new SpeechStreamSession(
            {
              sendJson: (message) => {
                if (message.type === "audio.start") pcmRateHz = message.format === "pcm" ? (message.sample_rate as number) : undefined;
                return socket.readyState === 1 && socket.send(JSON.stringify(message));
              },
              sendBinary: (bytes) => {
                if (pcmRateHz) noteAudio(c, bytes.byteLength / 2 / pcmRateHz);
                else noteFirstAudio(c);
                return socket.readyState === 1 && socket.send(bytes as Uint8Array<ArrayBuffer>);
              },
              bufferedBytes: () => runtime.bufferedBytes(socket),
              close: (code, reason) => {
                serverCloseCode ??= code;
                socket.close(code, reason);
                untrack();
                setTimeout(() => {
                  if (!socketClosed) runtime.terminate(socket);
                }, CLOSE_HANDSHAKE_MS).unref?.();
              },
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
          );
          untrack = lifecycle.trackSession(session);
        },
        onMessage(event) {
          session?.receive(event.data as string | ArrayBuffer);
        },
        onClose() {
          socketClosed = true;
          finish(outcomeOfClose(serverCloseCode));
        },
        onError() {
          finish("failed");
        },
      };
    }),
  );
}

import type { OpenAPIRegistry, RouteConfig } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import { streamClientMessageSchema } from "../api/speech.ts";
import { bearer, errorResponses } from "./route-docs.ts";

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
