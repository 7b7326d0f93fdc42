/**
 * The one place that knows which runtime serves: Bun.serve under Bun, Deno.serve under Deno. Everything
 * else is a web-standard fetch handler.
 */
export interface RunningServer {
  /** Base URL with the real port (useful when port 0 was asked for). */
  url: string;
  port: number;
  stop(): Promise<void>;
}

type FetchHandler = (request: Request) => Response | Promise<Response>;

interface BunRuntime {
  serve(options: { fetch: FetchHandler; port: number; hostname: string; idleTimeout: number }): { port: number; stop(force?: boolean): Promise<void> | void };
}
interface DenoRuntime {
  serve(
    options: { port: number; hostname: string; onListen?: (address: { port: number }) => void },
    handler: FetchHandler,
  ): { addr: { port: number }; shutdown(): Promise<void> };
}

export function runtimeName(): "bun" | "deno" | "other" {
  if ("Bun" in globalThis) return "bun";
  if ("Deno" in globalThis) return "deno";
  return "other";
}

export function serve(fetch: FetchHandler, hostname: string, port: number): RunningServer {
  const displayHost = hostname.includes(":") ? `[${hostname}]` : hostname;
  if ("Bun" in globalThis) {
    const bun = (globalThis as unknown as { Bun: BunRuntime }).Bun;
    // idleTimeout 0: a long synthesis may send nothing for more than Bun's default 10 s before its first byte.
    const server = bun.serve({ fetch, port, hostname, idleTimeout: 0 });
    return { url: `http://${displayHost}:${server.port}`, port: server.port, stop: async () => void (await server.stop(true)) };
  }
  if ("Deno" in globalThis) {
    const deno = (globalThis as unknown as { Deno: DenoRuntime }).Deno;
    const server = deno.serve({ port, hostname, onListen: () => {} }, fetch);
    return { url: `http://${displayHost}:${server.addr.port}`, port: server.addr.port, stop: () => server.shutdown() };
  }
  throw new Error("voxedge serves under Bun or Deno: run `bun run start` or `deno task serve`");
}
