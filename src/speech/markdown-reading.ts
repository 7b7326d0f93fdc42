/** The server's way of reading markdown, from its configuration; emoji names loaded once, when asked for. */
import type { Config } from "../config.ts";
import type { MarkdownReadingOptions } from "../text/markdown.ts";
import { emojiName } from "../text/emoji-names.ts";

const cache = new WeakMap<Config, MarkdownReadingOptions | undefined>();

export function markdownReadingOf(config: Pick<Config, "readMarkdown" | "codeBlockPlaceholder" | "emoji">): MarkdownReadingOptions | undefined {
  const key = config as Config;
  if (cache.has(key)) return cache.get(key);
  const options: MarkdownReadingOptions | undefined = config.readMarkdown ? { codeBlockPlaceholder: config.codeBlockPlaceholder, emoji: config.emoji, emojiName: config.emoji === "name" ? emojiName : undefined } : undefined;
  cache.set(key, options);
  return options;
}
