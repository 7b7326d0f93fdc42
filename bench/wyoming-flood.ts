/**
 * The Wyoming listener against clients that send much and read nothing, each case on a fresh server process
 * (offline engine) on loopback, with /health fetched every 50 ms meanwhile:
 *
 * - data-flood: a `synthesize` whose audio is not read keeps the handler busy, then `describe` events
 *   padded with 1 MiB of non-text data (--flood-mib of them);
 * - describe-unread: `describe` after `describe` for --seconds, replies never read;
 * - big-chunks: 8 connections each open a streaming run and send one `synthesize-chunk` of ~4 MiB of text
 *   (words, no sentence end), audio not read.
 *
 * Prints per case: how the server treated the connection, /health p100 (the longest answer) and the
 * server's RSS idle → peak (from /proc, every 50 ms). `--server-dir` runs another checkout's server (its
 * src/main.ts), for a before → after table.
 *   bun bench/wyoming-flood.ts [--cases data-flood,describe-unread,big-chunks] [--flood-mib 1024] [--seconds 20] [--server-dir ../wt-before]
 * Linux only (RSS is read from /proc of the server process).
 */
import { connect, createServer, type Socket } from "node:net";
import { parseArgs } from "node:util";
import { checkoutRevision, startChildServer, type ChildServer } from "./support/child-server.ts";

const { values } = parseArgs({
  options: {
    cases: { type: "string", default: "data-flood,describe-unread,big-chunks" },
    "flood-mib": { type: "string", default: "1024" },
    seconds: { type: "string", default: "20" },
    "server-dir": { type: "string" },
  },
});
const floodMiB = Number(values["flood-mib"]);
const caseSeconds = Number(values.seconds);
const serverDir = values["server-dir"];
/** --stream-stall-timeout of the describe-unread case, so the drop shows within the case. */
const STALL_TIMEOUT_SECONDS = 5;
const HEALTH_INTERVAL_MS = 50;
/** describe-unread sends 5,000 a second. */
const DESCRIBES_PER_TICK = 50;
const DESCRIBE_TICK_MS = 10;

function eventBytes(type: string, data?: Record<string, unknown>): Buffer {
  const dataBytes = data ? Buffer.from(JSON.stringify(data)) : undefined;
  const header = { type, version: "1.8.0", ...(dataBytes ? { data_length: dataBytes.byteLength } : {}) };
  return Buffer.concat([Buffer.from(`${JSON.stringify(header)}\n`), ...(dataBytes ? [dataBytes] : [])]);
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** A client that never reads: its socket is paused from the start. */
function openUnreadClient(port: number): Promise<{ socket: Socket; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port }, () => {
      socket.pause();
      resolve({ socket, closed });
    });
    const closed = new Promise<void>((done) => socket.once("close", () => done()));
    socket.once("error", reject);
    socket.on("error", () => {});
  });
}

/** Writes `bytes` once the socket's own buffer is below 1 MiB, so the client's memory stays small; false once closed. */
async function writePaced(socket: Socket, bytes: Uint8Array): Promise<boolean> {
  while (socket.writableLength > 1024 * 1024) {
    if (socket.destroyed) return false;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  if (socket.destroyed) return false;
  socket.write(bytes);
  return true;
}

/** Fetches /health every 50 ms until stopped; gives the longest answer in ms. */
function watchHealth(base: string): { stop(): Promise<number> } {
  let running = true;
  let longestMs = 0;
  const loop = (async () => {
    while (running) {
      const startedMs = performance.now();
      await fetch(`${base}/health`).then((response) => response.arrayBuffer()).catch(() => undefined);
      longestMs = Math.max(longestMs, performance.now() - startedMs);
      await new Promise((resolve) => setTimeout(resolve, HEALTH_INTERVAL_MS));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return longestMs;
    },
  };
}

interface CaseResult {
  outcome: string;
}

// Built before any case starts, so the bench's own encoding does not delay the /health probes it times.
const BIG_CHUNK_TEXT = "word ".repeat(Math.floor((4 * 1024 * 1024 - 200) / 5));
const BIG_CHUNK_RUN = Buffer.concat([eventBytes("synthesize-start"), eventBytes("synthesize-chunk", { text: BIG_CHUNK_TEXT })]);
const PADDED_DESCRIBE = eventBytes("describe", { padding: "x".repeat(1024 * 1024) });

const CASES: Record<string, { describe: string; serverArgs: string[]; run(port: number): Promise<CaseResult> }> = {
  "data-flood": {
    describe: `synthesize unread, then ${floodMiB} × describe with 1 MiB of non-text data`,
    // The default stall timeout (180 s): the unread audio keeps the handler busy for the whole case.
    serverArgs: [],
    async run(port) {
      const { socket, closed } = await openUnreadClient(port);
      let serverClosed = false;
      void closed.then(() => (serverClosed = true));
      socket.write(eventBytes("synthesize", { text: "This sentence is spoken again and again while nobody listens. ".repeat(60) }));
      const padded = PADDED_DESCRIBE;
      const deadlineMs = performance.now() + caseSeconds * 1000;
      let sent = 0;
      while (sent < floodMiB && performance.now() < deadlineMs) {
        // A server that stops reading leaves this client's buffer full: the deadline ends the case.
        const wrote = await Promise.race([writePaced(socket, padded), new Promise<boolean>((resolve) => setTimeout(() => resolve(true), Math.max(0, deadlineMs - performance.now())))]);
        if (!wrote) break;
        if (performance.now() < deadlineMs) sent++;
      }
      const taken = sent * padded.byteLength - socket.writableLength;
      socket.destroy();
      return { outcome: `${serverClosed ? "closed by server; " : ""}server took ${(Math.max(0, taken) / 1024 ** 2).toFixed(0)} MiB of ${sent} MiB sent` };
    },
  },
  "describe-unread": {
    describe: `describe for ${caseSeconds} s, replies never read`,
    serverArgs: ["--stream-stall-timeout", String(STALL_TIMEOUT_SECONDS)],
    async run(port) {
      const { socket, closed } = await openUnreadClient(port);
      let serverClosedAtMs: number | undefined;
      const startedMs = performance.now();
      void closed.then(() => (serverClosedAtMs ??= performance.now() - startedMs));
      // Paced, as a client that asks steadily: a flood all at once would meet the queue's cap instead.
      const batch = Buffer.concat(Array.from({ length: DESCRIBES_PER_TICK }, () => eventBytes("describe")));
      let describes = 0;
      while (performance.now() - startedMs < caseSeconds * 1000 && serverClosedAtMs === undefined && !socket.destroyed) {
        if (socket.writableLength < 1024 * 1024) {
          socket.write(batch);
          describes += DESCRIBES_PER_TICK;
        }
        await new Promise((resolve) => setTimeout(resolve, DESCRIBE_TICK_MS));
      }
      // A server that stopped reading shows it by the client's unsent bytes; the stall timeout then drops it.
      const unsentKiB = socket.writableLength / 1024;
      await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, (STALL_TIMEOUT_SECONDS + 7) * 1000))]);
      socket.destroy();
      const end = serverClosedAtMs === undefined ? "still open" : `closed by server after ${(serverClosedAtMs / 1000).toFixed(1)} s`;
      return { outcome: `${end}; ~${describes} describes written, ${unsentKiB.toFixed(0)} KiB left unsent` };
    },
  },
  "big-chunks": {
    describe: "8 connections × one 4 MiB synthesize-chunk of words",
    serverArgs: [],
    async run(port) {
      const clients = await Promise.all(Array.from({ length: 8 }, () => openUnreadClient(port)));
      for (const { socket } of clients) socket.write(BIG_CHUNK_RUN);
      await new Promise((resolve) => setTimeout(resolve, caseSeconds * 1000));
      for (const { socket } of clients) socket.destroy();
      return { outcome: `8 × ${(BIG_CHUNK_RUN.byteLength / 1024 ** 2).toFixed(1)} MiB sent` };
    },
  },
};

const chosen = values.cases!.split(",").map((name) => name.trim());
const revision = checkoutRevision(serverDir ?? process.cwd());
console.log(`server: ${serverDir ?? "this checkout"} ${revision}`);
console.log("| case | outcome | /health p100 ms | RSS idle → peak MiB |");
console.log("|---|---|---|---|");
for (const name of chosen) {
  const spec = CASES[name];
  if (!spec) throw new Error(`unknown case '${name}' (cases: ${Object.keys(CASES).join(", ")})`);
  const wyomingPort = await freePort();
  const server: ChildServer = await startChildServer(
    ["--engine", "classic", "--wyoming-port", String(wyomingPort), ...spec.serverArgs],
    60_000,
    serverDir ? { serverDir } : {},
  );
  try {
    const rss = server.watchRss();
    const health = watchHealth(server.base);
    const { outcome } = await spec.run(wyomingPort);
    const healthP100Ms = await health.stop();
    const peakMiB = rss.stop();
    console.log(`| ${name}: ${spec.describe} | ${outcome} | ${healthP100Ms.toFixed(0)} | ${rss.idleMiB.toFixed(0)} → ${peakMiB.toFixed(0)} |`);
  } finally {
    server.stop();
  }
}
