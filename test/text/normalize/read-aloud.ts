/** What the server makes of a text before the model reads it: markdown read (src/text/markdown.ts), then normalized. */
import { readMarkdown } from "../../../src/text/markdown.ts";
import { normalizeText } from "../../../src/text/normalize/index.ts";

export const readAloud = (written: string): string => normalizeText(readMarkdown(written));
