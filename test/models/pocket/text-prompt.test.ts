import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { EmptyTextPromptError, framesAfterEosGuessFor, prepareTextPrompt, splitIntoBestSentences, splitTokensWithinBudget, type TextPromptOptions } from "../../../src/models/pocket/text-prompt.ts";
import { SentencePieceTokenizer } from "../../../src/text/sentencepiece.ts";
import { requirePocketTinyFixture } from "./bundle-fixture.ts";

/** The shared fixtures live beside the repository (`../shared`), never inside it. */
const FIXTURE_DIR = requirePocketTinyFixture();

interface GoldenPrepareCase {
  input: string;
  prepared: string;
  frames_after_eos_guess: number;
  pad_with_spaces_for_short_inputs?: boolean;
  remove_semicolons?: boolean;
}

interface GoldenSplitCase {
  input: string;
  max_tokens: number;
  chunks: string[];
  chunk_token_counts: number[];
}

const golden = JSON.parse(readFileSync(join(FIXTURE_DIR, "golden.json"), "utf8")) as {
  cases: { prepare_text_prompt: { cases: GoldenPrepareCase[] }; split_into_best_sentences: GoldenSplitCase };
};
const tokenizer = await SentencePieceTokenizer.fromFile(join(FIXTURE_DIR, "tokenizer.model"));
/** The flags of pocket-tiny and of every v2 English model. */
const ENGLISH_V2: TextPromptOptions = { padWithSpacesForShortInputs: false, removeSemicolons: false };

describe("prepareTextPrompt", () => {
  for (const goldenCase of golden.cases.prepare_text_prompt.cases) {
    const options = { padWithSpacesForShortInputs: goldenCase.pad_with_spaces_for_short_inputs ?? false, removeSemicolons: goldenCase.remove_semicolons ?? false };
    test(`golden ${JSON.stringify(goldenCase.input)} ${JSON.stringify(options)}`, () => {
      expect(prepareTextPrompt(goldenCase.input, options)).toEqual({ text: goldenCase.prepared, framesAfterEosGuess: goldenCase.frames_after_eos_guess });
    });
  }

  test("empty or all-whitespace input is an error", () => {
    expect(() => prepareTextPrompt("", ENGLISH_V2)).toThrow(EmptyTextPromptError);
    expect(() => prepareTextPrompt(" \n\t\u3000", ENGLISH_V2)).toThrow(EmptyTextPromptError);
  });

  test("strips what Python's str.strip() strips, which is not what trim() strips", () => {
    expect(prepareTextPrompt("\x1chi\x85", ENGLISH_V2).text).toBe("Hi.");
    // U+FEFF is not Python whitespace, so it stays and is the "first character" that upper() leaves alone.
    expect(prepareTextPrompt("\ufeffhi", ENGLISH_V2).text).toBe("\ufeffhi.");
  });

  test("a single pass of double-space replacement: four spaces become two", () => {
    expect(prepareTextPrompt("a    b", ENGLISH_V2).text).toBe("A  b.");
  });

  test("the first and last characters are whole code points, with Python's full case mapping", () => {
    expect(prepareTextPrompt("ßtraße", ENGLISH_V2).text).toBe("SStraße.");
    expect(prepareTextPrompt("𝑥 equals 2", ENGLISH_V2).text).toBe("𝑥 equals 2.");
    expect(prepareTextPrompt("ends in 𝟘", ENGLISH_V2).text).toBe("Ends in 𝟘.");
    expect(prepareTextPrompt("ends in an emoji 😀", ENGLISH_V2).text).toBe("Ends in an emoji 😀");
  });

  test("the words are counted before the period is added, and Unicode whitespace separates them", () => {
    expect(prepareTextPrompt("one two three four", ENGLISH_V2).framesAfterEosGuess).toBe(3);
    expect(prepareTextPrompt("one two three four five", ENGLISH_V2).framesAfterEosGuess).toBe(1);
    expect(prepareTextPrompt("one\u2003two\u00a0three\tfour\x1cfive", ENGLISH_V2).framesAfterEosGuess).toBe(1);
  });

  test("semicolons become commas only when the model asks for it", () => {
    expect(prepareTextPrompt("a; b", { padWithSpacesForShortInputs: false, removeSemicolons: true }).text).toBe("A, b.");
    expect(prepareTextPrompt("a; b", ENGLISH_V2).text).toBe("A; b.");
  });
});

describe("splitIntoBestSentences", () => {
  test("the golden paragraph splits into the golden chunks", () => {
    const { input, max_tokens: maxTokens, chunks, chunk_token_counts: tokenCounts } = golden.cases.split_into_best_sentences;
    const split = splitIntoBestSentences(input, tokenizer, ENGLISH_V2, maxTokens);
    expect(split).toEqual(chunks);
    expect(split.map((chunk) => tokenizer.encode(chunk).length)).toEqual(tokenCounts);
  });

  test("the limit defaults to upstream's 50 tokens", () => {
    const { input, chunks } = golden.cases.split_into_best_sentences;
    expect(splitIntoBestSentences(input, tokenizer, ENGLISH_V2)).toEqual(chunks);
  });

  test("short text is one prepared chunk, without the short-input padding", () => {
    expect(splitIntoBestSentences("  hi there  ", tokenizer, { padWithSpacesForShortInputs: true, removeSemicolons: false })).toEqual(["Hi there."]);
  });

  test("a run of end marks stays with its sentence", () => {
    expect(splitIntoBestSentences("Wait?! Really... yes.", tokenizer, ENGLISH_V2, 3)).toEqual(["Wait?!", "Really...", "yes."]);
  });

  test("sentences are packed greedily up to the limit", () => {
    const sentences = ["One two three.", "Four five six.", "Seven eight nine."];
    const counts = sentences.map((sentence) => tokenizer.encode(sentence).length);
    const limit = counts[0]! + counts[1]!;
    expect(splitIntoBestSentences(sentences.join(" "), tokenizer, ENGLISH_V2, limit)).toEqual([`${sentences[0]} ${sentences[1]}`, sentences[2]!]);
  });

  test("an over-long sentence is re-split on , ; : and kept whole when it has none", () => {
    // Clauses of 4, 5, 3 and 4 tokens, then packed again under the 8-token limit.
    const clauses = "first part here, second part there; third part: and the end.";
    expect(splitIntoBestSentences(clauses, tokenizer, ENGLISH_V2, 8)).toEqual(["First part here,", "second part there; third part:", "and the end."]);
    const unbroken = "this sentence has no clause marks at all so it cannot be split any further";
    expect(splitIntoBestSentences(unbroken, tokenizer, ENGLISH_V2, 5)).toEqual(["This sentence has no clause marks at all so it cannot be split any further."]);
  });

  test("empty input is an error here too", () => {
    expect(() => splitIntoBestSentences("   ", tokenizer, ENGLISH_V2)).toThrow(EmptyTextPromptError);
  });
});

describe("splitTokensWithinBudget", () => {
  const piecesOf = (ids: readonly number[], maxTokens: number) => splitTokensWithinBudget(ids, maxTokens, tokenizer);

  test("ids within the limit are one piece", () => {
    const ids = tokenizer.encode("Hello there, tiny model.");
    expect(piecesOf(ids, ids.length)).toEqual([ids]);
  });

  test("a long sentence is cut only where words start, into about equal pieces of at most the limit", () => {
    const ids = tokenizer.encode("A " + "word ".repeat(60).trim() + ".");
    const pieces = piecesOf(ids, 25);
    expect(pieces.flat()).toEqual(ids);
    expect(pieces.every((piece) => piece.length <= 25)).toBe(true);
    expect(pieces.every((piece) => tokenizer.startsWord(piece[0]!))).toBe(true);
    // 62 tokens under a limit of 25: three pieces of about 21, not 25 + 25 + 12.
    expect(pieces.map((piece) => piece.length)).toEqual([21, 21, 20]);
  });

  test("the words before an overlong word keep together; the word alone is cut inside", () => {
    const pieces = piecesOf(tokenizer.encode("The quick brown fox " + "x".repeat(100)), 40);
    const texts = pieces.map((piece) => tokenizer.decode(piece));
    expect(texts[0]).toBe("The quick brown fox");
    expect(texts.slice(1).join("")).toBe("x".repeat(100));
    expect(pieces.map((piece) => piece.length).every((length) => length <= 40)).toBe(true);
  });

  test("one word longer than the limit is cut inside it by tokens, and nothing is dropped", () => {
    const ids = tokenizer.encode("9".repeat(1000));
    const pieces = piecesOf(ids, 50);
    expect(pieces.flat()).toEqual(ids);
    expect(pieces.every((piece) => piece.length > 0 && piece.length <= 50)).toBe(true);
    expect(pieces.map((piece) => tokenizer.decode(piece)).join("")).toBe("9".repeat(1000));
  });

  test("a word of byte-fallback characters is cut between characters, never inside one", () => {
    const ids = tokenizer.encode("🙂".repeat(600));
    const pieces = piecesOf(ids, 50);
    expect(pieces.flat()).toEqual(ids);
    expect(pieces.every((piece) => piece.length <= 50 && !tokenizer.continuesCharacter(piece[0]!))).toBe(true);
    expect(pieces.map((piece) => tokenizer.decode(piece)).join("")).toBe("🙂".repeat(600));
  });

  test("a character longer than the limit is cut inside it", () => {
    // "▁" F0 9F 99 82 under a limit of 2: the lead byte is the only place between characters.
    const ids = tokenizer.encode("🙂");
    expect(piecesOf(ids, 2)).toEqual([ids.slice(0, 1), ids.slice(1, 3), ids.slice(3)]);
  });

  test("the limit must allow a token", () => {
    expect(() => piecesOf([1, 2], 0)).toThrow(RangeError);
    expect(() => piecesOf([1, 2], 1.5)).toThrow(RangeError);
  });
});

describe("framesAfterEosGuessFor", () => {
  test("is prepare_text_prompt's guess, and blank text (a lone ▁ piece) counts as short", () => {
    expect(framesAfterEosGuessFor("one two three four")).toBe(prepareTextPrompt("one two three four", ENGLISH_V2).framesAfterEosGuess);
    expect(framesAfterEosGuessFor("one two three four five")).toBe(1);
    expect(framesAfterEosGuessFor("")).toBe(3);
  });
});
