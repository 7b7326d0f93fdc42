/**
 * What one client can do to everyone else: each case runs against a fresh server (the offline engine, on
 * loopback) while /health is fetched every 50 ms and the server's resident memory read every 100 ms, and the
 * table says how long /health waited at worst (p100) and how far RSS grew. A case that holds the event loop
 * shows as a /health p100 of seconds; one that buffers for a client shows as RSS.
 *
 *   bun bench/robustness.ts [--server-dir <checkout>] [--cases "name,name"] [--label after]
 *
 * `--server-dir` runs another checkout's server (an older commit, for a before/after table in one run).
 * Every case is bounded in time (`--case-seconds`, 120 by default) and stops by itself.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    "server-dir": { type: "string", default: resolve(import.meta.dir, "..") },
    cases: { type: "string" },
    label: { type: "string", default: "this checkout" },
    "case-seconds": { type: "string", default: "120" },
  },
});
const serverDir = resolve(values["server-dir"]!);
const caseSeconds = Number(values["case-seconds"]);

interface Server {
  base: string;
  pid: number;
  wyomingPort: number;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((done) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const port = (probe.address() as { port: number }).port;
      probe.close(() => done(port));
    });
  });
}

async function startServer(): Promise<Server> {
  const speakerDir = mkdtempSync(join(tmpdir(), "voxedge-robustness-"));
  const wyomingPort = await freePort();
  const bun = join(serverDir, "node_modules", ".bin", "bun");
  const child = spawn(bun, ["src/main.ts", "serve", "--engine", "classic", "--host", "127.0.0.1", "--port", "0", "--speaker-dir", speakerDir, "--wyoming-port", String(wyomingPort)], {
    cwd: serverDir,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (chunk) => (output += chunk));
  child.stderr!.on("data", (chunk) => (output += chunk));
  const deadline = Date.now() + 60_000;
  for (;;) {
    const base = /"message":"listening","url":"(http:\/\/[^"]+)"/.exec(output)?.[1];
    if (base && (await fetch(`${base}/health/ready`).catch(() => undefined))?.status === 200) {
      return {
        base,
        pid: child.pid!,
        wyomingPort,
        stop: async () => {
          child.kill("SIGKILL");
          await new Promise((done) => child.once("exit", done));
          rmSync(speakerDir, { recursive: true, force: true });
        },
      };
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`server did not start: ${output.slice(-2000)}`);
    }
    await Bun.sleep(100);
  }
}

function residentMiB(pid: number): number {
  try {
    const line = readFileSync(`/proc/${pid}/status`, "utf-8").match(/VmRSS:\s+(\d+) kB/);
    return line ? Number(line[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** /health latency every 50 ms and RSS every 100 ms until stopped. */
function watch(server: Server) {
  const latenciesMs: number[] = [];
  let peakRssMiB = residentMiB(server.pid);
  const startRssMiB = peakRssMiB;
  let running = true;
  const health = (async () => {
    while (running) {
      const start = performance.now();
      await fetch(`${server.base}/health`, { signal: AbortSignal.timeout(caseSeconds * 1000) }).then((r) => r.arrayBuffer()).catch(() => undefined);
      latenciesMs.push(performance.now() - start);
      await Bun.sleep(50);
    }
  })();
  const rss = setInterval(() => (peakRssMiB = Math.max(peakRssMiB, residentMiB(server.pid))), 100);
  return {
    async stop() {
      running = false;
      await health;
      clearInterval(rss);
      const sorted = [...latenciesMs].sort((a, b) => a - b);
      return { p50: sorted[Math.floor(sorted.length / 2)] ?? 0, p100: sorted.at(-1) ?? 0, startRssMiB, peakRssMiB };
    },
  };
}

const LONG_TEXT = (chars: number) => {
  const sentence = "The quick brown fox jumps over the lazy dog while the band plays on. ";
  return sentence.repeat(Math.ceil(chars / sentence.length)).slice(0, chars);
};

async function speech(base: string, body: Record<string, unknown>, path = "/v1/audio/speech"): Promise<string> {
  const response = await fetch(`${base}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal: AbortSignal.timeout(caseSeconds * 1000) });
  const bytes = (await response.arrayBuffer()).byteLength;
  return `${response.status}, ${(bytes / 1024).toFixed(0)} KiB`;
}

async function streams(base: string, count: number, format: string): Promise<string> {
  const start = performance.now();
  const statuses = await Promise.all(
    Array.from({ length: count }, async () => {
      const response = await fetch(`${base}/v1/audio/speech`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ input: LONG_TEXT(300), response_format: format, stream_format: "audio" }),
        signal: AbortSignal.timeout(caseSeconds * 1000),
      }).catch(() => undefined);
      if (!response) return "timeout";
      await response.arrayBuffer().catch(() => undefined);
      return String(response.status);
    }),
  );
  const byStatus = Object.entries(statuses.reduce<Record<string, number>>((counts, s) => ((counts[s] = (counts[s] ?? 0) + 1), counts), {}));
  return `${byStatus.map(([s, n]) => `${n}× ${s}`).join(" ")} in ${((performance.now() - start) / 1000).toFixed(1)} s`;
}

/** Opens `count` connections that each send a GET and never read the answer, for `holdMs`. */
async function unreadGets(base: string, path: string, count: number, holdMs: number): Promise<string> {
  const { hostname, port } = new URL(base);
  const sockets: Socket[] = [];
  for (let i = 0; i < count; i++) {
    const socket = connect({ host: hostname, port: Number(port) });
    socket.on("error", () => undefined);
    socket.write(`GET ${path} HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`);
    socket.pause();
    sockets.push(socket);
  }
  await Bun.sleep(holdMs);
  for (const socket of sockets) socket.destroy();
  return `${count} unread GETs held ${holdMs / 1000} s`;
}

function wyomingEvent(type: string, data?: Record<string, unknown>, extraData?: string): Buffer {
  const dataBytes = data ? Buffer.from(JSON.stringify(extraData ? { ...data, filler: extraData } : data)) : undefined;
  const header: Record<string, unknown> = { type, version: "1.8.0" };
  if (dataBytes) header.data_length = dataBytes.byteLength;
  return Buffer.concat([Buffer.from(`${JSON.stringify(header)}\n`), ...(dataBytes ? [dataBytes] : [])]);
}

function wyomingConnect(port: number): Promise<Socket> {
  return new Promise((done, fail) => {
    const socket = connect({ host: "127.0.0.1", port }, () => done(socket));
    socket.once("error", fail);
  });
}

/** Writes `event` until `totalBytes` are written or `ms` pass, waiting for the socket to drain as a client would. */
async function floodWyoming(port: number, event: Buffer, totalBytes: number, ms: number, read: boolean, prelude?: Buffer): Promise<string> {
  const socket = await wyomingConnect(port);
  if (prelude) socket.write(prelude);
  socket.on("error", () => undefined);
  if (!read) socket.pause();
  else socket.on("data", () => undefined);
  const deadline = Date.now() + ms;
  let written = 0;
  while (written < totalBytes && Date.now() < deadline && !socket.destroyed) {
    if (!socket.write(event)) {
      const drained = await Promise.race([new Promise((done) => socket.once("drain", () => done(true))), Bun.sleep(Math.max(0, deadline - Date.now())).then(() => false)]);
      if (!drained) break;
    }
    written += event.byteLength;
  }
  const closed = socket.destroyed || socket.readableEnded;
  socket.destroy();
  return `${(written / 2 ** 20).toFixed(0)} MiB written${closed ? ", dropped by the server" : ""}`;
}

async function wyomingChunks(port: number, connections: number, textBytes: number): Promise<string> {
  const text = "word ".repeat(Math.ceil(textBytes / 5)).slice(0, textBytes);
  const outcomes = await Promise.all(
    Array.from({ length: connections }, async () => {
      const socket = await wyomingConnect(port);
      let received = "";
      socket.on("data", (bytes) => (received = (received + bytes.toString("latin1")).slice(-4096)));
      socket.on("error", () => undefined);
      socket.write(wyomingEvent("synthesize-start", { voice: {} }));
      socket.write(wyomingEvent("synthesize-chunk", { text }));
      socket.write(wyomingEvent("synthesize-stop", {}));
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline && !/"type":\s*"(synthesize-stopped|error)"/.test(received) && !socket.destroyed) await Bun.sleep(50);
      socket.destroy();
      return /"type":\s*"error"/.test(received) ? "error" : /synthesize-stopped/.test(received) ? "stopped" : "no answer";
    }),
  );
  return `${connections} × ${(textBytes / 2 ** 20).toFixed(0)} MiB chunk: ${[...new Set(outcomes)].join(", ")}`;
}

async function socketFlood(url: string, first: string | undefined, message: string, count: number): Promise<string> {
  const socket = new WebSocket(url);
  let replies = 0;
  let closeCode = 0;
  socket.onmessage = () => replies++;
  const closed = new Promise<void>((done) => (socket.onclose = (event) => ((closeCode = event.code), done())));
  await new Promise((done, fail) => ((socket.onopen = done), (socket.onerror = fail)));
  if (first) socket.send(first);
  for (let i = 0; i < count && socket.readyState === WebSocket.OPEN; i++) {
    socket.send(message);
    if (i % 1000 === 999) await Bun.sleep(0);
  }
  await Promise.race([closed, Bun.sleep(5000)]);
  socket.close();
  return `${count} sent, ${replies} replies${closeCode ? `, closed ${closeCode}` : ""}`;
}

async function scripts(base: string): Promise<string> {
  const texts = ["Привет мир", "Příliš žluťoučký kůň", "नमस्ते दुनिया", "こんにちは世界", "aé".repeat(17), "¥£€…"];
  const statuses = await Promise.all(texts.map((input) => fetch(`${base}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input }) }).then(async (r) => (await r.arrayBuffer(), r.status))));
  return `statuses ${statuses.join(" ")}`;
}

const CASES: Record<string, (server: Server) => Promise<string>> = {
  "file aac 4096 chars": (s) => speech(s.base, { input: LONG_TEXT(4096), response_format: "aac" }),
  "file mp3 4096 chars": (s) => speech(s.base, { input: LONG_TEXT(4096), response_format: "mp3" }),
  "file opus 4096 chars": (s) => speech(s.base, { input: LONG_TEXT(4096), response_format: "opus" }),
  "file wav 4096 chars": (s) => speech(s.base, { input: LONG_TEXT(4096), response_format: "wav" }),
  "batch 8 × 500 chars aac": (s) => speech(s.base, { response_format: "aac", items: Array.from({ length: 8 }, () => ({ input: LONG_TEXT(500) })) }, "/v1/audio/speech/batch"),
  "ElevenLabs with-timestamps mp3_44100_192": (s) => speech(s.base, { text: LONG_TEXT(4096) }, "/elevenlabs/v1/text-to-speech/slt/with-timestamps?output_format=mp3_44100_192"),
  "8 aac streams": (s) => streams(s.base, 8, "aac"),
  "32 aac streams": (s) => streams(s.base, 32, "aac"),
  "100 unread GETs of ort wasm": (s) => unreadGets(s.base, "/playground/ort/ort-wasm-simd-threaded.jsep.wasm", 100, 10_000),
  // While the connection's handler is busy speaking, so what arrives waits in its inbox.
  "Wyoming 4 MiB data fields": (s) => floodWyoming(s.wyomingPort, wyomingEvent("transcript", { text: "" }, "x".repeat(4 * 2 ** 20 - 4096)), 2048 * 2 ** 20, 20_000, true, wyomingEvent("synthesize", { text: LONG_TEXT(4000) })),
  "Wyoming describe never read": (s) => floodWyoming(s.wyomingPort, wyomingEvent("describe"), 64 * 2 ** 20, 20_000, false),
  "Wyoming 8 × 4 MiB synthesize-chunk": (s) => wyomingChunks(s.wyomingPort, 8, 4 * 2 ** 20 - 4096),
  "WebSocket 100k bad messages": (s) => socketFlood(`${s.base.replace("http", "ws")}/v1/audio/speech/stream`, JSON.stringify({ type: "session.config", voice: "default" }), "{not json", 100_000),
  "ElevenLabs 1 MiB context_id": (s) => socketFlood(`${s.base.replace("http", "ws")}/elevenlabs/v1/text-to-speech/slt/multi-stream-input`, JSON.stringify({ text: " ", context_id: "c".repeat(2 ** 20) }), JSON.stringify({ text: "Hi. ", context_id: "c".repeat(2 ** 20), flush: true }), 200),
  "offline engine other scripts": (s) => scripts(s.base),
};

const chosen = values.cases ? values.cases.split(",").map((name) => name.trim()) : Object.keys(CASES);
const unknown = chosen.filter((name) => !CASES[name]);
if (unknown.length) throw new Error(`unknown cases: ${unknown.join(", ")}; known: ${Object.keys(CASES).join(", ")}`);

console.log(`server: ${serverDir} (${values.label}); /health every 50 ms, RSS every 100 ms; each case at most ${caseSeconds} s\n`);
console.log("| case | outcome | /health p50 ms | /health p100 ms | RSS start → peak MiB |");
console.log("|---|---|---:|---:|---:|");
for (const name of chosen) {
  const server = await startServer();
  const watcher = watch(server);
  let outcome: string;
  try {
    outcome = await Promise.race([CASES[name]!(server), Bun.sleep(caseSeconds * 1000).then(() => `cut at ${caseSeconds} s`)]);
  } catch (error) {
    outcome = `failed: ${(error as Error).message.slice(0, 80)}`;
  }
  const figures = await watcher.stop();
  await server.stop();
  console.log(`| ${name} | ${outcome} | ${figures.p50.toFixed(0)} | ${figures.p100.toFixed(0)} | ${figures.startRssMiB.toFixed(0)} → ${figures.peakRssMiB.toFixed(0)} |`);
}
