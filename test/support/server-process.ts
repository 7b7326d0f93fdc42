/**
 * A real server process on a free loopback port: `bun src/main.ts serve …` (started as itself, not through
 * `bun run`, so signals reach the server) or `deno serve -A src/deploy.ts`. Ready once /health/ready is 200.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";

export const REPO_ROOT = join(import.meta.dir, "..", "..");
export const BUN = join(REPO_ROOT, "node_modules", ".bin", "bun");
export const DENO = join(REPO_ROOT, "node_modules", ".bin", "deno");

export interface ServerProcess {
  child: ChildProcess;
  base: string;
  /** Everything it wrote to stdout and stderr so far. */
  output(): string;
  /** Its JSON log lines so far. */
  logLines(): Record<string, unknown>[];
  /** Sends `signal` and resolves with the exit code (null when a signal killed it). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  exited: Promise<number | null>;
}

/** Its listening line: Bun's JSON `listening` log, or `deno serve`'s banner. */
const LISTENING = [/"message":"listening","url":"(http:\/\/[^"]+)"/, /Listening on (http:\/\/[^\s/]+)\//];

/**
 * `ownProcessGroup`: the command leads a process group of its own, as a service under systemd or a command
 * typed in a terminal does, so a test can signal the whole group (`process.kill(-pid)`) as they do.
 */
export async function startServerProcess(command: string[], env: Record<string, string> = {}, readyWithinMs = 45_000, ownProcessGroup = false): Promise<ServerProcess> {
  const child = spawn(command[0]!, command.slice(1), { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env }, detached: ownProcessGroup });
  let output = "";
  child.stdout!.on("data", (chunk) => (output += chunk));
  child.stderr!.on("data", (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const deadline = Date.now() + readyWithinMs;
  let base: string | undefined;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited (${child.exitCode}): ${output}`);
    base ??= LISTENING.map((pattern) => pattern.exec(output)?.[1]).find((url) => url !== undefined);
    if (base && (await fetch(`${base}/health/ready`).catch(() => undefined))?.status === 200) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`server not ready: ${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    child,
    base,
    output: () => output,
    logLines: () =>
      output
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line) as Record<string, unknown>),
    stop: (signal = "SIGTERM") => {
      child.kill(signal);
      return exited;
    },
    exited,
  };
}

/** `bun src/main.ts serve` on the offline engine, on any free loopback port. */
export function startBunServer(speakerDir: string, flags: string[] = []): Promise<ServerProcess> {
  return startServerProcess([BUN, "src/main.ts", "serve", "--engine", "classic", "--host", "127.0.0.1", "--port", "0", "--speaker-dir", speakerDir, ...flags]);
}
