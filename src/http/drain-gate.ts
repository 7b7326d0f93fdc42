/**
 * The HTTP listener's part of draining (async/server-lifecycle.ts): while draining, anything that would start
 * work (POST, DELETE, WebSocket upgrades) is refused with a 503 a proxy may retry on another replica; reads and
 * probes keep answering.
 */
import type { Context, Hono } from "hono";
import { ApiError } from "../api/errors.ts";
import type { ServerLifecycle } from "../async/server-lifecycle.ts";
import { HEALTH_PATHS, METRICS_PATH } from "./auth.ts";

const READ_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** Reads and probes keep answering while draining; anything that would start work does not. */
function startsWork(c: Context): boolean {
  if (HEALTH_PATHS.has(c.req.path) || c.req.path === METRICS_PATH) return false;
  if (c.req.header("upgrade")?.toLowerCase() === "websocket") return true;
  return !READ_METHODS.has(c.req.method);
}

/**
 * Refuses new work while draining. The 503 comes before any work, so a proxy may retry it on another
 * replica (nginx: `proxy_next_upstream error timeout http_503 non_idempotent`).
 */
export function registerDrainGate(app: Hono, lifecycle: ServerLifecycle): void {
  app.use("*", async (c, next) => {
    if (lifecycle.draining && startsWork(c)) {
      const refusal = new ApiError(503, "The server is shutting down; retry on another replica");
      refusal.headers = { "Retry-After": "1", Connection: "close" };
      throw refusal;
    }
    await next();
  });
}
