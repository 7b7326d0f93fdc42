/** Builds the real app around a given adapter, with a voice store in a fresh temp folder. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createApp } from "../../src/app.ts";
import { loadConfig, type Config } from "../../src/config.ts";
import type { SpeechModel } from "../../src/models/contract.ts";
import { engineOptionsOf, ModelHost } from "../../src/engine/host.ts";
import { silentLogger, type Logger } from "../../src/log/logger.ts";
import { loadRuntime } from "../../src/runtime/serve.ts";
import { RefAudioResolver, type RefAudioResolverOptions } from "../../src/voices/ref-audio.ts";
import { FolderVoiceStore } from "../../src/voices/folder-store.ts";

/** Every speaker folder made here lives under one root, removed when the test process exits. */
const SCRATCH_ROOT = mkdtempSync(join(tmpdir(), "voxedge-test-"));
process.once("exit", () => rmSync(SCRATCH_ROOT, { recursive: true, force: true }));

export interface TestAppOptions {
  flags?: Record<string, string>;
  /** Overrides of the ref_audio resolver (injected resolver/connector). */
  refAudio?: Partial<RefAudioResolverOptions>;
  /** Where the app logs (default: nowhere), so a test can check what a request logged. */
  logger?: Logger;
}

export async function testApp(adapter: SpeechModel, options: TestAppOptions = {}) {
  const speakerDir = options.flags?.["speaker-dir"] ?? mkdtempSync(join(SCRATCH_ROOT, "voices-"));
  const config: Config = loadConfig({ host: "127.0.0.1", port: "0", "speaker-dir": speakerDir, ...options.flags }, {});
  const host = ModelHost.load(async () => adapter, engineOptionsOf(config));
  await host.loaded;
  const voices = await FolderVoiceStore.open({ dir: config.speakerDir, maxVoices: config.maxUploadedVoices, logger: silentLogger });
  const refAudio = new RefAudioResolver({ allowedDomains: config.allowedMediaDomains, allowedLocalMediaPath: config.allowedLocalMediaPath, ...options.refAudio });
  const runtime = await loadRuntime();
  const logger = options.logger ?? silentLogger;
  return { ...createApp({ config, host, logger, voices, refAudio, runtime }), host, voices, config, runtime };
}

export interface TestServer extends Awaited<ReturnType<typeof testApp>> {
  url: string;
  stop(): Promise<void>;
}

export async function startTestServer(adapter: SpeechModel, options: TestAppOptions = {}): Promise<TestServer> {
  const built = await testApp(adapter, options);
  const server = built.runtime.serve(built.app.fetch, built.config.host, built.config.port, { keepAliveTimeoutSeconds: built.config.keepAliveTimeoutSeconds, writeStallTimeoutSeconds: built.config.streamStallTimeoutSeconds });
  return { ...built, url: server.url, stop: () => server.stop() };
}
