/** Builds the Hono app from its services. Tests call app.request() or serve it on a real port. */
import { Hono, type Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { timingSafeEqual } from "node:crypto";
import { cors } from "hono/cors";
import type { Config } from "./config.ts";
import type { ModelHost } from "./engine/host.ts";
import { ApiError } from "./api/errors.ts";
import { ServiceMetrics } from "./metrics.ts";
import { SPEECH_RESPONSE_HEADERS, SpeechService } from "./speech/service.ts";
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

/**
 * Open WebUI fills its TTS settings from these without sending its key (docs/integrations.md); a request
 * that sends a wrong key is still refused.
 */
const CREDENTIAL_FREE_READS = new Set(["/v1/audio/models", "/v1/audio/voices"]);

export function createApp({ config, host, logger, voices, runtime, refAudio }: AppServices) {
  const metrics = new ServiceMetrics();
  const resolver = refAudio ?? new RefAudioResolver({ allowedDomains: config.allowedMediaDomains, allowedLocalMediaPath: config.allowedLocalMediaPath });
  const service = new SpeechService(host, config, metrics, voices, resolver, logger);
  metrics.watchEngine(() => host.engine);
  void host.loaded.then(() => {
    if (host.engine) host.engine.observer = metrics.engineObserver;
  });
  const app = new Hono();

  app.onError((error, c) => {
    if (error instanceof ApiError) {
      const response = c.json(error.toBody(), error.status as ContentfulStatusCode);
      for (const [name, value] of Object.entries(error.headers)) response.headers.set(name, value);
      // RFC 6750 §3: a 401 names the scheme the client must use.
      if (error.status === 401) response.headers.set("WWW-Authenticate", 'Bearer realm="voxedge"');
      return response;
    }
    logger.error("unhandled error", { route: c.req.routePath, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    return c.json(new ApiError(500, "Internal server error").toBody(), 500);
  });
  app.notFound((c) => c.json(new ApiError(404, `No route for ${c.req.method} ${c.req.path}`).toBody(), 404));

  app.use("*", async (c, next) => {
    await next();
    metrics.httpRequests.inc({ route: c.req.routePath, method: c.req.method, status: String(c.res.status) });
  });
  if (config.cors) app.use("*", cors({ exposeHeaders: [...SPEECH_RESPONSE_HEADERS] }));
  const isAnonymous = (c: Context) => config.apiKey !== undefined && c.req.header("authorization") === undefined;
  if (config.apiKey !== undefined) {
    const expectedKey = new TextEncoder().encode(config.apiKey);
    app.use("/v1/*", async (c, next) => {
      if (c.req.method === "GET" && CREDENTIAL_FREE_READS.has(c.req.path) && isAnonymous(c)) return next();
      // The scheme name is case-insensitive (RFC 7235 §2.1): "bearer", "BEARER" and "Bearer" are one scheme.
      const credentials = /^bearer[ \t]+(\S+)[ \t]*$/i.exec(c.req.header("authorization") ?? "")?.[1];
      if (credentials === undefined || !sameBytes(new TextEncoder().encode(credentials), expectedKey)) {
        throw new ApiError(401, "Missing or wrong API key (send Authorization: Bearer <key>)");
      }
      await next();
    });
  }

  registerInfoRoutes(app, { service, host, metrics });
  const bodyTimeoutMs = config.bodyTimeoutSeconds * 1000;
  const stallTimeoutMs = config.streamStallTimeoutSeconds * 1000;
  registerVoiceRoutes(app, { service, voices, logger, bodyTimeoutMs, isAnonymous });
  registerStreamRoute(app, { service, metrics, logger, config, runtime });
  const body = { maxBytes: config.maxBodyBytes, timeoutMs: bodyTimeoutMs };
  registerSpeechRoute(app, { service, metrics, logger, body, stallTimeoutMs });
  registerBatchRoute(app, { service, logger, body, stallTimeoutMs, maxItems: config.batchMaxItems, maxAudioSeconds: config.batchMaxAudioSeconds });
  return { app, service, metrics, refAudio: resolver };
}

/** Compares keys in time independent of where they differ, so the key cannot be guessed byte by byte. */
function sameBytes(given: Uint8Array, expected: Uint8Array): boolean {
  return given.length === expected.length && timingSafeEqual(given, expected);
}
