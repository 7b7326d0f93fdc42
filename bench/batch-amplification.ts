/**
 * The batch route under an amplifying request: N items of C characters each, sent to a real server
 * process, the response read as it arrives and counted, never held. Prints the response size, time to
 * the first and last byte, the server's peak RSS (sampled from /proc every 50 ms) and the slowest /health
 * answer seen while the batch ran (probed every 100 ms): a long one means the event loop was blocked.
 *   bun bench/batch-amplification.ts [--items 32] [--chars 4090] [--engine classic] [--format wav]
 *     [--extra '{"eos_threshold":1e9}'] [-- extra server flags, e.g. --batch-max-audio-seconds 600]
 * Linux only (RSS is read from /proc of the server process).
 */
import { parseArgs } from "node:util";
import { startChildServer } from "./support/child-server.ts";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    items: { type: "string", default: "32" },
    chars: { type: "string", default: "4090" },
    engine: { type: "string", default: "classic" },
    format: { type: "string", default: "wav" },
    extra: { type: "string" },
  },
});
const itemCount = Number(values.items);
const charsPerItem = Number(values.chars);

const SENTENCES = [
  "The quick brown fox jumps over the lazy dog.",
  "Please call Stella and ask her to bring these things with her from the store.",
  "It was a bright cold day in April, and the clocks were striking thirteen.",
];

function inputOf(chars: number): string {
  let text = "";
  for (let index = 0; text.length < chars; index++) text += `${SENTENCES[index % SENTENCES.length]} `;
  return text.slice(0, chars).trim();
}

const server = await startChildServer(["--engine", values.engine!, ...positionals]);
const { base } = server;

try {
  const rss = server.watchRss();
  const idleRssMiB = rss.idleMiB;
  let slowestHealthMs = 0;
  let probing = true;
  const probeHealth = (async () => {
    while (probing) {
      const startedMs = performance.now();
      await (await fetch(`${base}/health`)).arrayBuffer();
      slowestHealthMs = Math.max(slowestHealthMs, performance.now() - startedMs);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();

  const body = {
    response_format: values.format,
    ...(values.extra ? { extra_params: JSON.parse(values.extra) } : {}),
    items: Array.from({ length: itemCount }, () => ({ input: inputOf(charsPerItem) })),
  };
  const startedMs = performance.now();
  const response = await fetch(`${base}/v1/audio/speech/batch`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  let responseBytes = 0;
  let firstByteMs: number | undefined;
  let tail = "";
  const decoder = new TextDecoder();
  for await (const chunk of response.body!) {
    firstByteMs ??= performance.now() - startedMs;
    responseBytes += chunk.byteLength;
    tail = (tail + decoder.decode(chunk, { stream: true })).slice(-200);
  }
  const lastByteMs = performance.now() - startedMs;
  probing = false;
  await probeHealth;
  const peakRssMiB = rss.stop();
  const totals = /"total":(\d+),"succeeded":(\d+),"failed":(\d+)/.exec(tail);

  console.log(`| items × chars | status | response MB | succeeded/failed | first byte s | last byte s | RSS idle → peak MiB | slowest /health ms |`);
  console.log(`|---|---|---|---|---|---|---|---|`);
  console.log(
    `| ${itemCount} × ${charsPerItem} | ${response.status} | ${(responseBytes / 1e6).toFixed(1)} | ${totals ? `${totals[2]}/${totals[3]}` : "?"} | ${((firstByteMs ?? lastByteMs) / 1000).toFixed(1)} | ${(lastByteMs / 1000).toFixed(1)} | ${idleRssMiB.toFixed(0)} → ${peakRssMiB.toFixed(0)} | ${slowestHealthMs.toFixed(0)} |`,
  );
} finally {
  server.stop();
}
