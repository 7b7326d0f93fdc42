/** --lexicon: the file read once, at start; a file that cannot be used stops the start, saying why. */
import { readFileSync } from "node:fs";
import { LexiconError, parseLexicon, type Lexicon } from "../text/lexicon.ts";

export function loadLexicon(path: string): Lexicon {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new LexiconError(`--lexicon ${path} cannot be read: ${error instanceof Error ? error.message : String(error)}`);
  }
  return parseLexicon(text, `--lexicon ${path}`);
}
