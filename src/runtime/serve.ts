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
  /**
   * Seconds a streamed response may wait on a client that takes nothing before its connection is closed
   * (Bun only). The app's own stall timeout frees the stream's engine state at the same moment, but a
   * socket with unsent bytes stays open until the runtime closes it.
   */
  writeStallTimeoutSeconds?: number;
}

/** Nginx's default keep-alive: above the 60 s idle timeout of common load balancers, so they close first. */
const DEFAULT_KEEP_ALIVE_SECONDS = 75;
const DEFAULT_WRITE_STALL_SECONDS = 180;

/**
 * Passes a response body through, calling `onStall` when the runtime has not come back for the next chunk
 * within `stallMs` of the last one (the client's socket buffers are full and it reads nothing), and `onEnd`
 * once the body has been handed over whole.
 */
function withWriteDeadline(body: ReadableStream<Uint8Array>, stallMs: number, onStall: () => void, onEnd: () => void): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let stallTimer: ReturnType<typeof setTimeout> | undefined;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        clearTimeout(stallTimer);
        const { value, done } = await reader.read();
        if (done) {
          onEnd();
          controller.close();
          return;
        }
        controller.enqueue(value);
        stallTimer = setTimeout(() => {
          onStall();
          controller.error(new Error(`the client took nothing for ${stallMs} ms`));
          reader.cancel(new Error("write stalled")).catch(() => undefined);
        }, stallMs);
      },
      cancel(reason) {
        clearTimeout(stallTimer);
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

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
  /** Drops a WebSocket's connection at once, without the close handshake a peer that reads nothing never completes. */
  terminate(ws: WSContext<unknown>): void;
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
        const writeStallMs = (options.writeStallTimeoutSeconds ?? DEFAULT_WRITE_STALL_SECONDS) * 1000;
        let listeningPort = port;
        const server = bun.serve({
          async fetch(request: Request, bunServer: BunServer) {
            const routed = withAbsoluteUrl(request, hostname, listeningPort);
            if (request.headers.get("upgrade")?.toLowerCase() === "websocket") return fetch(routed, bunServer);
            // While the request is handled the idle timer is off; it is armed again once the response has
            // been written, for the keep-alive wait that follows.
            bunServer.timeout(request, 0);
            const rearm = () => bunServer.timeout(request, keepAliveSeconds);
            // The idle timer counts write progress too: a client that reads nothing leaves the connection
            // idle, so a short timer closes it, unsent bytes and all.
            const closeSoon = () => bunServer.timeout(request, 1);
            const response = await fetch(routed, bunServer);
            // An answer that ends the connection (a 408 for a stalled body) closes it once written, even
            // when the client still has body bytes on the way.
            if (response.headers.get("connection")?.toLowerCase() === "close") {
              closeSoon();
              return response;
            }
            // A body of declared length is already complete; passed through a stream it would lose its
            // Content-Length (Bun then sends it chunked). Its write progress is kept by the idle timer.
            if (!response.body || response.headers.has("content-length")) {
              rearm();
              return response;
            }
            return new Response(withWriteDeadline(response.body, writeStallMs, closeSoon, rearm), response);
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
      terminate: (ws) => (ws.raw as { terminate(): void } | undefined)?.terminate(),
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
      // Deno's server WebSocket has no abortive close; close() is the most it offers.
      terminate: (ws) => (ws.raw as WebSocket | undefined)?.close(),
    };
  }
  throw new Error("voxedge serves under Bun or Deno: run `bun run start` or `deno task serve`");
}
