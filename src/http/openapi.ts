/**
 * GET /openapi.json (OpenAPI 3.1) and GET /docs (Swagger UI over it). Each route module describes its own
 * routes beside their handlers (a `describe…Routes(registry)` function, with the parts in route-docs.ts);
 * this module assembles the document from those descriptions and serves it. The request bodies are
 * generated from the same zod schemas the routes parse with (src/api/), through
 * @asteasolutions/zod-to-openapi, so the document cannot drift from what the server accepts;
 * test/http/openapi.test.ts checks that every route the app registers is in it, and that the `openai`
 * client's requests validate against it.
 *
 * Nullable optional fields come out as `["string", "null"]`, as the server treats null as "not set". A
 * WebSocket route is described as the GET that upgrades (101), its client messages as an extension
 * (`x-websocket-client-messages`), since OpenAPI has no WebSocket operation.
 */
import { OpenAPIRegistry, OpenApiGeneratorV31 } from "@asteasolutions/zod-to-openapi";
import { swaggerUI } from "@hono/swagger-ui";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import type { Hono } from "hono";
import { z } from "zod";
import { open, type DescribeRoutes } from "./route-docs.ts";

export const OPENAPI_PATH = "/openapi.json";
export const DOCS_PATH = "/docs";

/**
 * Swagger UI's own script and style, served from the installed swagger-ui-dist rather than a CDN: a
 * self-hosted server is often on a network that cannot reach one. Only these two files, by name.
 */
const DOCS_ASSETS: Readonly<Record<string, string>> = {
  "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
  "swagger-ui.css": "text/css; charset=utf-8",
};
const DOCS_ASSETS_BASE = `${DOCS_PATH}/assets`;
const resolveInstalled = createRequire(import.meta.url).resolve;

type OpenApiDocument = ReturnType<OpenApiGeneratorV31["generateDocument"]>;

/** The document of the routes the given functions describe, in their order. */
export function openApiDocument(describeRoutes: readonly DescribeRoutes[]): OpenApiDocument {
  const registry = new OpenAPIRegistry();
  registry.registerComponent("securitySchemes", "bearerAuth", { type: "http", scheme: "bearer", description: "any key given with --api-key / --api-key-file" });
  registry.registerComponent("securitySchemes", "apiKeyHeader", { type: "apiKey", in: "header", name: "X-API-Key" });
  registry.registerComponent("securitySchemes", "xiApiKey", { type: "apiKey", in: "header", name: "xi-api-key", description: "ElevenLabs' header; accepted on every route that takes a key" });
  registry.registerComponent("securitySchemes", "xiApiKeyQuery", { type: "apiKey", in: "query", name: "xi_api_key", description: "ElevenLabs' WebSocket upgrades only" });
  registry.registerComponent("securitySchemes", "apiKeyQuery", { type: "apiKey", in: "query", name: "api_key", description: "WebSocket upgrade only (browsers cannot set headers on a WebSocket)" });
  for (const describe of describeRoutes) describe(registry);

  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: "3.1.0",
    info: { title: "voxedge", version: "0.1.0", description: "OpenAI's speech API and vLLM-Omni's extensions. Errors are `{\"error\": {\"message\", \"type\", \"param\", \"code\"}}`. ElevenLabs' API is under `/elevenlabs`, its errors `{\"detail\": {\"status\", \"message\"}}`; each `/elevenlabs/v1/…` path is also answered without its `/v1`, for clients whose base URL stands for it." },
    servers: [{ url: "/" }],
  });
}

export function describeOpenApiRoutes(registry: OpenAPIRegistry): void {
  registry.registerPath({ method: "get", path: OPENAPI_PATH, summary: "This document", security: open, responses: { 200: { description: "OpenAPI 3.1", content: { "application/json": { schema: { type: "object" } } } } } });
  registry.registerPath({
    method: "get",
    path: `${DOCS_ASSETS_BASE}/swagger-ui-dist/{file}`,
    summary: "Swagger UI's script and style for the docs page, from the installed swagger-ui-dist",
    security: open,
    request: { params: z.object({ file: z.enum(Object.keys(DOCS_ASSETS) as [string, ...string[]]) }) },
    responses: { 200: { description: "JavaScript or CSS" }, 404: { description: "not one of the docs page's assets" } },
  });
  registry.registerPath({ method: "get", path: DOCS_PATH, summary: "Interactive documentation of this document", security: open, responses: { 200: { description: "HTML", content: { "text/html": { schema: { type: "string" } } } } } });
}

/** Serves the document of the routes `describeRoutes` describe: every registered module's, describeOpenApiRoutes included. */
export function registerOpenApiRoutes(app: Hono, describeRoutes: readonly DescribeRoutes[]): void {
  // Built once, on first use: the schemas do not change while the server runs.
  let document: OpenApiDocument | undefined;
  app.get(OPENAPI_PATH, (c) => c.json((document ??= openApiDocument(describeRoutes))));
  // The page asks for `${baseUrl}/swagger-ui-dist/<file>`; both it and the document's URL are relative to
  // the page, so the docs work behind a reverse proxy's path prefix too.
  app.get(DOCS_PATH, swaggerUI({ url: OPENAPI_PATH.slice(1), title: "voxedge API", baseUrl: DOCS_ASSETS_BASE.slice(1) }));
  app.get(`${DOCS_ASSETS_BASE}/swagger-ui-dist/:file`, async (c) => {
    const file = c.req.param("file");
    const contentType = DOCS_ASSETS[file];
    if (contentType === undefined) return c.notFound();
    const source = await readFile(resolveInstalled(`swagger-ui-dist/${file}`));
    return c.body(source, 200, { "Content-Type": contentType, "Cache-Control": "public, max-age=86400" });
  });
}
