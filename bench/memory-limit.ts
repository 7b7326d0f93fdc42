/**
 * The server inside a real memory limit, as an edge container runs it: a cgroup (v2 `memory.max`, or v1
 * `memory.limit_in_bytes` with swap capped too) made for the run, the server started inside it, then one
 * stream, 8 concurrent streams and a burst of 24 requests. Per phase: the peak of the server's resident
 * memory and of the cgroup's usage (sampled every 20 ms, plus the kernel's own high-water marks), the
 * answers (200 / 429 / other), one stream's RTF and first audio, and whether the kernel killed the server.
 *
 *   bun bench/memory-limit.ts --model /tmp/pocket-full [--limit 1GiB] [--server-dir <checkout>] [--label L] [-- server flags]
 *
 * Needs root and a writable cgroup hierarchy (Linux); without one it says so and exits 2. The client runs
 * outside the cgroup, on the same cores.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { BENCH_SENTENCE } from "./pocket-timing.ts";
import { IDLE_RELEASE_DELAY_MS } from "../src/engine/host.ts";
import { BYTES_PER_SECOND, rawPcmStream, uploadBenchVoice, type StreamOutcome } from "./support/streams.ts";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    model: { type: "string" },
    limit: { type: "string", default: "1GiB" },
    "server-dir": { type: "string" },
    label: { type: "string", default: "" },
    "max-new-tokens": { type: "string", default: "275" },
  },
});
if (!values.model) throw new Error("--model <bundle> is required");
const limitBytes = parseSize(values.limit!);
const serverDir = resolve(values["server-dir"] ?? `${import.meta.dir}/..`);
const fields = { voice: "bench", max_new_tokens: Number(values["max-new-tokens"]) };

function parseSize(text: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(|k|m|g|ki|mi|gi)b?$/i.exec(text.trim());
  if (!match) throw new Error(`--limit ${text}: not a size`);
  const unit = { "": 1, k: 1e3, m: 1e6, g: 1e9, ki: 1024, mi: 1024 ** 2, gi: 1024 ** 3 }[match[2]!.toLowerCase() as "k"]!;
  return Math.round(Number(match[1]) * unit);
}

/** A fresh cgroup with the memory limit, v2 or v1, or why there is none. */
function makeCgroup(): { procs: string; usageBytes(): number; peakBytes(): number; oomKills(): number; remove(): void } {
  const name = `voxedge-bench-${process.pid}`;
  const v2 = existsSync("/sys/fs/cgroup/cgroup.controllers");
  const dir = v2 ? join("/sys/fs/cgroup", name) : join("/sys/fs/cgroup/memory", name);
  mkdirSync(dir);
  const read = (file: string) => readFileSync(join(dir, file), "utf8");
  if (v2) {
    writeFileSync(join(dir, "memory.max"), String(limitBytes));
    if (existsSync(join(dir, "memory.swap.max"))) writeFileSync(join(dir, "memory.swap.max"), "0");
  } else {
    writeFileSync(join(dir, "memory.limit_in_bytes"), String(limitBytes));
    if (existsSync(join(dir, "memory.memsw.limit_in_bytes"))) writeFileSync(join(dir, "memory.memsw.limit_in_bytes"), String(limitBytes));
  }
  return {
    procs: join(dir, "cgroup.procs"),
    usageBytes: () => Number(read(v2 ? "memory.current" : "memory.usage_in_bytes")),
    peakBytes: () => Number(v2 ? (existsSync(join(dir, "memory.peak")) ? read("memory.peak") : read("memory.current")) : read("memory.max_usage_in_bytes")),
    oomKills: () => {
      const events = v2 ? read("memory.events") : read("memory.oom_control");
      return Number(/oom_kill (\d+)/.exec(events)?.[1] ?? 0);
    },
    remove: () => {
      try {
        rmdirSync(dir);
      } catch {
        // Still has a process in it: the kernel removes it once that exits.
      }
    },
  };
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePort(port));
    });
  });
}

let cgroup: ReturnType<typeof makeCgroup>;
try {
  cgroup = makeCgroup();
} catch (error) {
  console.error(`no cgroup could be made for the limit (${(error as Error).message}); run as root on Linux with a writable cgroup hierarchy`);
  process.exit(2);
}

const port = await freePort();
const speakerDir = mkdtempSync(join(tmpdir(), "voxedge-bench-"));
const serveArgs = ["src/main.ts", "serve", "--host", "127.0.0.1", "--port", String(port), "--speaker-dir", speakerDir, "--model", resolve(values.model), ...positionals];
// The shell joins the cgroup, then becomes the server: every byte it ever allocates counts against the limit.
const runtimeFlags = (process.env.VOXEDGE_BENCH_BUN_FLAGS ?? "").split(" ").filter(Boolean);
const child = spawn("sh", ["-c", `echo $$ > ${cgroup.procs} && exec "$0" "$@"`, process.execPath, ...runtimeFlags, ...serveArgs], {
  cwd: serverDir,
  stdio: ["ignore", "ignore", "inherit"],
  env: { ...process.env, VOXEDGE_LOG_LEVEL: "error" },
});
let exit: string | undefined;
child.on("exit", (code, signal) => (exit = signal ? `killed (${signal})` : `exited ${code}`));

const rssMiB = () => {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
  } catch {
    return 0;
  }
};
const hwmMiB = () => {
  try {
    return Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
  } catch {
    return 0;
  }
};
let phasePeakRss = 0;
let phasePeakCgroup = 0;
const sampler = setInterval(() => {
  phasePeakRss = Math.max(phasePeakRss, rssMiB());
  phasePeakCgroup = Math.max(phasePeakCgroup, cgroup.usageBytes() / 1024 ** 2);
}, 20);
const base = `http://127.0.0.1:${port}`;

const rows: string[][] = [];
const phase = (name: string, answers: string, extra = "") => {
  rows.push([values.label!, name, `${phasePeakRss.toFixed(0)}`, `${phasePeakCgroup.toFixed(0)}`, answers, extra, exit ?? "alive"]);
  phasePeakRss = rssMiB();
  phasePeakCgroup = cgroup.usageBytes() / 1024 ** 2;
};

const started = performance.now();
let readySeconds = NaN;
for (;;) {
  const ready = await fetch(`${base}/health/ready`).catch(() => undefined);
  if (ready?.status === 200) {
    readySeconds = (performance.now() - started) / 1000;
    break;
  }
  if (exit || performance.now() - started > 120_000) break;
  await Bun.sleep(25);
}
phase("load", exit ? "" : "ready", `ready in ${readySeconds.toFixed(2)} s`);

const tally = (outcomes: PromiseSettledResult<StreamOutcome>[]) => {
  const ok = outcomes.filter((outcome) => outcome.status === "fulfilled" && outcome.value.kind === "completed").length;
  const refused = outcomes.filter((outcome) => outcome.status === "fulfilled" && outcome.value.kind === "rejected").length;
  return `${ok} / ${refused} / ${outcomes.length - ok - refused}`;
};

if (!exit) {
  // Idle as started: the engine's idle release has run, no voice encoded yet (no encoder worker).
  await Bun.sleep(IDLE_RELEASE_DELAY_MS + 500);
  phasePeakRss = rssMiB();
  phase("idle, just ready", "", `RSS ${rssMiB().toFixed(0)} MiB`);
  await uploadBenchVoice(base).catch((error) => console.error(String(error)));
  // The voice's prompt is encoded at its first use: done here, so that the phases below time speech alone.
  await rawPcmStream(base, "Hello.", { ...fields, max_new_tokens: 2 }).catch((error) => console.error(String(error)));
  await Bun.sleep(IDLE_RELEASE_DELAY_MS + 500);
  phasePeakRss = rssMiB();
  const idle = rssMiB();
  phase("idle, a voice just encoded (its worker still open)", "", `RSS ${idle.toFixed(0)} MiB`);

  const one = await Promise.allSettled([rawPcmStream(base, BENCH_SENTENCE, fields)]);
  let oneStream = "";
  if (one[0]!.status === "fulfilled" && one[0]!.value.kind === "completed") {
    const { trace } = one[0]!.value;
    const seconds = trace.arrivals.reduce((sum, arrival) => sum + arrival.bytes, 0) / BYTES_PER_SECOND;
    oneStream = `first audio ${trace.arrivals[0]!.atMs.toFixed(0)} ms, RTF ${(trace.endMs / 1000 / seconds).toFixed(3)}`;
  }
  phase("1 stream", tally(one), oneStream);
  phase("8 streams at once", tally(await Promise.allSettled(Array.from({ length: 8 }, () => rawPcmStream(base, BENCH_SENTENCE, fields)))));
  phase("burst of 24", tally(await Promise.allSettled(Array.from({ length: 24 }, () => rawPcmStream(base, BENCH_SENTENCE, fields)))));
}
clearInterval(sampler);
const processPeak = hwmMiB();
const cgroupPeak = cgroup.peakBytes() / 1024 ** 2;
const oomKills = cgroup.oomKills();
child.kill("SIGTERM");
await new Promise((resolveExit) => (exit ? resolveExit(undefined) : child.once("exit", resolveExit)));
rmSync(speakerDir, { recursive: true, force: true });
cgroup.remove();

console.log(`memory limit ${(limitBytes / 1024 ** 2).toFixed(0)} MiB; server VmHWM ${processPeak.toFixed(0)} MiB, cgroup peak ${cgroupPeak.toFixed(0)} MiB, OOM kills ${oomKills}`);
console.log("| label | phase | peak RSS MiB | peak cgroup MiB | 200 / 429 / other | | server |");
console.log("|---|---|---|---|---|---|---|");
for (const row of rows) console.log(`| ${row.join(" | ")} |`);
