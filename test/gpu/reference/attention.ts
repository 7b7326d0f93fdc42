/**
 * CPU streaming attention over each stream's full key/value history (upstream's linear cache and context
 * mask, not a ring), so it checks the GPU ring indexing rather than sharing it.
 *
 *   qkv      [streams, steps, 3, heads, headDim], RoPE already applied
 *   history  per stream: keys and values [positions, heads · headDim] of every earlier position
 *   returns  [streams, steps, heads · headDim]; each history grows by the call's keys and values
 */
export interface StreamHistory {
  keys: Float32Array[];
  values: Float32Array[];
}

export interface AttentionReferenceShape {
  streams: number;
  steps: number;
  heads: number;
  headDim: number;
  context: number;
}

export function attentionReference(qkv: Float32Array, histories: StreamHistory[], shape: AttentionReferenceShape): Float32Array {
  const { streams, steps, heads, headDim, context } = shape;
  const width = heads * headDim;
  const output = new Float32Array(streams * steps * width);
  const scale = 1 / Math.sqrt(headDim);
  for (let n = 0; n < streams; n++) {
    const history = histories[n]!;
    const offset = history.keys.length;
    for (let t = 0; t < steps; t++) {
      const row = (n * steps + t) * 3 * width;
      history.keys.push(qkv.slice(row + width, row + 2 * width));
      history.values.push(qkv.slice(row + 2 * width, row + 3 * width));
    }
    for (let t = 0; t < steps; t++) {
      const position = offset + t;
      const first = Math.max(0, position - context + 1);
      const queryRow = (n * steps + t) * 3 * width;
      for (let h = 0; h < heads; h++) {
        const scores: number[] = [];
        for (let j = first; j <= position; j++) {
          const key = history.keys[j]!;
          let dot = 0;
          for (let d = 0; d < headDim; d++) dot += qkv[queryRow + h * headDim + d]! * key[h * headDim + d]!;
          scores.push(dot * scale);
        }
        const max = Math.max(...scores);
        const weights = scores.map((score) => Math.exp(score - max));
        const total = weights.reduce((sum, weight) => sum + weight, 0);
        const outputBase = (n * steps + t) * width + h * headDim;
        for (let d = 0; d < headDim; d++) {
          let sum = 0;
          for (let j = first; j <= position; j++) sum += weights[j - first]! * history.values[j]![h * headDim + d]!;
          output[outputBase + d] = sum / total;
        }
      }
    }
  }
  return output;
}

/**
 * The ring a history implies: position p at index p mod context of slot `slot`, K then V, for the last
 * `context` positions ([slots, 2, context, heads · headDim]).
 */
export function ringFromHistories(histories: ReadonlyArray<{ slot: number; history: StreamHistory }>, slots: number, context: number, width: number): Float32Array {
  const ring = new Float32Array(slots * 2 * context * width);
  for (const { slot, history } of histories) {
    const positions = history.keys.length;
    for (let p = Math.max(0, positions - context); p < positions; p++) {
      ring.set(history.keys[p]!, ((slot * 2 + 0) * context + (p % context)) * width);
      ring.set(history.values[p]!, ((slot * 2 + 1) * context + (p % context)) * width);
    }
  }
  return ring;
}
