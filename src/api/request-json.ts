/**
 * JSON text of a speech request → its value, with `seed` exact. JSON numbers parse to doubles, which hold
 * integers exactly only up to 2^53, so two int64 seeds above it (vLLM-Omni's seed is an int64) would round to
 * one and speak alike. The reviver reads such a seed from its source text as a bigint instead (JSON.parse
 * source text access, in Bun and in Deno's V8).
 */
export function parseRequestJson(text: string): unknown {
  return JSON.parse(text, (key: string, value: unknown, context?: { source?: string }) =>
    key === "seed" && typeof value === "number" && !Number.isSafeInteger(value) && context?.source !== undefined && /^-?\d+$/.test(context.source) ? BigInt(context.source) : value,
  );
}
