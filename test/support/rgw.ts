/**
 * A real S3 server for tests: one Ceph RGW per test process (scripts/rgw-up.sh: 1 mon, 1 memstore OSD,
 * radosgw), started on first use in a fresh temporary folder on free loopback ports, and stopped when the
 * process ends. Mocks such as s3rver accept conditional writes and then ignore them, so they would let the S3
 * storage's races pass untested.
 *
 * Missing Ceph binaries are an error, never a skip: a suite that silently skips its storage tests reads as
 * green while testing nothing.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { S3Bucket, type S3Settings } from "../../src/storage/s3.ts";
import { REPO_ROOT } from "./repo.ts";

export interface Rgw {
  /** http://127.0.0.1:PORT */
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  region: string;
  /** The cluster's folder (ceph.conf, logs under log/, pid files); removed when the process ends. */
  dir: string;
  /** The variables a spawned server reads to reach this RGW. */
  env(): Record<string, string>;
  settings(): S3Settings;
  /** A new, empty bucket with a unique valid name starting with `namePrefix` (sanitised). */
  newBucket(namePrefix: string): Promise<S3Bucket>;
  /** The last lines of every daemon log, for a failing test's message. */
  logTails(lines?: number): string;
}

/** Fixed in scripts/rgw-up.sh: a throwaway cluster on loopback, so the key is no secret. */
const ACCESS_KEY_ID = "VOXEDGETESTKEY";
const SECRET_ACCESS_KEY = "voxedgetestsecret";
const REGION = "us-east-1";
/** Measured at ~12–14 s on an idle 2-core machine; the bound only catches a hang. */
const BRING_UP_BOUND_MS = 120_000;
const BINARIES = ["ceph-mon", "ceph-osd", "radosgw", "monmaptool", "ceph", "radosgw-admin"];
const INSTALL_HINT = "install them with `apt-get install --no-install-recommends ceph-mon ceph-osd radosgw` (as root), or run `bash scripts/install-system-deps.sh`";

let shared: Promise<Rgw> | undefined;
/** The write end of the watchdog's pipe: never written, never closed, only held for as long as we live. */
let lifeline: unknown;

/** The process's RGW, started by the first caller; every later caller gets the same one (or its failure). */
export function sharedRgw(): Promise<Rgw> {
  shared ??= startRgw();
  return shared;
}

async function startRgw(): Promise<Rgw> {
  const missing = BINARIES.filter((binary) => Bun.which(binary) === null);
  if (missing.length > 0) throw new Error(`the S3 tests need a local Ceph RGW, but ${missing.join(", ")} ${missing.length === 1 ? "is" : "are"} not installed: ${INSTALL_HINT}`);

  const dir = mkdtempSync(join(tmpdir(), "voxedge-rgw-"));
  const [port, monPort] = await freeLoopbackPorts(2);
  const startedAt = Date.now();
  // `--while-stdin-open`: the script stays up, holding the daemons, until its stdin pipe closes, which the
  // kernel does whenever this process ends, however it ends (`bun test` emits no "exit" event, and a killed
  // run runs no handler at all); then it stops them and removes the folder.
  const script = Bun.spawn(["bash", join(REPO_ROOT, "scripts", "rgw-up.sh"), "--while-stdin-open", dir, String(port), String(monPort)], { stdin: "pipe", stdout: "pipe", stderr: "pipe" });
  // Where "exit" is emitted, the daemons go at once rather than when the pipe closes.
  process.once("exit", () => stopAndRemove(dir));
  const stderr = new Response(script.stderr).text();
  const ready = await readUntilReady(script.stdout, script.exited, BRING_UP_BOUND_MS);
  if (ready !== "ready") {
    // SIGKILL: a bash trap would wait for the step in progress (up to a minute); the pid files say what to stop.
    if (ready === "timeout") script.kill("SIGKILL");
    const exitCode = await script.exited;
    const tails = logTails(dir, 25);
    stopAndRemove(dir);
    const what = ready === "timeout" ? `did not come up within ${BRING_UP_BOUND_MS / 1000} s` : `failed (exit ${exitCode})`;
    // A script that failed by itself has already printed the logs' tails.
    throw new Error(`Ceph RGW (scripts/rgw-up.sh, port ${port}, mon port ${monPort}) ${what}:\n${await Promise.race([stderr, Bun.sleep(2_000).then(() => "")])}${ready === "timeout" ? `\n${tails}` : ""}`);
  }
  lifeline = script.stdin;
  // Neither the script nor its pipes may keep the test process alive once the tests are done.
  script.unref();
  const bringUpMs = Date.now() - startedAt;
  if (process.env.VOXEDGE_RGW_VERBOSE) console.error(`rgw: up on 127.0.0.1:${port} in ${bringUpMs} ms`);

  const endpoint = `http://127.0.0.1:${port}`;
  const settings = (): S3Settings => ({ accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET_ACCESS_KEY, region: REGION, endpoint });
  let bucketCount = 0;
  return {
    endpoint,
    accessKeyId: ACCESS_KEY_ID,
    secretAccessKey: SECRET_ACCESS_KEY,
    region: REGION,
    dir,
    env: () => ({ AWS_ACCESS_KEY_ID: ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY: SECRET_ACCESS_KEY, AWS_REGION: REGION, AWS_ENDPOINT_URL_S3: endpoint }),
    settings,
    async newBucket(namePrefix) {
      bucketCount += 1;
      const bucket = new S3Bucket(settings(), uniqueBucketName(namePrefix, bucketCount));
      await bucket.createBucket();
      return bucket;
    },
    logTails: (lines = 25) => logTails(dir, lines),
  };
}

/** "ready" once the script prints its "rgw up:" line; "exited" when it ends first; "timeout". */
async function readUntilReady(stdout: ReadableStream<Uint8Array>, exited: Promise<number>, withinMs: number): Promise<"ready" | "exited" | "timeout"> {
  const reader = stdout.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), withinMs)));
  const ready = (async (): Promise<"ready" | "exited"> => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return "exited";
      text += decoder.decode(value, { stream: true });
      if (/^rgw up: /m.test(text)) return "ready";
    }
  })();
  try {
    return await Promise.race([ready, timeout, exited.then(() => ready)]);
  } finally {
    clearTimeout(timer);
    reader.releaseLock();
  }
}

/** 3–63 lower-case letters, digits and hyphens: the prefix, cut to fit, then what makes it unique. */
function uniqueBucketName(namePrefix: string, count: number): string {
  const suffix = `${process.pid.toString(36)}-${count}-${Math.random().toString(36).slice(2, 8)}`;
  const prefix =
    namePrefix
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 63 - suffix.length - 1)
      .replace(/-+$/, "") || "test";
  return `${prefix}-${suffix}`;
}

/** Ports the kernel just handed out, so free now; they lie outside the OSD's 6800–7300 range. */
async function freeLoopbackPorts(count: number): Promise<number[]> {
  // All held open together, so the kernel cannot hand out the same port twice.
  const servers: Server[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const server = createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(0, "127.0.0.1", resolve);
      });
    }
    return servers.map((server) => (server.address() as { port: number }).port);
  } finally {
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  }
}

function stopAndRemove(dir: string): void {
  stopDaemons(dir);
  try {
    rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  } catch {
    // A daemon still dying may write one last log line; the watchdog removes the folder too.
  }
}

/** SIGKILL: the data is in memory and thrown away, so there is nothing a clean shutdown would save. */
function stopDaemons(dir: string): void {
  for (const name of ["watchdog", "rgw", "osd", "mon"]) {
    const pidFile = join(dir, `${name}.pid`);
    if (!existsSync(pidFile)) continue;
    const pid = Number(readFileSync(pidFile, "utf8").trim());
    if (!Number.isInteger(pid) || pid <= 1) continue;
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
}

function logTails(dir: string, lines: number): string {
  const logDir = join(dir, "log");
  if (!existsSync(logDir)) return "(no daemon logs)";
  return readdirSync(logDir)
    .sort()
    .map((name) => {
      const text = readFileSync(join(logDir, name), "utf8").trimEnd();
      return text === "" ? "" : `--- tail of ${name}\n${text.split("\n").slice(-lines).join("\n")}`;
    })
    .filter((part) => part !== "")
    .join("\n");
}
