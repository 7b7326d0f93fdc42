/** WS /v1/audio/speech/stream: frames a SpeechStreamSession onto the runtime's WebSocket. */
import type { Hono } from "hono";
import type { WSContext } from "hono/ws";
import type { Config } from "../config.ts";
import type { Logger } from "../log/logger.ts";
import type { ServiceMetrics } from "../metrics.ts";
import type { RuntimeSupport } from "../runtime/serve.ts";
import type { SpeechService } from "../speech/service.ts";
import { SpeechStreamSession } from "../speech/stream-session.ts";
import type { ServerLifecycle } from "./lifecycle.ts";

export interface StreamRouteDeps {
  service: SpeechService;
  metrics: ServiceMetrics;
  logger: Logger;
  config: Config;
  runtime: RuntimeSupport;
  lifecycle: ServerLifecycle;
}

export function registerStreamRoute(app: Hono, { service, metrics, logger, config, runtime, lifecycle }: StreamRouteDeps): void {
  app.get(
    "/v1/audio/speech/stream",
    runtime.upgradeWebSocket(() => {
      let session: SpeechStreamSession | undefined;
      let untrack = () => {};
      return {
        onOpen(_event, ws) {
          const socket = ws as WSContext<unknown>;
          session = new SpeechStreamSession(
            {
              sendJson: (message) => socket.readyState === 1 && socket.send(JSON.stringify(message)),
              sendBinary: (bytes) => socket.readyState === 1 && socket.send(bytes as Uint8Array<ArrayBuffer>),
              bufferedBytes: () => runtime.bufferedBytes(socket),
              close: (code, reason) => {
                socket.close(code, reason);
                untrack();
              },
            },
            {
              service,
              metrics,
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
          session?.closed();
          untrack();
        },
        onError() {
          session?.closed();
          untrack();
        },
      };
    }),
  );
}
