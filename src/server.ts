/**
 * The serving process, whichever entry starts it (`voxedge serve` in main.ts, `deno serve src/deploy.ts`):
 * the voice store, the model (loading in the background: readiness is 503 until it is ready), the app, the
 * Wyoming listener when --wyoming-port asks for it, and the graceful shutdown both entries run on SIGTERM/SIGINT.
 */
import process from "node:process";
import { wyomingExposure, type Config } from "./config.ts";
import { createApp } from "./app.ts";
import { createServices } from "./services.ts";
import { engineOptionsOf, ModelHost } from "./engine/host.ts";
import { loadModel } from "./models/registry.ts";
import type { Logger } from "./log/logger.ts";
import type { RuntimeSupport } from "./runtime/serve.ts";
import { openVoiceStoreAt } from "./voices/open-store.ts";
import type { VoiceStore } from "./voices/store.ts";
import { startWyomingServer } from "./wyoming/server.ts";
import { announceWyoming } from "./wyoming/zeroconf.ts";
import { configureEncoderThreads } from "./audio/encoder-pool.ts";
import packageJson from "../package.json" with { type: "json" };

/** After the grace, how long the streams the engine then ends get to send their last bytes. */
const FINAL_FLUSH_MS = 5000;

export interface ServingProcess {
  fetch: (request: Request, server?: unknown) => Response | Promise<Response>;
  /**
   * Drains (readiness 503, new work refused, sessions finish what they had flushed and close 1001), waits up
   * to --shutdown-grace for active work, ends what is left, lets voice writes finish, then calls
   * `stopListening` and closes the model. `hurry` resolving (a second signal) ends the grace early.
   */
  shutDown(stopListening: () => Promise<void>, hurry?: Promise<void>): Promise<void>;
}

/** The uploaded-voice store the config names (`serve` and `say` alike): a bucket for --voice-store s3://…, else the speaker folder. */
export function openVoiceStore(config: Config, logger: Logger): Promise<VoiceStore> {
  return openVoiceStoreAt(config.voiceStore ?? config.speakerDir, { maxVoices: config.maxUploadedVoices, logger, env: process.env });
}

export async function startServingProcess(config: Config, logger: Logger, runtime: RuntimeSupport): Promise<ServingProcess> {
  configureEncoderThreads(config.encoderThreads);
  const voices = await openVoiceStore(config, logger);
  logger.info("voice store ready", { uploaded_voices: voices.list().length });
  const host = ModelHost.load(() => loadModel(config, logger), engineOptionsOf(config));
  // Built once: the HTTP app and the Wyoming listener speak through the same core, catalog and engine.
  const services = createServices({ config, host, logger, voices });
  const { app } = createApp({ services, runtime });
  const { lifecycle, service, catalog } = services;
  const exposure = wyomingExposure(config);
  const wyoming =
    config.wyomingPort === undefined
      ? undefined
      : await startWyomingServer({
          host: exposure.host,
          port: config.wyomingPort,
          service,
          catalog,
          voices,
          logger,
          lifecycle,
          version: packageJson.version,
          stallTimeoutMs: config.streamStallTimeoutSeconds * 1000,
          uploadedVoices: exposure.uploadedVoices,
          maxRunChars: config.wsMaxQueuedChars,
        });
  if (wyoming) {
    logger.info("wyoming listening", { host: exposure.host, port: wyoming.port, uploaded_voices: exposure.uploadedVoices });
    if (exposure.unauthenticatedBeyondLoopback) {
      logger.warn("wyoming listens beyond loopback while API keys are set: the Wyoming protocol has no authentication, so anyone who reaches this port can use it without a key", {
        host: exposure.host,
        port: wyoming.port,
        uploaded_voices: exposure.uploadedVoices,
      });
    }
  }
  // Probing takes a second or so: the server does not wait for it.
  const announcement = wyoming && config.wyomingZeroconf ? announceWyoming(wyoming.port, exposure.host, logger) : undefined;
  void host.loaded.then(() => {
    const capabilities = host.model?.capabilities;
    if (!capabilities) {
      logger.error("model failed to load", { error: host.failure?.message });
      return;
    }
    const label = capabilities.kind === "classic-fallback" ? "offline classic fallback engine (no neural weights)" : "neural model";
    logger.info(`model ready: ${label}`, { model: capabilities.modelId, description: capabilities.description, voices: capabilities.voices.length, ...host.engine?.limits });
  });

  let shuttingDown: Promise<void> | undefined;
  const shutDown = async (stopListening: () => Promise<void>, hurry: Promise<void> = new Promise(() => {})) => {
    const graceMs = config.shutdownGraceSeconds * 1000;
    logger.info("draining: readiness is 503, new work is refused", { grace_seconds: config.shutdownGraceSeconds, ...lifecycle.active });
    lifecycle.startDraining();
    const finished = await Promise.race([lifecycle.idle(graceMs), hurry.then(() => false)]);
    if (!finished) {
      logger.warn("shutdown grace is over: ending the streams still running", lifecycle.active);
      lifecycle.closeSessions();
    }
    // Ends every request still in the engine; their streams end (raw streams short, SSE with finish_reason "abort").
    await host.close();
    if (!(await lifecycle.idle(FINAL_FLUSH_MS))) logger.warn("responses still open after the engine stopped; closing their connections", lifecycle.active);
    // A voice upload accepted before draining has finished writing by now (it is an active request), but a
    // write the store queued is waited for all the same: no temp file is left behind.
    await voices.settled();
    await Promise.all([stopListening(), wyoming?.close(), announcement?.then((announced) => announced.stop())]);
    logger.info("stopped");
  };
  return {
    fetch: app.fetch,
    shutDown: (stopListening, hurry) => (shuttingDown ??= shutDown(stopListening, hurry)),
  };
}

/**
 * A stop signal this soon after the first is the same one delivered again: Ctrl-C in a terminal, systemd and
 * `docker stop` signal every process of the group, and a `bun run` or `npm start` parent forwards the
 * signal to the server as well. A person who means "now" presses again later than this.
 */
export const REPEATED_SIGNAL_MS = 1000;

/**
 * Runs `shutDown` on the first SIGTERM or SIGINT; a second signal, REPEATED_SIGNAL_MS or more later, ends
 * the grace early. Resolves once the shutdown is complete.
 */
export function onStopSignal(process: { on(signal: "SIGTERM" | "SIGINT", listener: () => void): unknown }, logger: Logger, shutDown: (hurry: Promise<void>) => Promise<void>): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let hurry = () => {};
    const hurried = new Promise<void>((resolve) => {
      hurry = resolve;
    });
    let firstSignalAt: number | undefined;
    for (const signal of ["SIGTERM", "SIGINT"] as const) {
      process.on(signal, () => {
        if (firstSignalAt !== undefined) {
          // The same stop delivered twice (to the process group, and again by a `bun run`/`npm start`
          // parent that forwards it) is not someone asking again.
          if (performance.now() - firstSignalAt < REPEATED_SIGNAL_MS) return;
          logger.warn("second stop signal: ending the grace now", { signal });
          return hurry();
        }
        firstSignalAt = performance.now();
        logger.info("shutting down", { signal });
        shutDown(hurried).then(resolve, reject);
      });
    }
  });
}
