/** Builds the Hono app from its services. Tests call app.request() or serve it on a real port. */
import { Hono } from "hono";
import { cors } from "hono/cors";
import type { Config } from "./config.ts";
import type { ModelHost } from "./engine/host.ts";
import { ApiError } from "./api/errors.ts";
import { ServiceMetrics } from "./metrics.ts";
import { SpeechService } from "./speech/service.ts";
import type { Logger } from "./log/logger.ts";
import { registerSpeechRoute } from "./http/speech.ts";
import { registerBatchRoute } from "./http/batch.ts";
import { registerInfoRoutes } from "./http/info.ts";
import { registerVoiceRoutes } from "./http/voices.ts";
import type { VoiceStore } from "./voices/store.ts";
import { RefAudioResolver } from "./voices/ref-audio.ts";
import { registerStreamRoute } from "./http/stream-ws.ts";
import type { RuntimeSupport } from "./runtime/serve.ts";

export interface AppServices {
  config: Config;
  host: ModelHost;
  logger: Logger;
  voices: VoiceStore;
  runtime: RuntimeSupport;
  /** Defaults to a resolver built from the config; tests inject one with a fake resolver/connector. */
  refAudio?: RefAudioResolver;
}

export function createApp({ config, host, logger, voices, runtime, refAudio }: AppServices) {
  const metrics = new ServiceMetrics();
  const resolver = refAudio ?? new RefAudioResolver({ allowedDomains: config.allowedMediaDomains, allowedLocalMediaPath: config.allowedLocalMediaPath });
  const service = new SpeechService(host, config, metrics, voices, resolver);
  const app = new Hono();

  app.onError((error, c) => {
    if (error instanceof ApiError) return c.json(error.toBody(), error.status);
    logger.error("unhandled error", { route: c.req.routePath, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    return c.json(new ApiError(500, "Internal server error").toBody(), 500);
  });
  app.notFound((c) => c.json(new ApiError(404, `No route for ${c.req.method} ${c.req.path}`).toBody(), 404));

  app.use("*", async (c, next) => {
    await next();
    metrics.httpRequests.inc({ route: c.req.routePath, method: c.req.method, status: String(c.res.status) });
  });
  if (config.cors) app.use("*", cors({ exposeHeaders: ["X-Input-Tokens", "X-Output-Tokens", "X-Total-Tokens", "X-Input-Text-Tokens", "X-Input-Audio-Tokens"] }));
  if (config.apiKey !== undefined) {
    const expected = `Bearer ${config.apiKey}`;
    app.use("/v1/*", async (c, next) => {
      if (c.req.header("authorization") !== expected) throw new ApiError(401, "Missing or wrong API key (send Authorization: Bearer <key>)");
      await next();
    });
  }

  registerInfoRoutes(app, { service, host, metrics });
  registerVoiceRoutes(app, { service, voices, logger });
  registerStreamRoute(app, { service, metrics, logger, config, runtime });
  registerSpeechRoute(app, { service, metrics, logger, maxBodyBytes: config.maxBodyBytes });
  registerBatchRoute(app, { service, logger, maxBodyBytes: config.maxBodyBytes, maxItems: config.batchMaxItems, maxAudioSeconds: config.batchMaxAudioSeconds });
  return { app, service, metrics, refAudio: resolver };
}
