/**
 * The WebSocket route under a queue flood: one session sends M input.text messages of (just under) 128 KiB of
 * "Hi. " (32 760 one-word sentences each) to a real server process. Prints how the session ended and after how
 * long, and the server's RSS idle, at its peak (sampled from /proc every 50 ms) and a few seconds after the
 * socket is gone (or when --wait-seconds ran out, if the server never closed it).
 *   bun bench/ws-queue-flood.ts [--messages 100] [--wait-seconds 20] [--engine classic] [-- extra server flags]
 * Linux only (RSS is read from /proc of the server process).
 */
import { parseArgs } from "node:util";
import { startChildServer } from "./support/child-server.ts";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    messages: { type: "string", default: "100" },
    "wait-seconds": { type: "string", default: "20" },
    engine: { type: "string", default: "classic" },
  },
});
const messageCount = Number(values.messages);
const waitMs = Number(values["wait-seconds"]) * 1000;
const SETTLE_MS = 3000;

const server = await startChildServer(["--engine", values.engine!, ...positionals]);
const { base } = server;

try {
  const rss = server.watchRss();
  const idleRssMiB = rss.idleMiB;

  const socket = new WebSocket(`${base.replace("http", "ws")}/v1/audio/speech/stream`);
  socket.binaryType = "arraybuffer";
  await new Promise((resolve) => socket.addEventListener("open", resolve, { once: true }));
  let errorMessage: string | undefined;
  socket.addEventListener("message", (event) => {
    if (typeof event.data === "string" && JSON.parse(event.data).type === "error") errorMessage ??= JSON.parse(event.data).message;
  });
  const closed = new Promise<number>((resolve) => socket.addEventListener("close", (event) => resolve(event.code), { once: true }));
  const flood = JSON.stringify({ type: "input.text", text: "Hi. ".repeat(Math.floor((128 * 1024 - 30) / 4)) });
  const startedMs = performance.now();
  socket.send(JSON.stringify({ type: "session.config", stream_audio: true }));
  for (let i = 0; i < messageCount; i++) socket.send(flood);
  const closeCode = await Promise.race([closed, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), waitMs))]);
  const endedMs = performance.now() - startedMs;
  if (closeCode === undefined) socket.close();
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const peakRssMiB = rss.stop();
  const afterRssMiB = server.rssMiB();

  console.log(`| messages × bytes | ended | after s | error | RSS idle → peak → ${SETTLE_MS / 1000} s later MiB |`);
  console.log(`|---|---|---|---|---|`);
  console.log(
    `| ${messageCount} × ${Buffer.byteLength(flood)} | ${closeCode === undefined ? "not closed by the server" : `close ${closeCode}`} | ${(endedMs / 1000).toFixed(2)} | ${errorMessage ? errorMessage.slice(0, 40) + "…" : "none"} | ${idleRssMiB.toFixed(0)} → ${peakRssMiB.toFixed(0)} → ${afterRssMiB.toFixed(0)} |`,
  );
} finally {
  server.stop();
}
