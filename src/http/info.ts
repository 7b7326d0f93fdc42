/** GET / (the playground page and its modules), /v1/models, /v1/audio/models, /metrics. */
import { readFile } from "node:fs/promises";
import type { Hono } from "hono";
import type { ServiceMetrics } from "../metrics.ts";
import { OUTPUT_SAMPLE_RATES_HZ, type SpeechService } from "../speech/service.ts";
import type { OpenAiSpeech } from "./openai-speech.ts";

export interface InfoRouteDeps {
  service: SpeechService;
  openai: OpenAiSpeech;
  metrics: ServiceMetrics;
}

const STARTED_AT_SECONDS = Math.floor(Date.now() / 1000);
const PUBLIC_DIR = new URL("../../public/", import.meta.url);
/**
 * The playground's modules, by name: a fixed list rather than a folder served as it is, so no request path
 * ever reaches the file system.
 */
export const PLAYGROUND_MODULES = ["playground.js", "playground-lib.js", "pcm-player.js", "browser-engine.js"] as const;
const isPlaygroundModule = (file: string): file is (typeof PLAYGROUND_MODULES)[number] => (PLAYGROUND_MODULES as readonly string[]).includes(file);

export function registerInfoRoutes(app: Hono, { service, openai, metrics }: InfoRouteDeps): void {
  app.get("/", async (c) => c.html(await readFile(new URL("index.html", PUBLIC_DIR), "utf-8")));
  app.get("/playground/:file", async (c) => {
    const file = c.req.param("file");
    if (!isPlaygroundModule(file)) return c.notFound();
    const source = await readFile(new URL(file, PUBLIC_DIR), "utf-8");
    return c.body(source, 200, { "Content-Type": "text/javascript; charset=utf-8", "Cache-Control": "no-cache" });
  });
  // Browsers ask for it on every page; an empty answer keeps their consoles and our 404 counts clean.
  app.get("/favicon.ico", (c) => c.body(null, 204));

  const modelEntries = () => {
    const capabilities = service.model().capabilities;
    return openai.servedModelIds().map((id) => ({
      id,
      object: "model",
      created: STARTED_AT_SECONDS,
      owned_by: "voxedge",
      root: capabilities.modelId,
      description: capabilities.description,
      engine: capabilities.kind,
      sample_rate: capabilities.nativeSampleRateHz,
      supported_sample_rates: OUTPUT_SAMPLE_RATES_HZ,
      voices: capabilities.voices,
      supports_cloning: capabilities.supportsCloning,
    }));
  };

  app.get("/v1/models", (c) => c.json({ object: "list", data: modelEntries() }));

  // Where Open WebUI's TTS settings look for models: it reads models[].id; data keeps the OpenAI list's shape.
  app.get("/v1/audio/models", (c) => {
    const data = modelEntries();
    return c.json({ models: data.map(({ id }) => ({ id, name: id })), data });
  });

  app.get("/metrics", async (c) => {
    return c.text(await metrics.render(), 200, { "Content-Type": metrics.registry.contentType });
  });
}
