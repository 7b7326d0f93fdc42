/**
 * The playground as listeners hear it: N Chromium pages (headless, Debian's chromium) press Speak at once
 * against a real server process and play through the page's AudioWorklet. Per row: time to first audio as
 * the page measures it (p50 / max), underruns of its 60 ms jitter buffer per page (sum, and pages with
 * any), seconds played per page, pages that ended in an error, times pages found the server at capacity and
 * tried again after its retry_after, and the server's peak RSS. Each page listens for --seconds of audio (or
 * to the end) and then presses Stop.
 *   bun bench/playground.ts [--model <bundle>] [--pages 1,4,8] [--seconds 8] [--typed] [--markdown] [-- extra server flags]
 * Without --model it serves the offline classic engine; with one, the pages speak an uploaded voice
 * ("bench"). --typed sends the text at a language model's pace (the page's switch). The browser and the
 * server share this machine's cores.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { chromium, type Page } from "playwright-core";
import { BENCH_SENTENCE } from "./pocket-timing.ts";
import { checkoutRevision, startChildServer } from "./support/child-server.ts";
import { tablePrinter, uploadBenchVoice } from "./support/streams.ts";

const CHROMIUM = "/usr/bin/chromium";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    model: { type: "string" },
    pages: { type: "string", default: "1,4,8" },
    seconds: { type: "string", default: "8" },
    typed: { type: "boolean", default: false },
    markdown: { type: "boolean", default: false },
  },
});
if (!existsSync(CHROMIUM)) throw new Error(`bench/playground.ts drives Debian's Chromium at ${CHROMIUM}: apt-get install chromium`);
const pageCounts = values.pages!.split(",").map(Number);
const listenSeconds = Number(values.seconds);
const modelDir = values.model === undefined ? undefined : resolve(values.model);

interface PageOutcome {
  firstAudioMs: number;
  underruns: number;
  secondsPlayed: number;
  error: string | null;
  /** Times the page was told the server was at capacity and tried again after its retry_after. */
  busyRetries: number;
}

interface PlaygroundState {
  state: string;
  samplesPlayed: number;
  firstAudioMs: number | null;
  underruns: number;
  lastError: string | null;
  sampleRate: number | null;
  busyRetries?: number;
}

async function listen(page: Page): Promise<PageOutcome> {
  await page.getByRole("button", { name: "Speak", exact: true }).click();
  await page.waitForFunction(
    (seconds) => {
      const playground = (window as unknown as { voxedgePlayground: PlaygroundState }).voxedgePlayground;
      return ["done", "error"].includes(playground.state) || (playground.sampleRate !== null && playground.samplesPlayed >= seconds * playground.sampleRate);
    },
    listenSeconds,
    { timeout: (listenSeconds + 120) * 1000, polling: 100 },
  );
  const state = (await page.evaluate(() => ({ ...(window as unknown as { voxedgePlayground: PlaygroundState }).voxedgePlayground }))) as PlaygroundState;
  if (state.state === "playing") await page.getByRole("button", { name: "Stop", exact: true }).click();
  return { firstAudioMs: state.firstAudioMs ?? NaN, underruns: state.underruns, secondsPlayed: state.samplesPlayed / (state.sampleRate ?? 1), error: state.lastError, busyRetries: state.busyRetries ?? 0 };
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;

const server = await startChildServer(["--max-streams", String(Math.max(8, ...pageCounts)), ...(modelDir ? ["--model", modelDir] : []), ...positionals]);
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--autoplay-policy=no-user-gesture-required", "--no-first-run", "--disable-background-networking"] });
try {
  if (modelDir) {
    await uploadBenchVoice(server.base);
    // The voice is encoded on first use and cached; encode it now, so first audio measures speech alone.
    const warm = await fetch(`${server.base}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "Warm up.", voice: "bench", max_new_tokens: 1, response_format: "pcm" }) });
    if (warm.status !== 200) throw new Error(`warm-up speech: HTTP ${warm.status} ${await warm.text()}`);
  }
  console.log(`playground, ${modelDir ? `Pocket TTS bundle ${modelDir}` : "offline classic engine"}, ${values.typed ? "text at a language model's pace" : "text sent at once"}, ${listenSeconds} s per page, server ${checkoutRevision(resolve(`${import.meta.dir}/..`))}`);
  const row = tablePrinter(["pages", "first audio ms p50 / max", "underruns (pages with any)", "s played per page", "errors", "busy retries", "peak RSS MiB"], values.markdown!);
  for (const count of pageCounts) {
    const pages = await Promise.all(
      Array.from({ length: count }, async () => {
        const page = await browser.newPage();
        await page.goto(`${server.base}/`);
        await page.waitForFunction(() => document.querySelectorAll("#voice option").length > 1);
        await page.getByRole("textbox", { name: "Text", exact: true }).fill(BENCH_SENTENCE);
        if (values.typed) await page.getByRole("checkbox", { name: /language model's pace/ }).check();
        if (modelDir) await page.getByRole("combobox", { name: "Voice", exact: true }).selectOption("bench");
        return page;
      }),
    );
    const rss = server.watchRss();
    const outcomes = await Promise.all(pages.map(listen));
    const peakMiB = rss.stop();
    await Promise.all(pages.map((page) => page.close()));
    const firsts = outcomes.map((outcome) => outcome.firstAudioMs).sort((a, b) => a - b);
    const underruns = outcomes.reduce((sum, outcome) => sum + outcome.underruns, 0);
    const starving = outcomes.filter((outcome) => outcome.underruns > 0).length;
    const played = outcomes.reduce((sum, outcome) => sum + outcome.secondsPlayed, 0) / outcomes.length;
    const errors = outcomes.filter((outcome) => outcome.error !== null).length;
    row([count, `${Math.round(percentile(firsts, 0.5))} / ${Math.round(firsts.at(-1)!)}`, `${underruns} (${starving} / ${count})`, played.toFixed(1), errors, outcomes.reduce((sum, outcome) => sum + outcome.busyRetries, 0), Math.round(peakMiB)]);
  }
} finally {
  await browser.close();
  server.stop();
}
