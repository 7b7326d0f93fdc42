/**
 * Long-form text through a real server process (--max-input-chars 100000): one input of C characters as
 * a raw stream, SSE and a file, each read as it arrives and counted, never held. Prints time to the first
 * and last byte, seconds of audio and the server's peak RSS (sampled from /proc every 50 ms): a stream's
 * peak stays near idle whatever the length, a file holds the whole utterance.
 *   bun bench/long-input.ts [--chars 60000] [--modes audio,sse] (a file past 4096 characters is refused: long-form text must stream) [--engine classic]
 * Linux only (RSS is read from /proc of the server process).
 */
import { parseArgs } from "node:util";
import { startChildServer } from "./support/child-server.ts";

const { values } = parseArgs({
  options: {
    chars: { type: "string", default: "60000" },
    modes: { type: "string", default: "audio,sse" },
    engine: { type: "string", default: "classic" },
  },
});
const chars = Number(values.chars);
const modes = values.modes!.split(",");

const SENTENCES = [
  "The quick brown fox jumps over the lazy dog.",
  "Please call Stella and ask her to bring these things with her from the store.",
  "It was a bright cold day in April, and the clocks were striking thirteen.",
];

function inputOf(length: number): string {
  let text = "";
  for (let index = 0; text.length < length; index++) text += `${SENTENCES[index % SENTENCES.length]} `;
  return text.slice(0, length).trim();
}

const BODIES: Record<string, Record<string, unknown>> = {
  audio: { stream_format: "audio", response_format: "pcm" },
  sse: { stream_format: "sse", response_format: "pcm" },
  file: { response_format: "pcm" },
};

const server = await startChildServer(["--engine", values.engine!, "--max-input-chars", "100000"]);
const { base } = server;

try {
  console.log(`| mode | chars | status | first byte s | last byte s | response MB | RSS idle → peak MiB |`);
  console.log(`|---|---|---|---|---|---|---|`);
  for (const mode of modes) {
    const rss = server.watchRss();
    const idleRssMiB = rss.idleMiB;
    const startedMs = performance.now();
    const response = await fetch(`${base}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: inputOf(chars), ...BODIES[mode] }) });
    let responseBytes = 0;
    let firstByteMs: number | undefined;
    for await (const chunk of response.body!) {
      firstByteMs ??= performance.now() - startedMs;
      responseBytes += chunk.byteLength;
    }
    const lastByteMs = performance.now() - startedMs;
    const peakRssMiB = rss.stop();
    console.log(
      `| ${mode} | ${chars} | ${response.status} | ${((firstByteMs ?? lastByteMs) / 1000).toFixed(2)} | ${(lastByteMs / 1000).toFixed(1)} | ${(responseBytes / 1e6).toFixed(1)} | ${idleRssMiB.toFixed(0)} → ${peakRssMiB.toFixed(0)} |`,
    );
  }
} finally {
  server.stop();
}
