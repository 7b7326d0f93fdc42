/** Builds the Hono app from its services. Tests call app.request() or serve it on a real port. */
import { Hono } from "hono";
import { getPath } from "hono/utils/url";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { cors } from "hono/cors";
import type { Config } from "./config.ts";
import type { ModelHost } from "./engine/host.ts";
import { ApiError, echoed } from "./api/errors.ts";
import { ServiceMetrics } from "./metrics.ts";
import { SpeechService } from "./speech/service.ts";
import { SPEECH_RESPONSE_HEADERS } from "./http/speech-headers.ts";
import type { Logger } from "./log/logger.ts";
import { registerSpeechRoute } from "./http/speech.ts";
import { registerBatchRoute } from "./http/batch.ts";
import { registerInfoRoutes } from "./http/info.ts";
import { registerBrowserEngineRoutes } from "./browser/routes.ts";
import { registerModelFileRoutes, type PulledFile } from "./http/model-files.ts";
import { registerCrossOriginIsolation } from "./http/isolation.ts";
import { readBundleManifest } from "./weights/download.ts";
import { resolveUrl } from "./weights/catalog.ts";
import { registerVoiceRoutes } from "./http/voices.ts";
import type { VoiceStore } from "./voices/store.ts";
import { RefAudioResolver } from "./voices/ref-audio.ts";
import { registerStreamRoute } from "./http/stream-ws.ts";
import type { RuntimeSupport } from "./runtime/serve.ts";
import { ApiKeyCheck, registerApiKeyCheck } from "./http/auth.ts";
import { registerAccessLog } from "./http/access-log.ts";
import { registerDrainGate, ServerLifecycle } from "./http/lifecycle.ts";
import { registerHealthRoutes } from "./http/health.ts";
import { registerOpenApiRoutes } from "./http/openapi.ts";
import { registerElevenLabsRoutes } from "./http/elevenlabs.ts";
import { registerElevenLabsSocketRoutes } from "./http/elevenlabs-ws.ts";
import { ELEVENLABS_PREFIX, elevenLabsErrorBody } from "./api/elevenlabs.ts";

export interface AppServices {
  config: Config;
  host: ModelHost;
  logger: Logger;
  voices: VoiceStore;
  runtime: RuntimeSupport;
  /** Defaults to a resolver built from the config; tests inject one with a fake resolver/connector. */
  refAudio?: RefAudioResolver;
}

/** What a pulled bundle's complete.json says of its files: their verified sha256 and where the hub serves them. */
async function pulledFiles(directory: string): Promise<Map<string, PulledFile>> {
  const manifest = await readBundleManifest(directory);
  if (!manifest) return new Map();
  const { hubUrl, repo, revision } = manifest;
  return new Map(manifest.files.map((file) => [file.name, { sizeBytes: file.sizeBytes, sha256: file.sha256, hubUrl: resolveUrl(hubUrl, repo, revision, file.repoPath) }]));
}

/**
 * ElevenLabs' routes answer with and without their `/v1`: some clients append `/v1/text-to-speech/…` to the
 * base URL they are given (ElevenLabs' SDKs), others `/text-to-speech/…` (LiveKit's plugin, whose own default
 * base ends in `/v1`), so `…/elevenlabs` must serve both. A path under the prefix whose first segment is not a
 * version is routed as its `/v1` path: both spellings are one route (one handler, one metrics label).
 */
function routedPath(request: Request): string {
  const path = getPath(request);
  if (!path.startsWith(`${ELEVENLABS_PREFIX}/`) || /^\/v\d+(?:\/|$)/.test(path.slice(ELEVENLABS_PREFIX.length))) return path;
  return `${ELEVENLABS_PREFIX}/v1${path.slice(ELEVENLABS_PREFIX.length)}`;
}

export function createApp({ config, host, logger, voices, runtime, refAudio }: AppServices) {
  // Draining for a graceful shutdown (src/server.ts starts it).
  const lifecycle = new ServerLifecycle();
  const metrics = new ServiceMetrics();
  const resolver = refAudio ?? new RefAudioResolver({ allowedDomains: config.allowedMediaDomains, allowedLocalMediaPath: config.allowedLocalMediaPath });
  const service = new SpeechService(host, config, metrics, voices, resolver, logger);
  metrics.watchEngine(() => host.engine);
  void host.loaded.then(() => {
    if (!host.engine) return;
    host.engine.observer = metrics.engineObserver;
    host.engine.onFailure = (error) => logger.error("speech engine failed; readiness is now 503", { error: error.message });
  });
  const app = new Hono({ getPath: routedPath });

  // ElevenLabs' routes answer errors in its shape, {"detail": {"status", "message"}}, whatever raised them.
  const errorBody = (error: ApiError, path: string) => (path === ELEVENLABS_PREFIX || path.startsWith(`${ELEVENLABS_PREFIX}/`) ? elevenLabsErrorBody(error) : error.toBody());
  app.onError((error, c) => {
    if (error instanceof ApiError) {
      const response = c.json(errorBody(error, c.req.path), error.status as ContentfulStatusCode);
      for (const [name, value] of Object.entries(error.headers)) response.headers.set(name, value);
      // RFC 6750 §3: a 401 names the scheme the client must use.
      if (error.status === 401) response.headers.set("WWW-Authenticate", 'Bearer realm="voxedge"');
      return response;
    }
    logger.error("unhandled error", { route: c.req.routePath, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    return c.json(errorBody(new ApiError(500, "Internal server error"), c.req.path), 500);
  });
  // The path as the client sent it, not as it was routed.
  app.notFound((c) => c.json(errorBody(new ApiError(404, `No route for ${c.req.method} ${echoed(getPath(c.req.raw), 256)}`), c.req.path), 404));

  // Outermost, so refusals (401, 503) are logged and counted as well.
  registerAccessLog(app, logger, lifecycle);
  app.use("*", async (c, next) => {
    await next();
    metrics.httpRequests.inc({ route: c.req.routePath, method: c.req.method, status: String(c.res.status) });
  });
  if (config.cors) app.use("*", cors({ exposeHeaders: [...SPEECH_RESPONSE_HEADERS, "X-Request-Id"] }));
  const apiKeys = new ApiKeyCheck(config);
  const { isAnonymous, awaitsSocketKey } = registerApiKeyCheck(app, apiKeys);
  registerDrainGate(app, lifecycle);

  registerHealthRoutes(app, { host, lifecycle, saturatedAfterMs: config.streamStallTimeoutSeconds * 1000 });
  registerOpenApiRoutes(app);
  registerCrossOriginIsolation(app);
  // Before the playground's modules: /playground/engine.js is built, not one of their files.
  registerBrowserEngineRoutes(app);
  registerInfoRoutes(app, { service, metrics });
  registerModelFileRoutes(app, { service, pulledFiles });
  const bodyTimeoutMs = config.bodyTimeoutSeconds * 1000;
  const stallTimeoutMs = config.streamStallTimeoutSeconds * 1000;
  registerVoiceRoutes(app, { service, voices, logger, bodyTimeoutMs, isAnonymous });
  registerStreamRoute(app, { service, logger, config, runtime, lifecycle });
  const body = { maxBytes: config.maxBodyBytes, timeoutMs: bodyTimeoutMs };
  registerSpeechRoute(app, { service, logger, body, stallTimeoutMs });
  registerBatchRoute(app, { service, logger, body, stallTimeoutMs, maxItems: config.batchMaxItems, maxAudioSeconds: config.batchMaxAudioSeconds });
  registerElevenLabsRoutes(app, { service, voices, logger, body, stallTimeoutMs });
  registerElevenLabsSocketRoutes(app, { service, voices, logger, config, runtime, lifecycle, keyInFirstMessage: (c) => (awaitsSocketKey(c) ? (key) => apiKeys.holds(key) : undefined) });
  return { app, service, metrics, refAudio: resolver, lifecycle };
}
