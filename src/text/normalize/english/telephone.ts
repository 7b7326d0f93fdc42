/** Telephone numbers, social security numbers and IP addresses: digit groups said digit by digit. */
import type { Rule } from "../tagger.ts";
import { cardinalWords, digitWords } from "./numbers.ts";

/** Groups said one digit at a time, with a pause (a comma) between groups. */
function groupWords(groups: (string | undefined)[]): string {
  return groups.filter((group): group is string => Boolean(group)).map(digitWords).join(", ");
}

export const telephoneRules: Rule[] = [
  {
    // "+1 (555) 123-4567", "(555) 123-4567", "555-123-4567", "555.123.4567", "+1 800 555 0199", "123-123-5678-1111".
    class: "telephone",
    pattern: /(?<![\w+.-])(?:\+(\d{1,3})[\s.-]?|(1)-)?(?:\((\d{3})\)|(\d{3}))(?:[\s.-]|(?<=\))|-?)(\d{3})([\s.-])(\d{4})(?:-(\d{1,4}))?(?![\w]|[.-]\d)/g,
    verbalize: (m) => {
      const international = m[1] ?? m[2];
      // Spaces alone between groups are a telephone number only with a country code or brackets.
      if (m[6] === " " && !m[1] && !m[3]) return null;
      const local = groupWords([m[3] ?? m[4], m[5], m[7], m[8]]);
      return international ? `${m[1] ? "plus " : ""}${digitWords(international)}, ${local}` : local;
    },
  },
  {
    // Toll-free numbers spelled with letters: "1-800-FLOWERS", "1-800-GO-U-HAUL".
    class: "telephone",
    pattern: /(?<![\w+.-])(?:(1)-)?(8[0-8]{2})-((?:[A-Z0-9]+-)*[A-Z]{2,}(?:-[A-Z0-9]+)*)(?![\w-])/g,
    verbalize: (m) => {
      const letters = m[3]!.split("-").map((group) => (/^\d+$/.test(group) ? digitWords(group) : group)).join(" ");
      return `${m[1] ? "one, " : ""}${cardinalWords(m[2]!)}, ${letters}`;
    },
  },
  {
    // International numbers in other countries' groupings: "+44 20 7946 0958", "+49-30-901820".
    class: "telephone",
    pattern: /(?<![\w+])\+(\d{1,3})((?:[\s.-]\d{1,5}){2,5})(?![\w]|[.-]\d)/g,
    verbalize: (m) => `plus ${digitWords(m[1]!)}, ${groupWords(m[2]!.split(/[\s.-]/))}`,
  },
  {
    class: "telephone",
    pattern: /(?<![\w.-])(\d{3})-(\d{2})-(\d{4})(?![\w]|-\d)/g,
    verbalize: (m) => groupWords([m[1], m[2], m[3]]),
  },
  {
    class: "telephone",
    pattern: /(?<![\w.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![\w]|\.\d)/g,
    verbalize: (m) => [m[1], m[2], m[3], m[4]].map((group) => digitWords(group!)).join(" dot "),
  },
];
