/**
 * API keys. A request proves it holds one with `Authorization: Bearer <key>` (what OpenAI clients send),
 * `X-API-Key: <key>` (what gateways and curl users often send) or `xi-api-key: <key>` (what ElevenLabs clients
 * send); a WebSocket upgrade may also carry it as `?api_key=` (`?xi_api_key=` on ElevenLabs' sockets), since a
 * browser's WebSocket cannot set headers. The query form is taken on the upgrade only:
 * elsewhere a key in a URL ends up in proxy logs for no gain.
 *
 * Which routes ask for a key:
 * - everything under /v1 and /elevenlabs (an ElevenLabs socket may carry it in its first message instead),
 *   except the three listings with --public-listings, which then also answer callers
 *   that send no key (Open WebUI fills its settings from them without its key); a caller that sends a
 *   wrong key is refused even there, so a misconfigured client finds out;
 * - /health, /health/ready with --protect-health, /metrics with --protect-metrics (open by default: probes
 *   and scrapers often send no credentials, and neither route reveals user data);
 * - never /openapi.json and /docs (the API's shape is not a secret) or the playground page.
 */
import type { Context, Hono } from "hono";
import { timingSafeEqual, createHash } from "node:crypto";
import { ApiError } from "../api/errors.ts";
import { ELEVENLABS_PREFIX } from "./mounts.ts";

export const PUBLIC_LISTINGS = new Set(["/v1/models", "/v1/audio/models", "/v1/audio/voices"]);
export const HEALTH_PATHS = new Set(["/health", "/health/ready"]);
export const METRICS_PATH = "/metrics";
/** The WebSocket route, where `?api_key=` is also read. */
export const WEBSOCKET_PATH = "/v1/audio/speech/stream";
/** ElevenLabs' WebSocket routes, where `?xi_api_key=` is read on the upgrade. */
const ELEVENLABS_WEBSOCKET_PATH = /^\/elevenlabs\/v1\/text-to-speech\/[^/]+\/(?:multi-)?stream-input$/;

export interface AuthOptions {
  apiKeys: readonly string[];
  publicListings: boolean;
  protectHealth: boolean;
  protectMetrics: boolean;
}

/** What a request showed: no key at all, a key the server holds, or one it does not. */
export type Credentials = "none" | "valid" | "wrong";

export class ApiKeyCheck {
  /** Keys compared as SHA-256 digests: equal lengths, so the comparison's time says nothing about the key. */
  readonly #digests: Buffer[];

  constructor(private readonly options: AuthOptions) {
    this.#digests = options.apiKeys.map(digest);
  }

  get enabled(): boolean {
    return this.#digests.length > 0;
  }

  credentialsOf(c: Context): Credentials {
    const key = presentedKey(c);
    if (key === undefined) return "none";
    return this.holds(key) ? "valid" : "wrong";
  }

  /** Whether `key` is one of the server's keys. */
  holds(key: string): boolean {
    const given = digest(key);
    // Every key is compared, so which one matched (or whether any did) does not show in the timing either.
    let matched = false;
    for (const expected of this.#digests) matched = timingSafeEqual(given, expected) || matched;
    return matched;
  }

  /** Whether this request may go on without a valid key. */
  isOpen(c: Context): boolean {
    const path = c.req.path;
    if (HEALTH_PATHS.has(path)) return !this.options.protectHealth;
    if (path === METRICS_PATH) return !this.options.protectMetrics;
    return !path.startsWith("/v1/") && path !== "/v1" && !path.startsWith(`${ELEVENLABS_PREFIX}/`);
  }

  /** Listings open to callers without a key (they see no consent ids); a wrong key is still refused. */
  isPublicListing(c: Context): boolean {
    return this.options.publicListings && c.req.method === "GET" && PUBLIC_LISTINGS.has(c.req.path);
  }
}

/**
 * Installs the check before every route. `isAnonymous` tells a route whether the caller sent no valid key
 * (only possible on an open route), so the voice listing can leave the uploaders' data out.
 * `awaitsSocketKey` tells ElevenLabs' socket routes that an upgrade came without any key: ElevenLabs' protocol
 * lets the first message carry it (`xi_api_key`), so such a socket opens and must check that message.
 */
export function registerApiKeyCheck(app: Hono, check: ApiKeyCheck): { isAnonymous: (c: Context) => boolean; awaitsSocketKey: (c: Context) => boolean } {
  const anonymous = new WeakSet<Request>();
  const keyInFirstMessage = new WeakSet<Request>();
  if (check.enabled) {
    app.use("*", async (c, next) => {
      const credentials = check.credentialsOf(c);
      if (credentials === "valid") return next();
      if (credentials === "none" && isElevenLabsSocketUpgrade(c)) {
        keyInFirstMessage.add(c.req.raw);
        return next();
      }
      if (credentials === "none" && (check.isOpen(c) || check.isPublicListing(c))) {
        anonymous.add(c.req.raw);
        return next();
      }
      // An open route ignores the key: a probe holding a rotated-out key keeps working.
      if (check.isOpen(c)) return next();
      throw new ApiError(401, credentials === "none" ? "Missing API key (send Authorization: Bearer <key> or X-API-Key: <key>)" : "Wrong API key");
    });
  }
  return { isAnonymous: (c) => check.enabled && anonymous.has(c.req.raw), awaitsSocketKey: (c) => keyInFirstMessage.has(c.req.raw) };
}

/** The key a request carries; a malformed Authorization header counts as a wrong key, not as none. */
function presentedKey(c: Context): string | undefined {
  const authorization = c.req.header("authorization");
  if (authorization !== undefined) {
    // The scheme name is case-insensitive (RFC 7235 §2.1): "bearer", "BEARER" and "Bearer" are one scheme.
    return /^bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization)?.[1] ?? "";
  }
  const headerKey = c.req.header("x-api-key") ?? c.req.header("xi-api-key");
  if (headerKey !== undefined) return headerKey.trim();
  if (c.req.header("upgrade")?.toLowerCase() !== "websocket") return undefined;
  if (c.req.path === WEBSOCKET_PATH) return c.req.query("api_key");
  // ElevenLabs' sockets: the same, under ElevenLabs' name for the key.
  if (ELEVENLABS_WEBSOCKET_PATH.test(c.req.path)) return c.req.query("xi_api_key");
  return undefined;
}

function isElevenLabsSocketUpgrade(c: Context): boolean {
  return c.req.header("upgrade")?.toLowerCase() === "websocket" && ELEVENLABS_WEBSOCKET_PATH.test(c.req.path);
}

function digest(key: string): Buffer {
  return createHash("sha256").update(key, "utf8").digest();
}
