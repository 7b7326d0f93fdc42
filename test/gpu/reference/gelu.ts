/**
 * CPU exact GELU, x/2 · erfc(−x/√2), with erfc in float64: JavaScript has no erf, so erfc comes from its
 * Maclaurin series of erf for |z| < 2.5 (terms fall fast enough there to keep ~1e-14 accuracy) and from
 * the Laplace continued fraction, evaluated by the modified Lentz method, beyond.
 */

function erfSeries(z: number): number {
  // erf z = 2/√π · Σ (−1)ⁿ z^(2n+1) / (n! (2n+1))
  let term = z;
  let sum = z;
  for (let n = 1; n < 200; n++) {
    term *= (-z * z) / n;
    const contribution = term / (2 * n + 1);
    sum += contribution;
    if (Math.abs(contribution) < 1e-17 * Math.abs(sum)) break;
  }
  return (2 / Math.sqrt(Math.PI)) * sum;
}

function erfcContinuedFraction(z: number): number {
  // erfc z = exp(−z²)/√π · 1/(z + (1/2)/(z + 1/(z + (3/2)/(z + 2/(z + …))))), z > 0
  const tiny = 1e-300;
  let f = z;
  let c = z;
  let d = 0;
  for (let n = 1; n < 500; n++) {
    const a = n / 2;
    d = z + a * d;
    d = Math.abs(d) < tiny ? tiny : d;
    c = z + a / c;
    c = Math.abs(c) < tiny ? tiny : c;
    d = 1 / d;
    const delta = c * d;
    f *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  return Math.exp(-z * z) / Math.sqrt(Math.PI) / f;
}

export function erfc(z: number): number {
  if (z < 0) return 2 - erfc(-z);
  return z < 2.5 ? 1 - erfSeries(z) : erfcContinuedFraction(z);
}

export function geluReference(values: Float32Array): Float32Array {
  return values.map((x) => 0.5 * x * erfc(-x / Math.SQRT2));
}
