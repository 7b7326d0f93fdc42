/** Word error rate helpers for intelligibility tests and benches. Pure functions, no I/O. */

/** Lower-cases, drops punctuation (keeping in-word apostrophes) and splits on whitespace. */
export function normalizeWords(text: string): string[] {
  return text
    .toLowerCase()
    .replace(/[\u2018\u2019]/g, "'")
    .replace(/[^\p{L}\p{N}'\s]+/gu, " ")
    .replace(/(^|\s)'+|'+(?=\s|$)/g, " ")
    .split(/\s+/)
    .filter((w) => w.length > 0);
}

/** Word-level Levenshtein distance (substitutions + deletions + insertions). */
export function wordEditDistance(ref: readonly string[], hyp: readonly string[]): number {
  let prev = new Array<number>(hyp.length + 1);
  let cur = new Array<number>(hyp.length + 1);
  for (let j = 0; j <= hyp.length; j++) prev[j] = j;
  for (let i = 1; i <= ref.length; i++) {
    cur[0] = i;
    for (let j = 1; j <= hyp.length; j++) {
      const sub = prev[j - 1]! + (ref[i - 1] === hyp[j - 1] ? 0 : 1);
      cur[j] = Math.min(sub, prev[j]! + 1, cur[j - 1]! + 1);
    }
    [prev, cur] = [cur, prev];
  }
  return prev[hyp.length]!;
}

/**
 * Word error rate of `hyp` against `ref`: edit distance over the number of reference words.
 * An empty reference gives 0 for an empty hypothesis and 1 otherwise. Can exceed 1 (many insertions).
 */
export function wordErrorRate(ref: string, hyp: string): number {
  const r = normalizeWords(ref);
  const h = normalizeWords(hyp);
  if (r.length === 0) return h.length === 0 ? 0 : 1;
  return wordEditDistance(r, h) / r.length;
}

/** Corpus WER: total edits over total reference words (not the mean of per-sentence rates). */
export function corpusWordErrorRate(pairs: ReadonlyArray<{ ref: string; hyp: string }>): number {
  let edits = 0;
  let words = 0;
  for (const { ref, hyp } of pairs) {
    const r = normalizeWords(ref);
    edits += wordEditDistance(r, normalizeWords(hyp));
    words += r.length;
  }
  return words === 0 ? 0 : edits / words;
}
