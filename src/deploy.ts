/**
 * The Deno Deploy-style entry: `deno serve -A src/deploy.ts` (the platform owns the listener, its port and
 * host come from `deno serve --port/--host`). Configuration comes from the environment only (VOXEDGE_*,
 * SPEAKER_SAMPLES_DIR, as in `voxedge --help`); the model starts loading when the module is imported, so
 * /health/ready is 503 until it is ready. WebSockets go through the same app (Deno.upgradeWebSocket).
 *
 * SIGTERM/SIGINT drain as `voxedge serve` does (readiness 503, streams finish within --shutdown-grace,
 * sessions close 1001, voice writes finish), then the process exits 0, which closes the platform's
 * listener; where the platform stops the isolate without a signal, nothing more can be done.
 */
import process from "node:process";
import { ConfigError, describeConfig, loadConfig } from "./config.ts";
import { createLogger } from "./log/logger.ts";
import { loadRuntime } from "./runtime/serve.ts";
import { onStopSignal, startServingProcess } from "./server.ts";

function configFromEnvironment() {
  try {
    return loadConfig({}, process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(2);
    }
    throw error;
  }
}

const config = configFromEnvironment();
const logger = createLogger(config.logLevel);
const runtime = await loadRuntime();
// `deno serve --host/--port` decide where it listens; VOXEDGE_HOST/VOXEDGE_PORT do not apply, so they are not shown.
const { host: _host, port: _port, ...shownConfig } = describeConfig(config);
logger.info("starting voxedge (deploy entry)", { runtime: runtime.name, config: shownConfig });
const serving = await startServingProcess(config, logger, runtime);
void onStopSignal(process, logger, (hurry) => serving.shutDown(async () => {}, hurry)).then(() => process.exit(0));

export default { fetch: (request: Request) => serving.fetch(request) };
