import { describe, expect, test } from "bun:test";
import { MAX_SEGMENT_CHARS, TextSegmenter, type SplitGranularity } from "../../src/text/segmenter.ts";
import { seededRandom } from "../../src/lib/seeded-random.ts";

/** Pushes `text` all at once, then flushes: the reference every other way of feeding it must match. */
function segmentAll(granularity: SplitGranularity, text: string): string[] {
  const segmenter = new TextSegmenter(granularity);
  return [...segmenter.push(text), ...segmenter.flush()];
}

/** Pushes `text` in pieces of `pieceLength` characters, recording after which piece each segment came out. */
function segmentInPieces(granularity: SplitGranularity, text: string, pieceLength: number) {
  const segmenter = new TextSegmenter(granularity);
  const emitted: { segment: string; textSoFar: string }[] = [];
  for (let offset = 0; offset < text.length; offset += pieceLength) {
    const textSoFar = text.slice(0, offset + pieceLength);
    for (const segment of segmenter.push(text.slice(offset, offset + pieceLength))) emitted.push({ segment, textSoFar });
  }
  return { emitted, flushed: segmenter.flush() };
}


describe("none", () => {
  test("holds everything until flush, then gives it as one whitespace-normalised segment", () => {
    const segmenter = new TextSegmenter("none");
    expect(segmenter.push("  Hello there. How are you?\n\n")).toEqual([]);
    expect(segmenter.push("Fine,   thanks! 你好。" + " word".repeat(100))).toEqual([]);
    expect(segmenter.pendingLength).toBeGreaterThan(MAX_SEGMENT_CHARS);
    expect(segmenter.flush()).toEqual([`Hello there. How are you? Fine, thanks! 你好。${" word".repeat(100)}`]);
  });

  test("flush of nothing, or of whitespace, gives no segment", () => {
    const segmenter = new TextSegmenter("none");
    expect(segmenter.flush()).toEqual([]);
    segmenter.push(" \n\t ");
    expect(segmenter.flush()).toEqual([]);
  });
});

describe("sentence", () => {
  test("ends at . ! ? … and their runs, with closing quotes and brackets, once whitespace follows", () => {
    const segmenter = new TextSegmenter("sentence");
    expect(segmenter.push('Hello there. Really?! "Yes." (Quite so.) Wait... Well… ’Tis ‘done.’ ok')).toEqual([
      "Hello there.",
      "Really?!",
      '"Yes."',
      "(Quite so.)",
      "Wait...",
      "Well…",
      "’Tis ‘done.’",
    ]);
    expect(segmenter.pendingLength).toBe(2);
    expect(segmenter.flush()).toEqual(["ok"]);
  });

  test("a paragraph fed 5 characters at a time emits its first sentence before the last piece, and not before it is complete", () => {
    const paragraph = "The first sentence is here. The second one follows it! Does a third one exist? It does.";
    const { emitted, flushed } = segmentInPieces("sentence", paragraph, 5);
    expect(emitted[0]!.segment).toBe("The first sentence is here.");
    expect(emitted[0]!.textSoFar.length).toBeLessThan(paragraph.length);
    // complete means the whitespace after the "." has arrived, and nothing more than the next piece
    expect(emitted[0]!.textSoFar).toStartWith("The first sentence is here. ");
    expect(emitted[0]!.textSoFar.length).toBeLessThan("The first sentence is here. ".length + 5);
    expect([...emitted.map(({ segment }) => segment), ...flushed]).toEqual(segmentAll("sentence", paragraph));
    expect(flushed).toEqual(["It does."]);
  });

  test("waits while a '.' may still be a decimal point or part of a word", () => {
    const segmenter = new TextSegmenter("sentence");
    expect(segmenter.push("It costs 3.")).toEqual([]);
    expect(segmenter.push("5 euros, e.")).toEqual([]);
    expect(segmenter.push("g.x is odd. Done")).toEqual(["It costs 3.5 euros, e.g.x is odd."]);
    expect(segmenter.push("?")).toEqual([]);
    expect(segmenter.push("!")).toEqual([]);
    expect(segmenter.push('"')).toEqual([]);
    expect(segmenter.push(" ")).toEqual(['Done?!"']);
  });

  test("a blank line ends a segment, a single newline does not", () => {
    expect(segmentAll("sentence", "A heading\n\nThe text goes on\nover two lines\n \t\nLast words")).toEqual([
      "A heading",
      "The text goes on over two lines",
      "Last words",
    ]);
  });

  test("does not split after the listed abbreviations or capital initials", () => {
    const text =
      "Mr. and Mrs. Smith met Ms. Lee, Dr. Jones and Prof. Brown on St. Patrick's Day at 9 a.m. and left at 5 p.m. the same day. " +
      "Sr. Garcia and Martin Jr. came too, e.g. for lunch, i.e. to eat. Cats vs. dogs, apples, pears etc. are topics. " +
      "J. R. R. Tolkien and J.R.R. Martin write books. The end.";
    expect(segmentAll("sentence", text)).toEqual([
      "Mr. and Mrs. Smith met Ms. Lee, Dr. Jones and Prof. Brown on St. Patrick's Day at 9 a.m. and left at 5 p.m. the same day.",
      "Sr. Garcia and Martin Jr. came too, e.g. for lunch, i.e. to eat.",
      "Cats vs. dogs, apples, pears etc. are topics.",
      "J. R. R. Tolkien and J.R.R. Martin write books.",
      "The end.",
    ]);
  });

  test("a number's '.' ends the sentence unless the next word starts lower-case, and waits for that word", () => {
    const segmenter = new TextSegmenter("sentence");
    expect(segmenter.push("We shipped version 2. ")).toEqual([]);
    expect(segmenter.push("  ")).toEqual([]);
    expect(segmenter.push("and then 3. ")).toEqual([]);
    expect(segmenter.push("Then we rested. ")).toEqual(["We shipped version 2. and then 3.", "Then we rested."]);
    expect(segmenter.push("It was 2024.\n\nand so")).toEqual(["It was 2024."]);
    expect(segmenter.flush()).toEqual(["and so"]);
    // "𝑥" (U+1D465, lower-case) split between two pieces: its first half alone decides nothing
    expect(segmenter.push("Let n be 2. \ud835")).toEqual([]);
    expect(segmenter.push("\udc65 too. ")).toEqual(["Let n be 2. 𝑥 too."]);
  });

  test("buffered whitespace is compacted, so a flood of spaces after an undecided '.' stays small", () => {
    const segmenter = new TextSegmenter("sentence");
    segmenter.push("It was 2.");
    for (let piece = 0; piece < 1000; piece++) expect(segmenter.push(" \t ")).toEqual([]);
    expect(segmenter.pendingLength).toBe("It was 2. ".length);
    expect(segmenter.push("\n\n\n")).toEqual(["It was 2."]);
  });

  test("a number with '.' at the start of a line is a list marker, not a sentence", () => {
    expect(segmentAll("sentence", "Steps:\n1. Open the file.\n2. Save it.\n  3. Close it.")).toEqual([
      "Steps: 1. Open the file.",
      "2. Save it.",
      "3. Close it.",
    ]);
  });

  test("punctuation alone is no segment: it goes along with the next sentence", () => {
    expect(segmentAll("sentence", "... Well. !? ***\n\nOk.")).toEqual(["... Well.", "!? *** Ok."]);
  });

  test("CJK full stops end a sentence without whitespace after, closing brackets included", () => {
    const segmenter = new TextSegmenter("sentence");
    expect(segmenter.push("你好。今天天气很好！")).toEqual(["你好。"]);
    expect(segmenter.push("「真的吗？」")).toEqual(["今天天气很好！"]);
    expect(segmenter.push("他问。")).toEqual(["「真的吗？」"]);
    expect(segmenter.push("本当ですか？！")).toEqual(["他问。"]);
    expect(segmenter.flush()).toEqual(["本当ですか？！"]);
  });

  test("whitespace inside a segment is collapsed and the ends are trimmed", () => {
    expect(segmentAll("sentence", "  Hello\t\t there,\n   friend.   Next  one  ")).toEqual(["Hello there, friend.", "Next one"]);
  });
});

describe("clause", () => {
  test("a month written short is no sentence end before a number, and waits for the next word to know", () => {
    const segmenter = new TextSegmenter("sentence");
    expect(segmenter.push("It rained on Jan. ")).toEqual([]);
    expect(segmenter.push("5 and Sept. 30. I met Jan. ")).toEqual(["It rained on Jan. 5 and Sept. 30."]);
    expect(segmenter.push("He left.")).toEqual(["I met Jan."]);
    expect(segmenter.flush()).toEqual(["He left."]);
    expect(segmentAll("sentence", "The last one was in Dec.")).toEqual(["The last one was in Dec."]);
  });

  test("a comma between two numbers ends no clause, so a date stays whole, and waits for the next word to know", () => {
    const segmenter = new TextSegmenter("clause");
    expect(segmenter.push("We all met on May 5, ")).toEqual([]);
    expect(segmenter.push("2026 at noon, then we ate.")).toEqual(["We all met on May 5, 2026 at noon,"]);
    expect(segmenter.flush()).toEqual(["then we ate."]);
    expect(segmentAll("clause", "Prices rose from $1,000 to $2,000, then fell.")).toEqual(["Prices rose from $1,000 to $2,000,", "then fell."]);
    expect(segmentAll("clause", "Count them all: 1, 2, 3, and then stop.")).toEqual(["Count them all: 1, 2, 3,", "and then stop."]);
  });

  test("also splits after , ; : and dashes once the clause has at least 4 words", () => {
    const text =
      "Well, I think so, but we should check first; maybe later. Note: this is it: the rule works. " +
      "The weather was lovely — we went outside – all of us, happily. Yes — fine.";
    expect(segmentAll("clause", text)).toEqual([
      "Well, I think so,",
      "but we should check first;",
      "maybe later.",
      "Note: this is it:",
      "the rule works.",
      "The weather was lovely —",
      "we went outside – all of us,",
      "happily.",
      "Yes — fine.",
    ]);
    expect(segmentAll("sentence", text)[0]).toBe("Well, I think so, but we should check first; maybe later.");
  });

  test("clause punctuation without whitespace after does not split", () => {
    expect(segmentAll("clause", "We counted 1,000,000 stars at 10:30 tonight, all of them bright.")).toEqual([
      "We counted 1,000,000 stars at 10:30 tonight,",
      "all of them bright.",
    ]);
  });

  test('closing quotes after a comma stay with their clause: "…," she said', () => {
    expect(segmentAll("clause", '"I will be there soon," she said to him.')).toEqual(['"I will be there soon,"', "she said to him."]);
  });
});

describe(`the ${MAX_SEGMENT_CHARS}-character guard`, () => {
  const runOn = Array.from({ length: 120 }, (_, index) => `word${index}`).join(" ");

  test("a run-on with no boundary is cut at the last whitespace before the limit", () => {
    const segments = segmentAll("sentence", `${runOn}.`);
    expect(segments.join(" ")).toBe(`${runOn}.`);
    for (const segment of segments) expect(segment.length).toBeLessThanOrEqual(MAX_SEGMENT_CHARS);
    const firstCut = runOn.slice(0, MAX_SEGMENT_CHARS + 1).lastIndexOf(" ");
    expect(segments[0]).toBe(runOn.slice(0, firstCut));
  });

  test("streamed, the cut comes as soon as the limit is passed, not at flush", () => {
    const segmenter = new TextSegmenter("clause");
    const emitted = Array.from(runOn.slice(0, MAX_SEGMENT_CHARS + 1)).flatMap((character) => segmenter.push(character));
    expect(emitted).toEqual([runOn.slice(0, runOn.slice(0, MAX_SEGMENT_CHARS + 1).lastIndexOf(" "))]);
  });

  test("a boundary within the limit still wins", () => {
    const sentence = `${"a".repeat(MAX_SEGMENT_CHARS - 20)} end.`;
    expect(segmentAll("sentence", `${sentence} ${runOn}`)[0]).toBe(sentence);
  });

  test("one giant word is cut hard, without splitting a surrogate pair", () => {
    const emojiAtCut = `${"x".repeat(MAX_SEGMENT_CHARS - 1)}😀${"y".repeat(50)}`;
    const segments = segmentAll("sentence", emojiAtCut);
    expect(segments).toEqual([`${"x".repeat(MAX_SEGMENT_CHARS - 1)}`, `😀${"y".repeat(50)}`]);
  });
});

describe("a segmenter's own cap (maxSegmentChars)", () => {
  const CAP = 300;
  const runOn = Array.from({ length: 120 }, (_, index) => `word${index}`).join(" ");
  const segmentWithCap = (text: string) => {
    const segmenter = new TextSegmenter("sentence", { maxSegmentChars: CAP });
    return [...segmenter.push(text), ...segmenter.flush()];
  };

  test("cuts a run-on at the last whitespace before the cap, and a giant word hard, by the same rules", () => {
    const segments = segmentWithCap(runOn);
    expect(segments.join(" ")).toBe(runOn);
    expect(segments[0]).toBe(runOn.slice(0, runOn.slice(0, CAP + 1).lastIndexOf(" ")));
    for (const segment of segments) expect(segment.length).toBeLessThanOrEqual(CAP);
    expect(segmentWithCap(`${"x".repeat(CAP - 1)}😀${"y".repeat(50)}`)).toEqual([`${"x".repeat(CAP - 1)}`, `😀${"y".repeat(50)}`]);
  });

  test("a sentence end past the cap no longer counts, one within it still wins", () => {
    const withinCap = `${"a ".repeat((CAP - 20) / 2)}end.`;
    expect(segmentWithCap(`${withinCap} ${runOn}`)[0]).toBe(withinCap);
    const pastCap = `${"b ".repeat(CAP / 2 + 10)}end.`;
    expect(segmentWithCap(pastCap)[0]!.length).toBeLessThanOrEqual(CAP);
  });

  test("refuses a cap that is not a whole number of at least two characters", () => {
    for (const maxSegmentChars of [0, 1, 299.5, Number.NaN]) expect(() => new TextSegmenter("sentence", { maxSegmentChars })).toThrow(RangeError);
  });
});

describe("piece-size invariance", () => {
  const FRAGMENTS = [
    "Hello there.",
    "Mr. Smith met Dr. Jones at 9 a.m. today.",
    "It costs 3.5 euros, e.g. on sale!",
    "We all met on May 5, 2026 at noon, in Jan. 3 rain; I met Jan. Then left.",
    "Version 2. and version 3. Both shipped.",
    '"Really?!" she asked.',
    "(This is quoted.)",
    "Wait... what…",
    "J. R. R. Tolkien wrote it.",
    "Well, I think so, but we should check first; maybe later.",
    "The weather was lovely — we went outside – all of us.",
    "你好。今天天气很好！「真的吗？」",
    "Steps:\n1. Open it.\n2. Close it.",
    "No ending here",
    "... !?",
    "   spaced\t\tout   words ",
    Array.from({ length: 90 }, (_, index) => `run${index}`).join(" "),
    "x".repeat(MAX_SEGMENT_CHARS + 30),
  ];
  const SEPARATORS = [" ", " ", "  ", "\n", "\n\n", " \n \n ", ""];

  function randomParagraphs(random: () => number): string {
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    let text = "";
    for (let fragmentCount = 0; fragmentCount < 40; fragmentCount++) text += pick(FRAGMENTS) + pick(SEPARATORS);
    return text;
  }

  function segmentInRandomPieces(granularity: SplitGranularity, text: string, random: () => number) {
    const segmenter = new TextSegmenter(granularity);
    const emitted: string[] = [];
    for (let offset = 0; offset < text.length; ) {
      const pieceLength = Math.floor(random() * 13); // 0 to 12: empty pieces happen too
      emitted.push(...segmenter.push(text.slice(offset, offset + pieceLength)));
      offset += pieceLength;
    }
    return { emitted, flushed: segmenter.flush() };
  }

  for (const granularity of ["none", "sentence", "clause"] as const) {
    test(`${granularity}: 1-character, 5-character and random pieces give the segments of the whole text, as early`, () => {
      for (let seed = 1; seed <= 8; seed++) {
        const random = seededRandom(seed);
        const text = randomParagraphs(random);
        const whole = new TextSegmenter(granularity);
        const emittedWhole = whole.push(text);
        const reference = [...emittedWhole, ...whole.flush()];
        expect(reference.length).toBeGreaterThan(granularity === "none" ? 0 : 40);

        const runs = [segmentInPieces(granularity, text, 1), segmentInPieces(granularity, text, 5)].map(({ emitted, flushed }) => ({
          emitted: emitted.map(({ segment }) => segment),
          flushed,
        }));
        runs.push(segmentInRandomPieces(granularity, text, random), segmentInRandomPieces(granularity, text, random));
        for (const { emitted, flushed } of runs) {
          // Pieces neither hold a segment back nor let one out early: the same ones are out before flush.
          expect(emitted).toEqual(emittedWhole);
          expect([...emitted, ...flushed]).toEqual(reference);
        }
      }
    });
  }
});

describe("cost linear in the text", () => {
  // Texts whose sentence ends are far apart or absent, each 2 MiB: a search that went on to the end of the
  // buffer for every segment took 3 to 13 s on them; one that stays within the cap takes well under 0.2 s.
  const TWO_MIB = 2 * 1024 * 1024;
  const LONG_INPUTS: Record<string, string> = {
    "a word per line": "word\n".repeat(TWO_MIB / 5),
    "a run of dots": ".".repeat(TWO_MIB),
    "commas, no sentence end": "a, ".repeat(TWO_MIB / 3),
  };
  for (const [name, text] of Object.entries(LONG_INPUTS)) {
    test(`one push of 2 MiB (${name}) is cut at the cap in one pass, far within 2 s`, () => {
      const segmenter = new TextSegmenter("sentence");
      const startedAt = performance.now();
      const segments = [...segmenter.push(text), ...segmenter.flush()];
      const elapsedMs = performance.now() - startedAt;
      for (const segment of segments) expect(segment.length).toBeLessThanOrEqual(MAX_SEGMENT_CHARS);
      expect(segments.join(" ").replace(/\s+/g, "")).toBe(text.replace(/\s+/g, ""));
      expect(elapsedMs).toBeLessThan(2000);
    });
  }
});

describe("reuse", () => {
  test("flush resets the segmenter for the next utterance", () => {
    const segmenter = new TextSegmenter("sentence");
    expect(segmenter.push("First one. Unfinished 3.")).toEqual(["First one."]);
    expect(segmenter.pendingLength).toBe("Unfinished 3.".length);
    expect(segmenter.flush()).toEqual(["Unfinished 3."]);
    expect(segmenter.pendingLength).toBe(0);
    expect(segmenter.flush()).toEqual([]);
    expect(segmenter.push("5 is a number. ")).toEqual(["5 is a number."]);
    expect(segmenter.pendingLength).toBe(0);
  });
});
