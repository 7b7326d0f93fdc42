/**
 * Text as Flite can read it: printable ASCII and nothing else.
 *
 * Why nothing else: Flite's text front end indexes its letter-to-sound tables with the bytes of a word,
 * and a byte above 0x7F (every UTF-8 byte of a non-ASCII character) indexes out of them. What follows
 * depends on the bytes around it: a trap ("aé" × 13, Cyrillic words), a corrupt WAV header (8000 Hz for a
 * 16 kHz voice: "aé" × 17, Czech), or plausible audio ("aé" × 16). Measured on random strings: 0 of 600 pure
 * ASCII ones went wrong, 81 of 100 of accented Latin letters did. So the guard is exact: no byte above 0x7F
 * ever reaches Flite.
 *
 * What can be read is kept: Latin letters lose their diacritics (NFKD), a few letters and symbols have
 * ASCII spellings, Cyrillic and Greek are transliterated letter by letter. Letters of other scripts are
 * dropped, and the caller is told.
 */

/** Letters NFKD leaves alone, and the currency and other symbols Flite would otherwise drop unread. */
const SPELLED: Readonly<Record<string, string>> = {
  ß: "ss", ẞ: "SS", æ: "ae", Æ: "AE", œ: "oe", Œ: "OE", ø: "o", Ø: "O", đ: "d", Đ: "D", ð: "d", Ð: "D", þ: "th", Þ: "Th",
  ł: "l", Ł: "L", ı: "i", ħ: "h", Ħ: "H", ŋ: "ng", Ŋ: "Ng", ſ: "s", ĸ: "k",
  "¥": " yen ", "£": " pounds ", "€": " euros ", "¢": " cents ", "₹": " rupees ", "₽": " rubles ", "₩": " won ", "₺": " lira ",
  "₪": " shekels ", "₴": " hryvnias ", "₦": " naira ", "₱": " pesos ", "฿": " baht ", "₫": " dong ", "₿": " bitcoin ",
  "©": " copyright ", "®": " registered ", "™": " trademark ", "°": " degrees ", "±": " plus or minus ", "×": " times ", "÷": " divided by ",
  "§": " section ", "¶": " paragraph ", "µ": " micro ", "‰": " per mille ", "№": " number ", "•": ", ", "·": " ", "«": '"', "»": '"', "‹": "'", "›": "'",
  "¡": " ", "¿": " ", "。": ". ", "、": ", ", "「": '"', "」": '"', "‐": "-", "‑": "-", "−": "-", "⁄": "/",
};

/** Cyrillic (Russian, Ukrainian, Belarusian, Serbian, Macedonian, Bulgarian) and Greek, lower case. */
const TRANSLITERATED: Readonly<Record<string, string>> = {
  а: "a", б: "b", в: "v", г: "g", д: "d", е: "e", ё: "yo", ж: "zh", з: "z", и: "i", й: "y", к: "k", л: "l", м: "m", н: "n",
  о: "o", п: "p", р: "r", с: "s", т: "t", у: "u", ф: "f", х: "kh", ц: "ts", ч: "ch", ш: "sh", щ: "shch", ъ: "", ы: "y", ь: "",
  э: "e", ю: "yu", я: "ya", є: "ye", і: "i", ї: "yi", ґ: "g", ў: "u", ј: "j", љ: "lj", њ: "nj", ћ: "c", ђ: "dj", џ: "dz",
  ѓ: "g", ќ: "k", ѕ: "dz",
  α: "a", β: "v", γ: "g", δ: "d", ε: "e", ζ: "z", η: "i", θ: "th", ι: "i", κ: "k", λ: "l", μ: "m", ν: "n", ξ: "x", ο: "o",
  π: "p", ρ: "r", σ: "s", ς: "s", τ: "t", υ: "y", φ: "f", χ: "ch", ψ: "ps", ω: "o",
};

/** What Flite reads as it is: printable ASCII, and the tab and line breaks the sentence splitter looks for. */
const ASCII_PRINTABLE = /^[\x20-\x7E\t\n\r]$/;
const COMBINING_MARK = /\p{M}/u;
/** Whitespace, invisible format characters and control characters: dropping them loses nothing said. */
const SILENT = /[\p{White_Space}\p{Cf}\p{Cc}]/u;

function transliterated(character: string): string | undefined {
  const lower = character.toLowerCase();
  const spelled = TRANSLITERATED[lower] ?? TRANSLITERATED[lower.normalize("NFD")[0]!];
  if (spelled === undefined) return undefined;
  // Capitals keep a capital first letter ("Привет" → "Privet", "Щ" → "Shch").
  return character !== lower && spelled.length > 0 ? spelled[0]!.toUpperCase() + spelled.slice(1) : spelled;
}

/** One character (a code point) as ASCII, or undefined when Flite cannot read it. */
function asAscii(character: string): string | undefined {
  if (ASCII_PRINTABLE.test(character)) return character;
  const spelled = SPELLED[character] ?? transliterated(character);
  if (spelled !== undefined) return spelled;
  if (SILENT.test(character)) return " ";
  // Accented Latin letters, ligatures, full-width forms, superscripts: their compatibility decomposition.
  const decomposed = [...character.normalize("NFKD")].filter((part) => !COMBINING_MARK.test(part));
  if (decomposed.length > 1 || (decomposed.length === 1 && decomposed[0] !== character)) {
    const parts = decomposed.map(asAscii);
    if (parts.every((part) => part !== undefined)) return parts.join("");
  }
  // A mark left over once its letter was spelled (or dropped) says nothing of its own.
  return COMBINING_MARK.test(character) ? "" : undefined;
}

/**
 * `text` in printable ASCII: what Flite reads, and whether any character with
 * something to say (a letter, a digit, a symbol) was dropped because it could not be read.
 */
export function readableByFlite(text: string): { text: string; dropped: boolean } {
  let readable = "";
  let dropped = false;
  for (const character of text.normalize("NFC")) {
    const ascii = asAscii(character);
    if (ascii === undefined) {
      dropped = true;
      readable += " ";
    } else readable += ascii;
  }
  return { text: readable, dropped };
}
