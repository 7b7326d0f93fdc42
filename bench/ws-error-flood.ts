/**
 * Erroneous WebSocket messages in a flood, on each WebSocket route of a real server process: while a client
 * process sends N messages the server answers with an error (and, before any budget, keeps the socket
 * open for), this process asks /health over and over (for the flood and at least PROBE_SECONDS, so what the
 * server still does after a close is counted); the table gives /health's latency (p50 and p100), how the
 * flood ended and after how long, how many replies came back and how many bytes they held, and the
 * server's peak RSS.
 *   bun bench/ws-error-flood.ts [--messages 200000] [--big-context-messages 32] [--only keep-alives,…] [-- extra server flags]
 * Linux only (RSS is read from /proc of the server process).
 */
import { spawn } from "node:child_process";
import { parseArgs } from "node:util";
import { checkoutRevision, startChildServer } from "./support/child-server.ts";

interface Surface {
  name: string;
  path: string;
  /** The message sent N times. */
  message(): string;
  /** Sent once first, to open what the flood then hits. */
  opening?: string;
}

const ONE_MIB = 1024 * 1024;
const PROBE_SECONDS = 3;
const SURFACES: Surface[] = [
  { name: "native: unknown message type", path: "/v1/audio/speech/stream", message: () => JSON.stringify({ type: "nope" }) },
  { name: "native: not JSON", path: "/v1/audio/speech/stream", message: () => "{" },
  { name: "multi-stream-input: close_context of no context", path: "/elevenlabs/v1/text-to-speech/rms/multi-stream-input", message: () => JSON.stringify({ context_id: "nope", close_context: true }) },
  { name: "multi-stream-input: a sixth context", path: "/elevenlabs/v1/text-to-speech/rms/multi-stream-input", opening: ["a", "b", "c", "d", "e"].map((contextId) => JSON.stringify({ text: " ", context_id: contextId })).join("\n"), message: () => JSON.stringify({ text: " ", context_id: "f" }) },
  // Valid, and so not budgeted: what a flood costs when every message is one the protocol allows.
  { name: "multi-stream-input: keep-alives (valid)", path: "/elevenlabs/v1/text-to-speech/rms/multi-stream-input", opening: JSON.stringify({ text: " ", context_id: "a" }), message: () => JSON.stringify({ text: "", context_id: "a" }) },
  { name: "multi-stream-input: 1 MiB context_id", path: "/elevenlabs/v1/text-to-speech/rms/multi-stream-input", message: () => JSON.stringify({ context_id: "x".repeat(ONE_MIB), close_context: true }) },
];

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    messages: { type: "string", default: "200000" },
    "big-context-messages": { type: "string", default: "32" },
    only: { type: "string" },
    flood: { type: "string" },
    url: { type: "string" },
    count: { type: "string" },
  },
});

if (values.flood !== undefined) {
  // The client process: sends the flood as fast as the socket takes it, counts the replies, prints one JSON line.
  const surface = SURFACES[Number(values.flood)]!;
  const count = Number(values.count);
  const socket = new WebSocket(values.url!);
  await new Promise((resolve, reject) => {
    socket.addEventListener("open", resolve, { once: true });
    socket.addEventListener("error", reject, { once: true });
  });
  let replies = 0;
  let replyBytes = 0;
  socket.addEventListener("message", (event) => {
    replies++;
    replyBytes += typeof event.data === "string" ? Buffer.byteLength(event.data) : (event.data as ArrayBuffer).byteLength;
  });
  const closed = new Promise<string>((resolve) => socket.addEventListener("close", (event) => resolve(`close ${event.code}${event.reason ? ` "${event.reason.slice(0, 40)}"` : ""}`), { once: true }));
  const startedMs = performance.now();
  for (const line of surface.opening?.split("\n") ?? []) socket.send(line);
  const message = surface.message();
  let sent = 0;
  let closedEarly = false;
  void closed.then(() => (closedEarly = true));
  while (sent < count && !closedEarly) {
    // In slices, so the close (when the server sends one) is seen.
    for (let slice = 0; slice < 1000 && sent < count; slice++, sent++) socket.send(message);
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  // What the server does with the last messages: at most 10 s to answer or close.
  const ending = await Promise.race([closed, new Promise<string>((resolve) => setTimeout(() => resolve("still open after 10 s"), 10_000))]);
  console.log(JSON.stringify({ sent, replies, replyBytes, ending, seconds: (performance.now() - startedMs) / 1000 }));
  socket.close();
  process.exit(0);
}

const messageCount = Number(values.messages);
const bigContextMessages = Number(values["big-context-messages"]);
const server = await startChildServer(["--engine", "classic", ...positionals]);
const percentile = (sorted: number[], fraction: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))] ?? Number.NaN;

try {
  console.log(`erroneous WebSocket messages in a flood (${process.versions.bun ? `bun ${process.versions.bun}` : `node ${process.version}`}, ${checkoutRevision(process.cwd())})`);
  console.log("| surface | messages sent | ended | after s | replies (MiB) | /health p50 / p100 ms (probes) | RSS idle → peak MiB |");
  console.log("|---|---|---|---|---|---|---|");
  for (const [index, surface] of SURFACES.entries()) {
    if (values.only && !values.only.split(",").some((part) => surface.name.includes(part))) continue;
    const count = surface.name.includes("1 MiB") ? bigContextMessages : messageCount;
    const rss = server.watchRss();
    const client = spawn(process.execPath, [import.meta.path, "--flood", String(index), "--url", `${server.base.replace("http", "ws")}${surface.path}`, "--count", String(count)], { stdio: ["ignore", "pipe", "inherit"] });
    let output = "";
    client.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const clientEnded = new Promise<void>((resolve) => client.on("exit", () => resolve()));
    let running = true;
    void clientEnded.then(() => (running = false));
    const latenciesMs: number[] = [];
    const probeUntilMs = performance.now() + PROBE_SECONDS * 1000;
    while (running || performance.now() < probeUntilMs) {
      const startedMs = performance.now();
      await fetch(`${server.base}/health`).then((response) => response.arrayBuffer());
      latenciesMs.push(performance.now() - startedMs);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const peakMiB = rss.stop();
    const result = JSON.parse(output.trim().split("\n").at(-1) ?? "{}") as { sent: number; replies: number; replyBytes: number; ending: string; seconds: number };
    latenciesMs.sort((a, b) => a - b);
    console.log(
      `| ${surface.name} | ${result.sent} | ${result.ending} | ${result.seconds.toFixed(2)} | ${result.replies} (${(result.replyBytes / ONE_MIB).toFixed(1)}) | ${percentile(latenciesMs, 0.5).toFixed(0)} / ${latenciesMs.at(-1)!.toFixed(0)} (${latenciesMs.length}) | ${rss.idleMiB.toFixed(0)} → ${peakMiB.toFixed(0)} |`,
    );
  }
} finally {
  server.stop();
}
