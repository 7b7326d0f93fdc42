/**
 * Liveness and readiness, as orchestrators probe them:
 * - GET /health (liveness): 200 while the process serves, draining included; 503 while the model is still
 *   loading, or when it failed to load or its engine failed at run time, the states a restart may fix;
 * - GET /health/ready (readiness): 200 only when the model is loaded, its engine can run, and the server is
 *   not draining, and its engine has not been full without any request turning over for longer than
 *   `saturatedAfterMs` (a request's deadline: the stream stall timeout); else 503 saying which, so a load
 *   balancer sends the next request elsewhere. A replica that is merely full stays ready: it refuses what it
 *   has no place for in milliseconds (429, Retry-After), and its 200 says how loaded it is (`load`, as
 *   voxedge_engine_load, and `capacity_streams`), for a balancer that weighs replicas by it.
 */
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import type { Hono } from "hono";
import { z } from "zod";
import type { ModelHost } from "../engine/host.ts";
import type { ServerLifecycle } from "../async/server-lifecycle.ts";
import { json, openByDefault } from "./route-docs.ts";
import { engineLoad } from "../metrics.ts";

export interface HealthRouteDeps {
  host: ModelHost;
  lifecycle: ServerLifecycle;
  /** The engine has admitted nothing for this long while full: readiness turns 503 ("saturated"). */
  saturatedAfterMs: number;
}

type Status = { status: "ok" | "loading" | "failed" | "draining"; error?: string };

function modelStatus(host: ModelHost): Status {
  if (host.state === "loading") return { status: "loading" };
  const failure = host.failure ?? host.engine?.failure;
  if (failure) return { status: "failed", error: failure.message };
  return { status: "ok" };
}

const healthBodySchema = z.object({ status: z.string(), model: z.string().optional(), engine: z.string().optional(), error: z.string().optional(), draining: z.boolean().optional() });

export function describeHealthRoutes(registry: OpenAPIRegistry): void {
  registry.registerPath({
    method: "get",
    path: "/health",
    summary: "Liveness: 200 while serving (draining included); 503 while the model loads, or when it or its engine failed",
    security: openByDefault,
    responses: { 200: { description: "alive", ...json(healthBodySchema) }, 503: { description: "loading or failed", ...json(healthBodySchema) } },
  });
  registry.registerPath({
    method: "get",
    path: "/health/ready",
    summary: "Readiness: 200 when the model is loaded, its engine can run and the server is not draining",
    security: openByDefault,
    responses: {
      200: { description: "ready, with the engine's load (running and waiting over capacity_streams) and the places it runs at once", ...json(z.object({ status: z.literal("ready"), load: z.number(), capacity_streams: z.number() })) },
      503: { description: "loading, failed, draining or saturated", ...json(healthBodySchema) },
    },
  });
}

export function registerHealthRoutes(app: Hono, { host, lifecycle, saturatedAfterMs }: HealthRouteDeps): void {
  app.get("/health", (c) => {
    const status = modelStatus(host);
    if (status.status !== "ok") return c.json(status, 503);
    const capabilities = host.model!.capabilities;
    return c.json({ status: "ok", model: capabilities.modelId, engine: capabilities.kind, ...(lifecycle.draining ? { draining: true } : {}) });
  });

  app.get("/health/ready", (c) => {
    const status = modelStatus(host);
    if (status.status !== "ok") return c.json(status, 503);
    if (lifecycle.draining) return c.json({ status: "draining", active: lifecycle.active }, 503);
    const fullForMs = host.engine?.fullForMs() ?? 0;
    if (fullForMs > saturatedAfterMs) return c.json({ status: "saturated", full_for_seconds: Math.round(fullForMs / 1000) }, 503);
    const engine = host.engine!;
    return c.json({ status: "ready", load: Number(engineLoad(engine).toFixed(3)), capacity_streams: engine.places });
  });
}
