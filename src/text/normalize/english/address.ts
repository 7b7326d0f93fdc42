/** Street addresses: "1211 E Arques Ave, Sunnyvale, CA 94085" → "twelve eleven East Arques Avenue, Sunnyvale, California nine four zero eight five". */
import type { Rule } from "../tagger.ts";
import { cardinalWords, digitWords, ordinalWords, underHundred, yearWords } from "./numbers.ts";
import { sentenceEndsAfter } from "./patterns.ts";

const STREET_TYPES: Record<string, string> = {
  st: "Street", ave: "Avenue", av: "Avenue", rd: "Road", blvd: "Boulevard", ct: "Court", ln: "Lane", dr: "Drive", expy: "Expressway",
  hwy: "Highway", pkwy: "Parkway", pl: "Place", ter: "Terrace", cir: "Circle", sq: "Square", fwy: "Freeway",
};
const DIRECTIONS: Record<string, string> = { N: "North", S: "South", E: "East", W: "West", NE: "Northeast", NW: "Northwest", SE: "Southeast", SW: "Southwest" };
const STATES: Record<string, string> = {
  AL: "Alabama", AK: "Alaska", AZ: "Arizona", AR: "Arkansas", CA: "California", CO: "Colorado", CT: "Connecticut", DE: "Delaware",
  FL: "Florida", GA: "Georgia", HI: "Hawaii", ID: "Idaho", IL: "Illinois", IN: "Indiana", IA: "Iowa", KS: "Kansas", KY: "Kentucky",
  LA: "Louisiana", ME: "Maine", MD: "Maryland", MA: "Massachusetts", MI: "Michigan", MN: "Minnesota", MS: "Mississippi",
  MO: "Missouri", MT: "Montana", NE: "Nebraska", NV: "Nevada", NH: "New Hampshire", NJ: "New Jersey", NM: "New Mexico",
  NY: "New York", NC: "North Carolina", ND: "North Dakota", OH: "Ohio", OK: "Oklahoma", OR: "Oregon", PA: "Pennsylvania",
  RI: "Rhode Island", SC: "South Carolina", SD: "South Dakota", TN: "Tennessee", TX: "Texas", UT: "Utah", VT: "Vermont",
  VA: "Virginia", WA: "Washington", WV: "West Virginia", WI: "Wisconsin", WY: "Wyoming", DC: "D C",
};

/** Street types as written in any of the three usual cases ("st", "St", "ST"); names stay case-sensitive. */
const STREET_TYPE = Object.keys(STREET_TYPES).flatMap((type) => [type, type[0]!.toUpperCase() + type.slice(1), type.toUpperCase()]).join("|");
const DIRECTION = Object.keys(DIRECTIONS).join("|");
const STATE = Object.keys(STATES).join("|");
const NAME_WORD = String.raw`(?:\p{Lu}\p{Ll}+|\d+(?:st|nd|rd|th))`;

/** House numbers are said in pairs, as people give them: 123 "one twenty three", 2788 "twenty seven eighty eight". */
function houseNumberWords(digits: string): string {
  if (digits.length <= 2) return cardinalWords(digits);
  if (digits.length === 3) {
    const rest = Number(digits.slice(1));
    return `${digitWords(digits[0]!)} ${rest < 10 ? digitWords(digits.slice(1)) : underHundred(rest)}`;
  }
  if (digits.length === 4) return yearWords(Number(digits));
  return digitWords(digits);
}

function streetNameWords(name: string): string {
  return name.replace(/\b(\d+)(?:st|nd|rd|th)\b/g, (_, digits: string) => ordinalWords(digits));
}

export const addressRule: Rule = {
  class: "address",
  pattern: new RegExp(
    String.raw`(?<![\w.,$])(\d{1,5})\s+(?:(${DIRECTION})\s+)?(${NAME_WORD}(?:\s+\p{Lu}\p{Ll}+){0,3})\s+(${STREET_TYPE})(\.?)(?![\p{L}\d])` +
      String.raw`(?:(,\s*\p{Lu}\p{Ll}+(?:\s\p{Lu}\p{Ll}+)*)(?:(,\s*)(${STATE}))?(?:(,?\s+)(\d{5}))?(?![\w]))?`,
    "gu",
  ),
  verbalize: (m, text) => {
    const [, number, direction, name, streetType, period, city, stateSeparator, state, zipSeparator, zip] = m;
    const parts = [houseNumberWords(number!), direction ? DIRECTIONS[direction] : "", streetNameWords(name!), STREET_TYPES[streetType!.toLowerCase()]];
    let words = parts.filter(Boolean).join(" ");
    if (!city && period && sentenceEndsAfter(text, m.index + m[0].length, m[0])) words += ".";
    if (city) words += city;
    if (state) words += `${stateSeparator}${STATES[state]}`;
    if (zip) words += `${zipSeparator}${digitWords(zip)}`;
    return words;
  },
};

/** State codes that are also words ("OK", "OR", "IN", "ME", "HI"): read as a state only before a ZIP code. */
const WORD_STATES = new Set(["OK", "OR", "IN", "ME", "HI"]);
const STATE_NAME = Object.values(STATES).filter((name) => name !== "D C").join("|");
const CITY = String.raw`\p{Lu}[\p{L}'.-]*(?:\s\p{Lu}[\p{L}'.-]*){0,3}`;

/** "Pittsburgh, PA 15213" → "Pittsburgh, Pennsylvania one five two one three": a state code after a city, with or without a ZIP code. */
export const cityStateRule: Rule = {
  class: "address",
  pattern: new RegExp(String.raw`(?<=${CITY},\s?)(${STATE})(?:(\s+)(\d{5})(?:-(\d{4}))?)?(?![\p{L}\d-])`, "gu"),
  verbalize: (m) => {
    const [, state, separator, zip, plusFour] = m;
    if (!zip && WORD_STATES.has(state!)) return null;
    const zipWords = zip ? `${separator}${digitWords(zip)}${plusFour ? ` ${digitWords(plusFour)}` : ""}` : "";
    return `${STATES[state!]}${zipWords}`;
  },
};

/** ZIP codes are said digit by digit: after a state's name, or after "ZIP" / "ZIP code" / "zip code". */
export const zipCodeRule: Rule = {
  class: "address",
  pattern: new RegExp(String.raw`(?:(?<=\b(?:${STATE_NAME}),?\s)|(?<=\b(?:ZIP|Zip|zip)(?:\s[Cc]ode)?:?\s))(\d{5})(?:-(\d{4}))?(?![\d\p{L}])`, "gu"),
  verbalize: (m) => `${digitWords(m[1]!)}${m[2] ? ` ${digitWords(m[2])}` : ""}`,
};

