/** GET / (the playground page and its modules), /v1/models, /v1/audio/models, /metrics. */
import { readFile } from "node:fs/promises";
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import type { Hono } from "hono";
import { z } from "zod";
import type { ServiceMetrics } from "../metrics.ts";
import { OUTPUT_SAMPLE_RATES_HZ, type SpeechService } from "../speech/service.ts";
import type { OpenAiSpeech } from "./dialect.ts";
import { errorResponses, json, open, openByDefault } from "../http/route-docs.ts";

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

/** One entry of OpenAI's model list, as /v1/models and /v1/audio/models answer it. */
const modelEntrySchema = z.object({
  id: z.string(),
  object: z.literal("model"),
  created: z.number().int(),
  owned_by: z.string(),
  root: z.string(),
  description: z.string(),
  engine: z.enum(["classic-fallback", "neural"]),
  sample_rate: z.number().int(),
  supported_sample_rates: z.array(z.number().int()),
  voices: z.array(z.string()),
  supports_cloning: z.boolean(),
});

export function describeInfoRoutes(registry: OpenAPIRegistry): void {
  registry.registerPath({
    method: "get",
    path: "/v1/models",
    summary: "The served model and its aliases",
    security: openByDefault,
    responses: { 200: { description: "OpenAI's model list", ...json(z.object({ object: z.literal("list"), data: z.array(modelEntrySchema) })) }, ...errorResponses(401, 503) },
  });
  registry.registerPath({
    method: "get",
    path: "/v1/audio/models",
    summary: "Models for Open WebUI (models[].id) and in OpenAI's shape (data)",
    security: openByDefault,
    responses: { 200: { description: "models", ...json(z.object({ models: z.array(z.object({ id: z.string(), name: z.string() })), data: z.array(modelEntrySchema) })) }, ...errorResponses(401, 503) },
  });
  registry.registerPath({ method: "get", path: "/metrics", summary: "Prometheus text format", security: openByDefault, responses: { 200: { description: "metrics", content: { "text/plain": { schema: { type: "string" } } } } } });
  registry.registerPath({ method: "get", path: "/", summary: "The playground page", security: open, responses: { 200: { description: "HTML", content: { "text/html": { schema: { type: "string" } } } } } });
  registry.registerPath({
    method: "get",
    path: "/playground/{file}",
    summary: "The playground's ES modules, by name; any other name is a 404",
    security: open,
    request: { params: z.object({ file: z.enum(PLAYGROUND_MODULES) }) },
    responses: { 200: { description: "JavaScript", content: { "text/javascript": { schema: { type: "string" } } } }, 404: { description: "not one of the playground's modules" } },
  });
  registry.registerPath({ method: "get", path: "/favicon.ico", summary: "No icon (204)", security: open, responses: { 204: { description: "empty" } } });
}

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
