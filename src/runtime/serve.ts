/**
 * The one place that knows which runtime serves: Bun.serve with hono/bun's WebSocket handler under Bun,
 * Deno.serve with hono/deno's upgrade under Deno. Each adapter module touches its runtime's globals when
 * imported, so only the running runtime's one is loaded. Everything else is a web-standard fetch handler.
 */
import type { UpgradeWebSocket, WSContext } from "hono/ws";

export interface RunningServer {
  /** Base URL with the real port (useful when port 0 was asked for). */
  url: string;
  port: number;
  stop(): Promise<void>;
}

type FetchHandler = (request: Request, server?: unknown) => Response | Promise<Response>;

export interface ServeOptions {
  /**
   * Seconds a connection may sit idle: between keep-alive requests, or before its headers are complete.
   * Bun only; a request being handled is exempt (its body has its own deadline in the app, and a long
   * synthesis may send nothing for longer than this before its first byte).
   */
  keepAliveTimeoutSeconds?: number;
}

/** Nginx's default keep-alive: above the 60 s idle timeout of common load balancers, so they close first. */
const DEFAULT_KEEP_ALIVE_SECONDS = 75;

/**
 * A request line without a Host header (HTTP/1.0, e.g. HAProxy's default health check) reaches the handler
 * with a bare path as its URL, which routes nowhere; give it the address it arrived on.
 */
function withAbsoluteUrl(request: Request, hostname: string, port: number): Request {
  if (!request.url.startsWith("/")) return request;
  return new Request(`http://${displayHost(hostname === "0.0.0.0" || hostname === "::" ? "localhost" : hostname)}:${port}${request.url}`, request);
}

export interface RuntimeSupport {
  name: "bun" | "deno";
  upgradeWebSocket: UpgradeWebSocket<unknown>;
  serve(fetch: FetchHandler, hostname: string, port: number, options?: ServeOptions): RunningServer;
  /** Bytes queued on a WebSocket and not yet handed to the network: the flow-control signal. */
  bufferedBytes(ws: WSContext<unknown>): number;
}

/** Largest WebSocket message accepted; bigger ones are closed with 1009 (session.config's 4 MiB cap). */
export const MAX_WEBSOCKET_MESSAGE_BYTES = 4 * 1024 * 1024;

interface BunServer {
  port: number;
  stop(force?: boolean): Promise<void> | void;
  /** Per-request idle timeout in seconds (0 = none) for the connection the request came on. */
  timeout(request: Request, seconds: number): void;
  upgrade(request: Request, options?: unknown): boolean;
}
interface BunRuntime {
  serve(options: Record<string, unknown>): BunServer;
}
interface DenoRuntime {
  serve(
    options: { port: number; hostname: string; onListen?: (address: { port: number }) => void },
    handler: (request: Request) => Response | Promise<Response>,
  ): { addr: { port: number }; shutdown(): Promise<void> };
}

function displayHost(hostname: string): string {
  return hostname.includes(":") ? `[${hostname}]` : hostname;
}

export async function loadRuntime(): Promise<RuntimeSupport> {
  if ("Bun" in globalThis) {
    const { upgradeWebSocket, websocket } = await import("hono/bun");
    const bun = (globalThis as unknown as { Bun: BunRuntime }).Bun;
    return {
      name: "bun",
      upgradeWebSocket: upgradeWebSocket as UpgradeWebSocket<unknown>,
      serve(fetch, hostname, port, options = {}) {
        const keepAliveSeconds = options.keepAliveTimeoutSeconds ?? DEFAULT_KEEP_ALIVE_SECONDS;
        let listeningPort = port;
        const server = bun.serve({
          async fetch(request: Request, bunServer: BunServer) {
            const routed = withAbsoluteUrl(request, hostname, listeningPort);
            if (request.headers.get("upgrade")?.toLowerCase() === "websocket") return fetch(routed, bunServer);
            // While the request is handled the idle timer is off; it is armed again once the response has
            // been written, for the keep-alive wait that follows.
            bunServer.timeout(request, 0);
            const rearm = () => bunServer.timeout(request, keepAliveSeconds);
            const response = await fetch(routed, bunServer);
            // A body of declared length is already complete; passed through a stream it would lose its
            // Content-Length (Bun then sends it chunked).
            if (!response.body || response.headers.has("content-length")) {
              rearm();
              return response;
            }
            const body = response.body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({ flush: rearm }));
            return new Response(body, response);
          },
          port,
          hostname,
          idleTimeout: keepAliveSeconds,
          // Bodies are capped inside the app, whose 413 is in the API's error shape; Bun's own is empty.
          maxRequestBodySize: Number.MAX_SAFE_INTEGER,
          // Bun closes a socket whose message exceeds maxPayloadLength with 1009, as the protocol asks.
          websocket: { ...websocket, maxPayloadLength: MAX_WEBSOCKET_MESSAGE_BYTES, idleTimeout: 0 },
        });
        listeningPort = server.port;
        return { url: `http://${displayHost(hostname)}:${server.port}`, port: server.port, stop: async () => void (await server.stop(true)) };
      },
      bufferedBytes: (ws) => (ws.raw as { getBufferedAmount(): number } | undefined)?.getBufferedAmount() ?? 0,
    };
  }
  if ("Deno" in globalThis) {
    const { upgradeWebSocket } = await import("hono/deno");
    const deno = (globalThis as unknown as { Deno: DenoRuntime }).Deno;
    return {
      name: "deno",
      upgradeWebSocket: upgradeWebSocket as UpgradeWebSocket<unknown>,
      serve(fetch, hostname, port) {
        let listeningPort = port;
        const server = deno.serve({ port, hostname, onListen: () => {} }, (request) => fetch(withAbsoluteUrl(request, hostname, listeningPort)));
        listeningPort = server.addr.port;
        return { url: `http://${displayHost(hostname)}:${server.addr.port}`, port: server.addr.port, stop: () => server.shutdown() };
      },
      bufferedBytes: (ws) => (ws.raw as WebSocket | undefined)?.bufferedAmount ?? 0,
    };
  }
  throw new Error("voxedge serves under Bun or Deno: run `bun run start` or `deno task serve`");
}
