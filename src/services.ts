/**
 * The composition root's one build of the server's services: the metrics, the lifecycle, the voice catalog,
 * the speech core and each dialect over it. The HTTP app, the Wyoming server and `say` are all handed these,
 * so every front end speaks through the same core, catalog and engine.
 */
import type { Config } from "./config.ts";
import type { ModelHost } from "./engine/host.ts";
import type { Logger } from "./log/logger.ts";
import { ServiceMetrics } from "./metrics.ts";
import { SpeechService } from "./speech/service.ts";
import { OpenAiSpeech } from "./openai/dialect.ts";
import { ServerLifecycle } from "./async/server-lifecycle.ts";
import { RefAudioResolver } from "./voices/ref-audio.ts";
import { VoiceCatalog } from "./voices/catalog.ts";
import type { VoiceStore } from "./voices/store.ts";

export interface ServiceInputs {
  config: Config;
  host: ModelHost;
  logger: Logger;
  voices: VoiceStore;
  /** Defaults to a resolver built from the config; tests inject one with a fake resolver/connector. */
  refAudio?: RefAudioResolver;
}

export interface Services {
  config: Config;
  host: ModelHost;
  logger: Logger;
  voices: VoiceStore;
  refAudio: RefAudioResolver;
  metrics: ServiceMetrics;
  /** Draining for a graceful shutdown (server.ts starts it). */
  lifecycle: ServerLifecycle;
  catalog: VoiceCatalog;
  service: SpeechService;
  openai: OpenAiSpeech;
}

export function createServices({ config, host, logger, voices, refAudio }: ServiceInputs): Services {
  const metrics = new ServiceMetrics();
  const resolver = refAudio ?? new RefAudioResolver({ allowedDomains: config.allowedMediaDomains, allowedLocalMediaPath: config.allowedLocalMediaPath });
  const service = new SpeechService(host, config, metrics, voices, logger);
  const catalog = new VoiceCatalog(() => service.model().capabilities, voices, config.voiceAliases, resolver);
  const openai = new OpenAiSpeech({ service, catalog, modelAliases: config.modelAliases });
  metrics.watchEngine(() => host.engine);
  void host.loaded.then(() => {
    if (!host.engine) return;
    host.engine.observer = metrics.engineObserver;
    host.engine.onFailure = (error) => logger.error("speech engine failed; readiness is now 503", { error: error.message });
  });
  return { config, host, logger, voices, refAudio: resolver, metrics, lifecycle: new ServerLifecycle(), catalog, service, openai };
}
