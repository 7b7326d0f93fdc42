/**
 * Text normalization: how many cases of the table in test/text/normalize/cases.ts pass under the lenient comparison,
 * per class, and how long normalization takes per 1,000 characters (median of several runs over the whole table).
 * Run: bun bench/text-normalization.ts
 */
import { normalizeText } from "../src/text/normalize/index.ts";
import { CASES, CLASSES } from "../test/text/normalize/cases.ts";
import { lenientEqual } from "../test/text/normalize/lenient.ts";
import { readAloud } from "../test/text/normalize/read-aloud.ts";

const rows = CLASSES.map((caseClass) => {
  const cases = CASES.filter((row) => row.class === caseClass);
  const passed = cases.filter((row) => lenientEqual(readAloud(row.written), row.spoken)).length;
  return { class: caseClass, cases: cases.length, passed, percent: ((100 * passed) / cases.length).toFixed(1) };
});
const passed = rows.reduce((sum, row) => sum + row.passed, 0);
rows.push({ class: "all" as (typeof CLASSES)[number], cases: CASES.length, passed, percent: ((100 * passed) / CASES.length).toFixed(1) });
console.table(rows);

const characters = CASES.reduce((sum, row) => sum + row.written.length, 0);
const RUNS = 15;
const REPEATS = 20;
for (let warm = 0; warm < 5; warm++) for (const row of CASES) normalizeText(row.written);
const perThousand: number[] = [];
for (let run = 0; run < RUNS; run++) {
  const start = performance.now();
  for (let repeat = 0; repeat < REPEATS; repeat++) for (const row of CASES) normalizeText(row.written);
  perThousand.push(((performance.now() - start) / (REPEATS * characters)) * 1000);
}
perThousand.sort((a, b) => a - b);
const median = perThousand[Math.floor(RUNS / 2)]!;
console.log(`normalization: ${median.toFixed(3)} ms per 1,000 characters (median of ${RUNS} runs over ${characters} characters, ${CASES.length} cases)`);

// The worst inputs found: long runs of digits and separators, which some rules retry at every position. Read in
// pieces (MAX_PIECE_CHARS), their time grows with their length; the longest speech input is 100,000 characters.
// Markdown-heavy runs go through the whole reading (markdown, then normalization), as a request's text does.
const WORST_UNITS = ["1/", "1-", "1,", "1:", "1 ", "$1.5k-", "(1) ", "www.a", "**a** ", "- [x](y)\n", "| 1 | 2 |\n", "`a` _b_ ", "```\nx\n", "<break/>"];
const worst = WORST_UNITS.map((unit) => {
  const read = /[*_`|[<\n]/.test(unit) ? readAloud : normalizeText;
  const times = [4_000, 100_000].map((length) => {
    const text = unit.repeat(Math.ceil(length / unit.length)).slice(0, length);
    read(text);
    const start = performance.now();
    read(text);
    return (performance.now() - start).toFixed(1);
  });
  return { run: JSON.stringify(unit), "ms at 4,000 chars": times[0], "ms at 100,000 chars": times[1] };
});
console.table(worst);

// The event loop while a 100,000-character answer is read for a request: read at once (utteranceJob) and in
// slices (utteranceJobInSlices, what the speech service does): the longest gap between zero-delay timer ticks.
{
  const { utteranceJob, utteranceJobInSlices } = await import("../src/speech/job.ts");
  const { DEFAULT_MARKDOWN_READING } = await import("../src/text/markdown.ts");
  const { ToneModel } = await import("../test/support/tone-model.ts");
  const model = new ToneModel();
  const unit = "## Costs\n- It costs **$19.99** on 03/04/2026 at 10:30 pm, see [docs](https://x.y).\n| a | 1,234 |\n";
  const text = unit.repeat(Math.ceil(100_000 / unit.length)).slice(0, 100_000);
  const request = { text, markdown: DEFAULT_MARKDOWN_READING, extraParams: {} };
  const longestStall = async (read: () => unknown): Promise<{ stallMs: number; totalMs: number }> => {
    let last = performance.now();
    let longest = 0;
    const timer = setInterval(() => {
      const now = performance.now();
      longest = Math.max(longest, now - last);
      last = now;
    }, 0);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const start = performance.now();
    last = start;
    await read();
    const end = performance.now();
    longest = Math.max(longest, end - last);
    clearInterval(timer);
    return { stallMs: longest, totalMs: end - start };
  };
  const rows = [];
  for (const [name, read] of [["at once (utteranceJob)", () => utteranceJob(model, request)], ["in slices (utteranceJobInSlices)", () => utteranceJobInSlices(model, request)]] as const) {
    const runs = [];
    for (let run = 0; run < 5; run++) runs.push(await longestStall(read));
    runs.sort((a, b) => a.stallMs - b.stallMs);
    const median = runs[2]!;
    rows.push({ reading: name, "longest event-loop stall, ms (median of 5)": median.stallMs.toFixed(1), "total, ms": median.totalMs.toFixed(1) });
  }
  console.table(rows);
}
