/** Single sentences longer than the 1000-position FlowLM cache, in tokens, and the longest single word allowed. */
export const OVERLONG_INPUTS: Readonly<Record<string, string>> = { "9×1000": "9".repeat(1000), '"a "×2000': "a ".repeat(2000), "🙂×600": "🙂".repeat(600), "one 4096-char word": "x".repeat(4096) };
