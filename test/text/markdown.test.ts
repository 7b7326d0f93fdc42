/**
 * Markdown read as a person reads it aloud (src/text/markdown.ts): the forms an LLM's answer uses, and a stream
 * cut anywhere reads as the whole text does.
 */
import { describe, expect, test } from "bun:test";
import { DEFAULT_MARKDOWN_READING, MarkdownReader, readMarkdown } from "../../src/text/markdown.ts";
import { emojiName } from "../../src/text/emoji-names.ts";

/** Whitespace as the segmenter compacts it, and no space before punctuation. */
const spoken = (text: string) => text.replace(/\s+/g, " ").replace(/ ([.,!?:;])/g, "$1").trim();
const read = (text: string) => spoken(readMarkdown(text));

const CASES: [string, string][] = [
  ["**Important:** back up first", "Important: back up first"],
  ["__Bold__ and _italic_ and *this*", "Bold and italic and this"],
  ["## Step 2: Install", "Step 2: Install."],
  ["# Title #", "Title."],
  ["Setup\n=====\nThen go.", "Setup Then go."],
  ["- Preheat the oven\n- Mix the flour", "Preheat the oven. Mix the flour."],
  ["* Eggs\n+ Milk\n  - Butter", "Eggs. Milk. Butter."],
  ["1. Open Settings\n2. Tap **Wi-Fi**\n3) Done!", "Open Settings. Tap Wi-Fi. Done!"],
  ["- [x] Done task\n- [ ] Open task", "Done task. Open task."],
  ["Run `npm install` now.", "Run npm install now."],
  ["See [the docs](https://example.com/docs) for more.", "See the docs for more."],
  ["![a cat on a mat](cat.png)", "a cat on a mat"],
  ["> Note: back up first.\n> > Nested.", "Note: back up first. Nested."],
  ["~~old~~ new", "old new"],
  ["Above\n\n---\n\nBelow", "Above Below"],
  ["| Name | Age |\n|---|:---:|\n| Ada | 36 |\n| Bob | 41 |", "Name, Age. Ada, 36. Bob, 41."],
  ["Before:\n```python\nprint('hi')\nx = 1\n```\nAfter.", "Before: Code omitted. After."],
  ["~~~\ncode\n~~~\nAfter.", "Code omitted. After."],
  ["Tom &amp; Jerry \\*not bold\\*", "Tom & Jerry *not bold*"],
  ["Great job! 🎉 You did it 👍🏽.", "Great job! You did it."],
  ["Press <kbd>Ctrl</kbd>+<kbd>C</kbd>.<br>Then **go**.", "Press Ctrl+C. Then go."],
  ["<details><summary>More</summary>Hidden text.</details>", "More Hidden text."],
  ['Wait <break time="1s"/> here.', 'Wait <break time="1s"/> here.'],
  // Not markdown: left as written.
  ["5 * 3 * 2 = 30", "5 * 3 * 2 = 30"],
  ["snake_case_name stays", "snake_case_name stays"],
  ["In 2024. A year later", "In 2024. A year later"],
  ["2024. A year", "2024. A year"],
  ["Visit https://example.com today", "Visit https://example.com today"],
];

describe("readMarkdown", () => {
  for (const [written, expected] of CASES) {
    test(JSON.stringify(written), () => expect(read(written)).toBe(expected));
  }

  test("the code block placeholder is configurable, and can be nothing", () => {
    const text = "Run:\n```\nrm -rf /\n```\nDone.";
    expect(spoken(readMarkdown(text, { ...DEFAULT_MARKDOWN_READING, codeBlockPlaceholder: "See the code on screen." }))).toBe("Run: See the code on screen. Done.");
    expect(spoken(readMarkdown(text, { ...DEFAULT_MARKDOWN_READING, codeBlockPlaceholder: "" }))).toBe("Run: Done.");
  });

  test("an unclosed code block is skipped to the end", () => {
    expect(read("Look:\n```js\nconst a = 1;\nconst b = 2;")).toBe("Look: Code omitted.");
  });

  test("emoji named, with or without a skin tone; unnamed ones dropped", () => {
    const named = { ...DEFAULT_MARKDOWN_READING, emoji: "name" as const, emojiName };
    expect(spoken(readMarkdown("Nice 👍🏽 work 🎉", named))).toBe("Nice thumbs up work party popper");
    expect(emojiName("❤️")).toBe("red heart");
  });
});

describe("MarkdownReader on a stream", () => {
  const texts = [...CASES.map(([written]) => written), "Intro **bold [link](https://a.b/c) text** and `code span` end.\n\n## Next\n- item one\n- item *two*\n```\nhidden\n```\nlast line"];

  test("cut in two anywhere, every text reads as it does whole", () => {
    for (const text of texts) {
      const whole = read(text);
      for (let cut = 1; cut < text.length; cut++) {
        const reader = new MarkdownReader();
        expect({ text, cut, read: spoken(reader.push(text.slice(0, cut)) + reader.push(text.slice(cut)) + reader.flush()) }).toEqual({ text, cut, read: whole });
      }
    }
  });

  test("one character at a time, nothing of a mark is ever released", () => {
    for (const text of texts) {
      const reader = new MarkdownReader();
      let out = "";
      for (const char of text) {
        const piece = reader.push(char);
        expect(piece).not.toMatch(/\*\*|`|\]\(|^#/);
        out += piece;
      }
      expect(spoken(out + reader.flush())).toBe(read(text));
    }
  });

  test("text is released before its line ends, once no mark is open", () => {
    const reader = new MarkdownReader();
    expect(spoken(reader.push("- The first words of a long item "))).toBe("The first words of a long item");
    expect(reader.push("with **bold ")).toBe("with ");
    expect(spoken(reader.push("words** and more"))).toBe("bold words and");
    expect(spoken(reader.push("\n"))).toBe("more.");
  });

  test("a code block's lines are not held: a long one costs a few bytes", () => {
    const reader = new MarkdownReader();
    reader.push("```\n");
    reader.push("x".repeat(100_000));
    expect(reader.pendingLength).toBeLessThan(100);
    expect(spoken(reader.push("\n```\nAfter.\n"))).toBe("After.");
  });

  test("a line without an end is read once it is long, so a stream without newlines cannot grow the reader", () => {
    const reader = new MarkdownReader();
    const out = reader.push(`| ${"cell ".repeat(1_000)}`);
    expect(reader.pendingLength).toBe(0);
    expect(out.length).toBeGreaterThan(4_000);
  });
});
