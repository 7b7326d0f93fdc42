/** The server's way of reading markdown, from its configuration; emoji names only when they are asked for. */
import type { Config } from "../config.ts";
import type { MarkdownReadingOptions } from "../text/markdown.ts";
import { emojiName } from "../text/emoji-names.ts";

export function markdownReadingOf(config: Pick<Config, "readMarkdown" | "codeBlockPlaceholder" | "emoji">): MarkdownReadingOptions | undefined {
  if (!config.readMarkdown) return undefined;
  return { codeBlockPlaceholder: config.codeBlockPlaceholder, emoji: config.emoji, emojiName: config.emoji === "name" ? emojiName : undefined };
}
