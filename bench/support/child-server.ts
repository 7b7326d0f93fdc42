/**
 * A voxedge server in a child process, for benchmarks that watch it from outside: its resident memory and
 * open descriptors come from /proc (Linux), its speaker folder is a fresh temp folder removed on stop.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface ChildServer {
  base: string;
  pid: number;
  rssMiB(): number;
  /** Samples RSS every 50 ms from now: `idleMiB` is now's, `stop()` ends sampling and gives the peak. */
  watchRss(): { idleMiB: number; stop(): number };
  openDescriptors(): number;
  /** How the process ended, or undefined while it runs (a crash, when the bench did not stop it). */
  exitStatus(): { code: number | null; signal: NodeJS.Signals | null } | undefined;
  stop(): void;
}

export interface ChildServerOptions {
  /** The checkout whose src/main.ts runs (with its own bunfig.toml and node_modules); default: the current directory. */
  serverDir?: string;
}

/** `dir`'s git commit (short), "+ local changes" when its src/ differs from it; "" outside git. For tables that compare checkouts. */
export function checkoutRevision(dir: string): string {
  const git = (...args: string[]) => spawnSync("git", ["-C", dir, ...args], { encoding: "utf8" });
  const head = git("rev-parse", "--short", "HEAD");
  if (head.status !== 0) return "";
  return `${head.stdout.trim()}${git("status", "--porcelain", "--", "src").stdout.trim() ? " + local changes" : ""}`;
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Starts `src/main.ts serve` with `args` on a free loopback port and waits until /health says ok. */
export async function startChildServer(args: readonly string[], startTimeoutMs = 60_000, options: ChildServerOptions = {}): Promise<ChildServer> {
  const port = await freePort();
  const speakerDir = mkdtempSync(join(tmpdir(), "voxedge-bench-"));
  const child = spawn(process.execPath, ["src/main.ts", "serve", "--host", "127.0.0.1", "--port", String(port), "--speaker-dir", speakerDir, ...args], {
    stdio: ["ignore", "ignore", "inherit"],
    cwd: options.serverDir,
    env: { ...process.env, VOXEDGE_LOG_LEVEL: "error" },
  });
  const stop = () => {
    child.kill("SIGTERM");
    rmSync(speakerDir, { recursive: true, force: true });
  };
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + startTimeoutMs;
  for (;;) {
    const health = await fetch(`${base}/health`).catch(() => undefined);
    if (health?.status === 200 && ((await health.json()) as { status?: string }).status === "ok") break;
    if (child.exitCode !== null || Date.now() > deadline) {
      stop();
      throw new Error("the server did not start");
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const rssMiB = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
  return {
    base,
    pid: child.pid!,
    rssMiB,
    watchRss() {
      const idleMiB = rssMiB();
      let peakMiB = idleMiB;
      const timer = setInterval(() => (peakMiB = Math.max(peakMiB, rssMiB())), 50);
      return {
        idleMiB,
        stop: () => {
          clearInterval(timer);
          return Math.max(peakMiB, rssMiB());
        },
      };
    },
    openDescriptors: () => readdirSync(`/proc/${child.pid}/fd`).length,
    exitStatus: () => (child.exitCode === null && child.signalCode === null ? undefined : { code: child.exitCode, signal: child.signalCode }),
    stop,
  };
}
