/**
 * Does the offline engine (Flite) read written forms better with our text normalization or with its own?
 * Decides what apply_text_normalization "auto" means for it (src/speech/text-normalization.ts).
 *
 *   ./node_modules/.bin/bun bench/offline-engine-normalization-wer.ts [--voice rms] [--verbose] [--corpus written-forms|llm]
 *
 * `--corpus llm`: answers as an LLM writes them (markdown, versions, titles, years, units), read before this
 * server read markdown (normalizeText alone) and now (markdown read, then normalized: test/text/normalize/read-aloud.ts).
 *
 * Speaks WRITTEN_FORM_SENTENCES through the classic model twice, as written and normalized (normalizeText),
 * transcribes each with pocketsphinx (test/support/asr.ts, as bench/offline-engine-wer.ts does) and scores the
 * transcripts against a hand-written spoken reference. Where a written form has more than one correct reading
 * the reference takes the commonest ("nineteen ninety nine", not "one thousand nine hundred ninety nine"), and
 * "and" is dropped from reference and transcript alike, so neither reading is charged for it.
 */
import { createClassicModel } from "../src/models/classic/model.ts";
import { normalizeText } from "../src/text/normalize/index.ts";
import { readAloud } from "../test/text/normalize/read-aloud.ts";
import { transcribe } from "../test/support/asr.ts";
import { normalizeWords, wordEditDistance } from "../test/support/wer.ts";

/** Sentences full of money, dates, times and years, with how they are said. */
const WRITTEN_FORM_SENTENCES: ReadonlyArray<{ written: string; spoken: string }> = [
  { written: "The ticket costs $19.99 today.", spoken: "the ticket costs nineteen dollars ninety nine cents today" },
  { written: "Rent went up to $1,250 last month.", spoken: "rent went up to one thousand two hundred fifty dollars last month" },
  { written: "She paid £3.50 for the coffee.", spoken: "she paid three pounds fifty pence for the coffee" },
  { written: "The fine was €75 in the end.", spoken: "the fine was seventy five euros in the end" },
  { written: "He owes me $2.05 for the bus.", spoken: "he owes me two dollars five cents for the bus" },
  { written: "The meeting is on 03/04/2026 in the morning.", spoken: "the meeting is on march fourth twenty twenty six in the morning" },
  { written: "We moved here on 12/25/2019 with the kids.", spoken: "we moved here on december twenty fifth twenty nineteen with the kids" },
  { written: "The report is due 07/01/2027 at noon.", spoken: "the report is due july first twenty twenty seven at noon" },
  { written: "The train leaves at 10:30 pm from platform two.", spoken: "the train leaves at ten thirty p m from platform two" },
  { written: "Wake me up at 6:45 am tomorrow.", spoken: "wake me up at six forty five a m tomorrow" },
  { written: "The store opens at 9:15 every day.", spoken: "the store opens at nine fifteen every day" },
  { written: "The bridge was finished in 1999 after years of work.", spoken: "the bridge was finished in nineteen ninety nine after years of work" },
  { written: "My grandmother was born in 1948 in a small town.", spoken: "my grandmother was born in nineteen forty eight in a small town" },
  { written: "The law changed in 2008 and again in 2015.", spoken: "the law changed in two thousand eight and again in twenty fifteen" },
  { written: "On 11/05/2024 at 8:00 pm the tickets cost $45.", spoken: "on november fifth twenty twenty four at eight p m the tickets cost forty five dollars" },
  { written: "Lunch at 12:30 pm was $12.75 per person.", spoken: "lunch at twelve thirty p m was twelve dollars seventy five cents per person" },
];

/** An LLM's answers, markdown and all, with how a person reads them aloud. */
const LLM_SENTENCES: ReadonlyArray<{ written: string; spoken: string }> = [
  { written: "**Important:** back up your files first.", spoken: "important back up your files first" },
  { written: "## Step 2: Install the package", spoken: "step two install the package" },
  { written: "- Preheat the oven to 350°F\n- Mix 2 tbsp of sugar", spoken: "preheat the oven to three hundred fifty degrees fahrenheit mix two tablespoons of sugar" },
  { written: "1. Open **Settings**\n2. Tap *Network*", spoken: "open settings tap network" },
  { written: "Run `npm install` and see [the docs](https://example.com/docs/start).", spoken: "run npm install and see the docs" },
  { written: "> Note: this needs Python 3.10.12 or later.", spoken: "note this needs python three point ten point twelve or later" },
  { written: "Update to v2.3.1 before you start.", spoken: "update to version two point three point one before you start" },
  { written: "The Normans arrived in 1066 and won.", spoken: "the normans arrived in ten sixty six and won" },
  { written: "Rev. Smith has a Ph.D. in history.", spoken: "reverend smith has a p h d in history" },
  { written: "The office is in Pittsburgh, PA near the river.", spoken: "the office is in pittsburgh pennsylvania near the river" },
  { written: "Here is the code:\n```js\nconst x = 1;\n```\nThat is all.", spoken: "here is the code code omitted that is all" },
  { written: "| Plan | Price |\n|---|---|\n| Basic | $5 |", spoken: "plan price basic five dollars" },
  { written: "Great job! 🎉 The meeting is at 16:00.", spoken: "great job the meeting is at sixteen hundred" },
  { written: "~~Old~~ *new* price: **$12.50**", spoken: "old new price twelve dollars fifty cents" },
];

const corpusArgument = process.argv.indexOf("--corpus");
const corpus = corpusArgument >= 0 ? process.argv[corpusArgument + 1]! : "written-forms";
const SENTENCES = corpus === "llm" ? LLM_SENTENCES : WRITTEN_FORM_SENTENCES;
const voiceArgument = process.argv.indexOf("--voice");
const voice = voiceArgument >= 0 ? process.argv[voiceArgument + 1]! : "rms";
const verbose = process.argv.includes("--verbose");

const model = await createClassicModel();

async function speak(text: string): Promise<{ samples: Float32Array; sampleRateHz: number }> {
  const chunks: Float32Array[] = [];
  let sampleRateHz = 16000;
  for await (const chunk of model.synthesize({ text, voice, language: "Auto", extraParams: {}, signal: new AbortController().signal })) {
    chunks.push(chunk.samples);
    sampleRateHz = chunk.sampleRateHz;
  }
  const samples = new Float32Array(chunks.reduce((total, chunk) => total + chunk.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    samples.set(chunk, offset);
    offset += chunk.length;
  }
  return { samples, sampleRateHz };
}

const scoredWords = (text: string) => normalizeWords(text).filter((word) => word !== "and");

const conditions =
  corpus === "llm"
    ? [
        { name: "before: normalized, markdown as written", prepare: (text: string) => normalizeText(text, { language: "en" }) },
        { name: "after: markdown read, then normalized", prepare: readAloud },
      ]
    : [
        { name: "as written (Flite's own reading)", prepare: (text: string) => text },
        { name: "normalized (normalizeText)", prepare: (text: string) => normalizeText(text, { language: "en" }) },
      ];
const rows: string[] = [];
for (const condition of conditions) {
  let edits = 0;
  let words = 0;
  for (const { written, spoken } of SENTENCES) {
    const audio = await speak(condition.prepare(written));
    const heard = await transcribe(audio.samples, audio.sampleRateHz);
    const reference = scoredWords(spoken);
    const sentenceEdits = wordEditDistance(reference, scoredWords(heard));
    edits += sentenceEdits;
    words += reference.length;
    if (verbose) console.error(`[${condition.name}] ${(sentenceEdits / reference.length).toFixed(2)} | ${heard}`);
  }
  rows.push(`${condition.name.padEnd(42)}  corpus WER ${((edits / words) * 100).toFixed(1)}%  (${edits} edits / ${words} words)`);
}
await model.close();
console.log(`\n${SENTENCES.length} sentences (${corpus}), Flite voice ${voice}, recognizer: pocketsphinx_continuous (en-us default model)\n`);
for (const row of rows) console.log(row);
