/**
 * English names of emoji (Emojibase's CLDR labels: "👍" → "thumbs up"), for `--emoji name`. A skin tone or a
 * presentation selector does not change the name: the emoji is looked up without them when it is not found as
 * written.
 */
import compact from "emojibase-data/en/compact.json" with { type: "json" };

const MODIFIERS = /[\u{FE0E}\u{FE0F}\u{1F3FB}-\u{1F3FF}]/gu;
let names: Map<string, string> | undefined;

function table(): Map<string, string> {
  if (names) return names;
  names = new Map();
  for (const entry of compact as { unicode: string; label: string }[]) {
    names.set(entry.unicode, entry.label);
    names.set(entry.unicode.replace(MODIFIERS, ""), entry.label);
  }
  return names;
}

export function emojiName(emoji: string): string | undefined {
  const labels = table();
  return labels.get(emoji) ?? labels.get(emoji.replace(MODIFIERS, ""));
}
