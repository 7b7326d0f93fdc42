// Exact (erf) GELU in place: x ← x/2 · (1 + erf(x/√2)) = x/2 · erfc(−x/√2), as torch's F.gelu default.
// WGSL has no erf. erfc comes from the Chebyshev fit of Numerical Recipes (2nd ed., §6.2 `erfcc`), whose
// fractional error is below 1.2e-7 for every argument, so the negative tail, where 1 + erf(x/√2) cancels
// to nothing, keeps its relative precision too. Its factor exp(−x²/2) is evaluated from x² split into an
// f32 head and its exact rounding error (Dekker's product), because rounding x² alone would cost
// |x|²·2⁻²⁴ of relative error, 1.5e-6 already at x = −5.

struct GeluParams {
  count: u32,
  zero: u32,
}

@group(0) @binding(0) var<uniform> params: GeluParams;
@group(0) @binding(1) var<storage, read_write> values: array<f32>;

const WORKGROUP_SIZE = 256u;

// x·x = head + tail exactly (Dekker 1971: Veltkamp split into 12-bit halves whose products are exact).
fn square_split(x: f32) -> vec2f {
  let scaled = 4097.0 * x;
  let high = scaled - (scaled - x);
  let low = x - high;
  let head = x * x;
  let tail = ((high * high - head) + 2.0 * high * low) + low * low;
  return vec2f(head, tail);
}

// v, through an operation the compiler cannot see through (params.zero is 0 at run time): the exact
// difference large − k·ln2 must be formed before poly is added to it.
fn opaque(v: f32) -> f32 {
  return bitcast<f32>(bitcast<u32>(v) ^ params.zero);
}

// exp(r) for |r| ≤ ln2/2 + a little: Cephes expf's polynomial (about 1 ulp).
fn exp_reduced(r: f32) -> f32 {
  let poly = ((((1.9875691500e-4 * r + 1.3981999507e-3) * r + 8.3334519073e-3) * r + 4.1665795894e-2) * r + 1.6666665459e-1) * r + 5.0000001201e-1;
  return poly * r * r + r + 1.0;
}

// ln 2 split so that k · LN2_HIGH is exact for the |k| < 2¹⁵ reachable here.
const LN2_HIGH = 0.693359375;
const LN2_LOW = -2.12194440e-4;
const LOG2_E = 1.44269504088896341;

// erfc(|x|/√2) for the magnitude of x.
fn erfc_of_half_sqrt2(x: f32) -> f32 {
  let z = abs(x) * 0.70710678118654752;
  let t = 1.0 / (1.0 + 0.5 * z);
  let poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
    + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  // exp(−x²/2 + poly) with the exponent's large part −x²/2 kept exact: x² = head + tail exactly, and the
  // power-of-two scale 2^k comes out before anything is rounded (Cody–Waite), instead of WGSL's exp,
  // whose allowed error grows with the argument (3 + 2|a| ulp). Mesa's shader compiler reassociates float
  // additions (lavapipe and llvmpipe both did): unless the exact reduction is hidden from it, it folds poly
  // into −x²/2 first and costs up to |x|²·2⁻²⁵ relative, 8e-7 at x = −4 and 2e-6 at x = −8.
  let square = square_split(x);
  let large = -0.5 * square.x;
  let k = round((large + poly) * LOG2_E);
  let r = (opaque(large - k * LN2_HIGH) + poly) - k * LN2_LOW - 0.5 * square.y;
  return t * ldexp(exp_reduced(r), i32(k));
}

fn gelu(x: f32) -> f32 {
  let tail = erfc_of_half_sqrt2(x);
  return select(0.5 * x * tail, 0.5 * x * (2.0 - tail), x >= 0.0);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(global_invocation_id) id: vec3u, @builtin(num_workgroups) groups: vec3u) {
  // Two-dimensional grid so counts beyond 65535 workgroups' worth still fit the dispatch limits.
  let index = id.x + id.y * groups.x * WORKGROUP_SIZE;
  if (index >= params.count) {
    return;
  }
  values[index] = gelu(values[index]);
}
