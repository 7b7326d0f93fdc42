/** Starts the real app on a loopback port around a given adapter. */
import { createApp } from "../../src/app.ts";
import { loadConfig, type Config } from "../../src/config.ts";
import type { SpeechModelAdapter } from "../../src/engine/adapter.ts";
import { ModelHost } from "../../src/engine/host.ts";
import { silentLogger } from "../../src/log/logger.ts";
import { serve } from "../../src/runtime/serve.ts";

export interface TestServer {
  url: string;
  app: ReturnType<typeof createApp>["app"];
  config: Config;
  stop(): Promise<void>;
}

export async function startTestServer(adapter: SpeechModelAdapter, flags: Record<string, string> = {}): Promise<TestServer> {
  const config = loadConfig({ host: "127.0.0.1", port: "0", ...flags }, {});
  const host = ModelHost.load(async () => adapter);
  await host.loaded;
  const { app } = createApp({ config, host, logger: silentLogger });
  const server = serve(app.fetch, config.host, config.port);
  return { url: server.url, app, config, stop: () => server.stop() };
}

export function testApp(adapter: SpeechModelAdapter, flags: Record<string, string> = {}) {
  const config = loadConfig({ host: "127.0.0.1", port: "0", ...flags }, {});
  const host = ModelHost.load(async () => adapter);
  return { ...createApp({ config, host, logger: silentLogger }), host, ready: host.loaded };
}
