/** Alias lexicons (src/text/lexicon.ts): the two file formats, what they refuse, and how rules match. */
import { describe, expect, test } from "bun:test";
import { LexiconError, parseLexicon } from "../../src/text/lexicon.ts";

const PLS = `<?xml version="1.0" encoding="UTF-8"?>
<lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" alphabet="ipa" xml:lang="en-US">
  <lexeme><grapheme>GIF</grapheme><grapheme>GIFs</grapheme><alias>jif</alias></lexeme>
  <lexeme><grapheme>W3C</grapheme><alias>World Wide Web Consortium</alias></lexeme>
  <lexeme><grapheme>AT&amp;T</grapheme><alias>A T and T</alias></lexeme>
</lexicon>`;

describe("a PLS lexicon", () => {
  test("every grapheme of a lexeme reads as its alias, case-insensitively, whole words only", () => {
    const lexicon = parseLexicon(PLS, "test.pls");
    expect(lexicon.size).toBe(4);
    expect(lexicon.apply("A gif from the W3C, GIFs on AT&T.")).toBe("A jif from the World Wide Web Consortium, jif on A T and T.");
    expect(lexicon.apply("GIFT and W3Cx stay")).toBe("GIFT and W3Cx stay");
  });

  test("a phoneme rule is refused, naming the lexeme, because the model reads text", () => {
    const phonemes = `<lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" alphabet="ipa" xml:lang="en-US"><lexeme><grapheme>tomato</grapheme><phoneme>təmei̥ɾou̥</phoneme></lexeme></lexicon>`;
    expect(() => parseLexicon(phonemes, "p.pls")).toThrow(/p\.pls: lexeme 1 \(tomato\) has only a <phoneme>, and phoneme rules are not supported/);
  });

  test("malformed XML, another root, a lexeme without a grapheme: each a LexiconError saying which", () => {
    expect(() => parseLexicon("<lexicon><lexeme>", "a.pls")).toThrow(LexiconError);
    expect(() => parseLexicon("<lexicon><lexeme>", "a.pls")).toThrow(/a\.pls is not well-formed XML/);
    expect(() => parseLexicon("<speak>hi</speak>", "b.pls")).toThrow(/no <lexicon> root element/);
    expect(() => parseLexicon("<lexicon><lexeme><alias>x</alias></lexeme></lexicon>", "c.pls")).toThrow(/lexeme 1 has no <grapheme>/);
  });
});

describe("a tab-separated lexicon", () => {
  test("written, then spoken; comments and blank lines skipped; the longest written form wins", () => {
    const lexicon = parseLexicon("# our words\nSQL\tsequel\n\nk8s\tkubernetes\nNew York\tthe big apple\nNew\tnoo\n", "words.tsv");
    expect(lexicon.apply("Run SQL on k8s in New York, new and sql")).toBe("Run sequel on kubernetes in the big apple, noo and sequel");
  });

  test("a line without exactly two columns is refused with its line number", () => {
    expect(() => parseLexicon("SQL\tsequel\nno tab here\n", "w.tsv")).toThrow("w.tsv, line 2: expected two columns separated by one tab (written, then spoken)");
    expect(() => parseLexicon("a\tb\tc\n", "w.tsv")).toThrow(/line 1/);
  });

  test("a later lexicon's rules add to, and never override, the first's", () => {
    const server = parseLexicon("SQL\tsequel\n", "server.tsv");
    const request = parseLexicon("SQL\tS Q L\nk8s\tkates\n", "request.tsv");
    expect(request.with(server).apply("SQL on k8s")).toBe("S Q L on kates");
  });
});
