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

export interface RuntimeSupport {
  name: "bun" | "deno";
  upgradeWebSocket: UpgradeWebSocket<unknown>;
  serve(fetch: FetchHandler, hostname: string, port: number): RunningServer;
  /** Bytes queued on a WebSocket and not yet handed to the network: the flow-control signal. */
  bufferedBytes(ws: WSContext<unknown>): number;
}

/** Largest WebSocket message accepted; bigger ones are closed with 1009 (session.config's 4 MiB cap). */
export const MAX_WEBSOCKET_MESSAGE_BYTES = 4 * 1024 * 1024;

interface BunServer {
  port: number;
  stop(force?: boolean): Promise<void> | void;
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
      serve(fetch, hostname, port) {
        const server = bun.serve({
          fetch,
          port,
          hostname,
          // 0: a long synthesis may send nothing for more than Bun's default 10 s before its first byte.
          idleTimeout: 0,
          // Bun closes a socket whose message exceeds maxPayloadLength with 1009, as the protocol asks.
          websocket: { ...websocket, maxPayloadLength: MAX_WEBSOCKET_MESSAGE_BYTES, idleTimeout: 0 },
        });
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
        const server = deno.serve({ port, hostname, onListen: () => {} }, (request) => fetch(request));
        return { url: `http://${displayHost(hostname)}:${server.addr.port}`, port: server.addr.port, stop: () => server.shutdown() };
      },
      bufferedBytes: (ws) => (ws.raw as WebSocket | undefined)?.bufferedAmount ?? 0,
    };
  }
  throw new Error("voxedge serves under Bun or Deno: run `bun run start` or `deno task serve`");
}
