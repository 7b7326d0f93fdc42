/** Builds the Hono app from its services. Tests call app.request() or serve it on a real port. */
import { PronunciationDictionaries } from "./elevenlabs/pronunciation.ts";
import { Hono } from "hono";
import { getPath } from "hono/utils/url";
import { cors } from "hono/cors";
import { ApiError, echoed } from "./api/errors.ts";
import { createServices, type ServiceInputs, type Services } from "./services.ts";
import { SPEECH_RESPONSE_HEADERS } from "./http/speech-headers.ts";
import { describeSpeechRoute, registerSpeechRoute } from "./openai/speech.ts";
import { describeBatchRoute, registerBatchRoute } from "./openai/batch.ts";
import { describeInfoRoutes, registerInfoRoutes } from "./openai/info.ts";
import { describeBrowserEngineRoutes, registerBrowserEngineRoutes } from "./browser/routes.ts";
import { describeModelFileRoutes, registerModelFileRoutes, type PulledFile } from "./http/model-files.ts";
import { registerCrossOriginIsolation } from "./http/isolation.ts";
import { readBundleManifest } from "./weights/download.ts";
import { resolveUrl } from "./weights/catalog.ts";
import { describeVoiceRoutes, registerVoiceRoutes } from "./openai/voices.ts";
import { describeStreamRoute, registerStreamRoute } from "./openai/stream-ws.ts";
import type { RuntimeSupport } from "./runtime/serve.ts";
import { ApiKeyCheck, registerApiKeyCheck } from "./http/auth.ts";
import { registerAccessLog } from "./http/access-log.ts";
import { registerDrainGate } from "./http/drain-gate.ts";
import { describeHealthRoutes, registerHealthRoutes } from "./http/health.ts";
import { describeOpenApiRoutes, registerOpenApiRoutes } from "./http/openapi.ts";
import { describeElevenLabsRoutes, elevenLabsApp } from "./elevenlabs/routes.ts";
import { errorResponse, type ErrorBody } from "./http/error-response.ts";
import { describeElevenLabsSocketRoutes, registerElevenLabsSocketRoutes } from "./elevenlabs/sockets.ts";
import { ELEVENLABS_PREFIX, elevenLabsErrorBody } from "./elevenlabs/schema.ts";

/** What the app is built from: the services (built once, shared with Wyoming), or what to build them from. */
export type AppServices = (ServiceInputs | { services: Services }) & { runtime: RuntimeSupport };

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

export function createApp(inputs: AppServices) {
  const services = "services" in inputs ? inputs.services : createServices(inputs);
  const { runtime } = inputs;
  const { config, host, logger, voices, metrics, lifecycle, service, catalog, openai } = services;
  const app = new Hono({ getPath: routedPath });

  // Each protocol's app renders its own errors (ElevenLabs' is mounted below with its onError). What is raised
  // before a protocol's app runs (a missing key, a drain, an unknown path) is rendered here in the shape of
  // the protocol mounted at that path.
  const errorBody = (path: string): ErrorBody => (path === ELEVENLABS_PREFIX || path.startsWith(`${ELEVENLABS_PREFIX}/`) ? elevenLabsErrorBody : (error) => error.toBody());
  app.onError((error, c) => errorResponse(c, error, errorBody(c.req.path), logger));
  // The path as the client sent it, not as it was routed.
  app.notFound((c) => c.json(errorBody(c.req.path)(new ApiError(404, `No route for ${c.req.method} ${echoed(getPath(c.req.raw), 256)}`)), 404));

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
  // Every module registered here describes its routes; /docs lists them in this order, the speech API first.
  registerOpenApiRoutes(app, [
    describeSpeechRoute,
    describeBatchRoute,
    describeStreamRoute,
    describeInfoRoutes,
    describeModelFileRoutes,
    describeVoiceRoutes,
    describeHealthRoutes,
    describeOpenApiRoutes,
    describeBrowserEngineRoutes,
    describeElevenLabsRoutes,
    describeElevenLabsSocketRoutes,
  ]);
  registerCrossOriginIsolation(app);
  // Before the playground's modules: /playground/engine.js is built, not one of their files.
  registerBrowserEngineRoutes(app);
  registerInfoRoutes(app, { service, openai, metrics });
  registerModelFileRoutes(app, { service, checkModel: (model) => openai.checkModel(model), pulledFiles });
  const bodyTimeoutMs = config.bodyTimeoutSeconds * 1000;
  const stallTimeoutMs = config.streamStallTimeoutSeconds * 1000;
  registerVoiceRoutes(app, { service, catalog, voices, logger, bodyTimeoutMs, isAnonymous });
  registerStreamRoute(app, { service, openai, logger, config, runtime, lifecycle });
  const body = { maxBytes: config.maxBodyBytes, timeoutMs: bodyTimeoutMs };
  registerSpeechRoute(app, { openai, logger, body, stallTimeoutMs });
  registerBatchRoute(app, { service, openai, logger, body, stallTimeoutMs, maxItems: config.batchMaxItems, maxAudioSeconds: config.batchMaxAudioSeconds });
  const dictionaries = new PronunciationDictionaries();
  app.route(ELEVENLABS_PREFIX, elevenLabsApp({ service, catalog, openai, voices, logger, body, stallTimeoutMs, dictionaries }));
  registerElevenLabsSocketRoutes(app, { service, openai, catalog, voices, logger, config, runtime, lifecycle, dictionaries, keyInFirstMessage: (c) => (awaitsSocketKey(c) ? (key) => apiKeys.holds(key) : undefined) });
  return { app, ...services };
}
