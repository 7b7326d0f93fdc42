/** The lenient comparison of spoken forms: case, hyphens, punctuation and the word "and" do not count. */
export function lenientForm(spoken: string): string {
  return spoken
    .toLowerCase()
    .replace(/[-‐‑–—]/g, " ")
    .replace(/[^\p{L}\p{N}\s]/gu, "")
    .split(/\s+/)
    .filter((word) => word && word !== "and")
    .join(" ");
}

export function lenientEqual(actual: string, expected: string): boolean {
  return lenientForm(actual) === lenientForm(expected);
}
