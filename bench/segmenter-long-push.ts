/**
 * The text segmenter given one long push (as a Wyoming synthesize-chunk or a WebSocket input.text could
 * before their caps), per kind of text: milliseconds for push + flush, and the segments made. A cost linear in
 * the text keeps every row within a few hundred ms at 4 MiB; a search that rescans the buffer per segment
 * takes seconds to a minute on the texts without sentence ends.
 *   bun bench/segmenter-long-push.ts [--mib 4] [--checkout ../wt-before]   (--checkout: that checkout's src/text/segmenter.ts)
 */
import { resolve } from "node:path";
import { parseArgs } from "node:util";

const { values } = parseArgs({ options: { mib: { type: "string", default: "4" }, checkout: { type: "string" } } });
const totalChars = Math.round(Number(values.mib) * 1024 * 1024);
const checkout = resolve(values.checkout ?? ".");
const { TextSegmenter } = (await import(`${checkout}/src/text/segmenter.ts`)) as typeof import("../src/text/segmenter.ts");

const fill = (unit: string) => unit.repeat(Math.floor(totalChars / unit.length));
const TEXTS: Record<string, string> = {
  "sentences ('The kitchen lights are on. ')": fill("The kitchen lights are on. "),
  "one-word sentences ('Hi. ')": fill("Hi. "),
  "words, no sentence end": fill("word "),
  "a word per line": fill("word\n"),
  "a run of dots": fill("."),
  "one giant word": fill("a"),
  "abbreviations ('Mr. ')": fill("Mr. "),
  "commas ('a, ')": fill("a, "),
};

console.log(`segmenter: ${checkout}; one push of ${values.mib} MiB (${totalChars} characters)`);
console.log("| text | granularity | segments | push + flush ms |");
console.log("|---|---|---|---|");
for (const [name, text] of Object.entries(TEXTS)) {
  for (const granularity of ["sentence", "clause"] as const) {
    const segmenter = new TextSegmenter(granularity);
    const startedMs = performance.now();
    const segmentCount = segmenter.push(text).length + segmenter.flush().length;
    console.log(`| ${name} | ${granularity} | ${segmentCount} | ${(performance.now() - startedMs).toFixed(0)} |`);
  }
}
