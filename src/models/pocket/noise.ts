/** Noise for the flow head (docs/pocket-tts.md §1.11): x0 for each AR step, seeded or replayed from golden rows. */

/** Source of x0 for each AR step, in step order across chunks (including each chunk's final, non-emitted step). */
export interface LatentNoise {
  /** x0 [latentDim], already scaled: √temperature · z. */
  next(latentDim: number): Float32Array;
}

/**
 * Seeded Gaussian noise: xoshiro128** (Blackman & Vigna 2018; 128-bit state, period 2^128 − 1, passes
 * BigCrush, 32-bit operations only, so it is fast in JS) seeded through SplitMix64, as its authors
 * recommend, so that nearby seeds give unrelated streams. Normals come from Box–Muller on 53-bit
 * uniforms, both outputs used.
 *
 * The seed is an int64 (the API's range), as a number (a safe integer) or a bigint: SplitMix64 takes all
 * 64 bits, so seeds above 2^53 each get their own stream, and a number and the bigint of the same value the
 * same one.
 *
 * Same seed → same noise in one JS engine. Across engines (Bun's JavaScriptCore vs Deno's V8) Math.log,
 * cos and sin may differ in the last bit of a double, which the float32 rounding of x0 almost always hides.
 */
export function seededLatentNoise(seed: number | bigint, temperature: number): LatentNoise {
  if (typeof seed === "number" ? !Number.isSafeInteger(seed) : BigInt.asIntN(64, seed) !== seed) throw new RangeError(`seed must be a safe integer or an int64 bigint, got ${seed}`);
  if (!(temperature >= 0)) throw new RangeError(`temperature must be ≥ 0, got ${temperature}`);
  const random = xoshiro128StarStar(seed);
  const standardDeviation = Math.sqrt(temperature);
  let spare: number | undefined;
  const gaussian = (): number => {
    if (spare !== undefined) {
      const value = spare;
      spare = undefined;
      return value;
    }
    // u1 ∈ (0, 1] so that log(u1) is finite; u2 ∈ [0, 1).
    const u1 = 1 - uniform53(random);
    const u2 = uniform53(random);
    const radius = Math.sqrt(-2 * Math.log(u1));
    spare = radius * Math.sin(2 * Math.PI * u2);
    return radius * Math.cos(2 * Math.PI * u2);
  };
  return {
    next(latentDim) {
      const x0 = new Float32Array(latentDim);
      for (let index = 0; index < latentDim; index++) x0[index] = standardDeviation * gaussian();
      return x0;
    },
  };
}

/** Replays recorded x0 rows [steps, latentDim] (the golden `noise` tensors) in order. */
export function replayLatentNoise(rows: Float32Array): LatentNoise {
  let offset = 0;
  return {
    next(latentDim) {
      if (offset + latentDim > rows.length) throw new RangeError(`recorded noise exhausted after ${offset / latentDim} steps`);
      const x0 = rows.slice(offset, offset + latentDim);
      offset += latentDim;
      return x0;
    },
  };
}

/** xoshiro128** 1.1 (https://prng.di.unimi.it/xoshiro128starstar.c); returns uint32 values. */
function xoshiro128StarStar(seed: number | bigint): () => number {
  // SplitMix64 expands the seed into the 128-bit state; it never yields four zero words.
  let splitState = BigInt.asUintN(64, BigInt(seed));
  const splitMix64 = (): bigint => {
    splitState = BigInt.asUintN(64, splitState + 0x9e3779b97f4a7c15n);
    let z = splitState;
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
    return z ^ (z >> 31n);
  };
  const first = splitMix64();
  const second = splitMix64();
  let s0 = Number(first & 0xffffffffn) | 0;
  let s1 = Number(first >> 32n) | 0;
  let s2 = Number(second & 0xffffffffn) | 0;
  let s3 = Number(second >> 32n) | 0;
  return () => {
    const result = Math.imul(rotateLeft(Math.imul(s1, 5), 7), 9) >>> 0;
    const shifted = s1 << 9;
    s2 ^= s0;
    s3 ^= s1;
    s1 ^= s2;
    s0 ^= s3;
    s2 ^= shifted;
    s3 = rotateLeft(s3, 11);
    return result;
  };
}

function rotateLeft(value: number, bits: number): number {
  return (value << bits) | (value >>> (32 - bits));
}

/** A uniform double in [0, 1) with 53 random bits (27 + 26 from two draws). */
function uniform53(random: () => number): number {
  return ((random() >>> 5) * 67_108_864 + (random() >>> 6)) / 9_007_199_254_740_992;
}
