// Rotary position embedding in place on the q and k parts of a packed in_proj output
// qkv [streams, steps, 3, heads, head_dim] (order q, k, v; docs/pocket-tts.md §1.4). Pairs are interleaved,
// (x[2i], x[2i+1]) = (real, imaginary), GPT-J style (§1.9); the angle is pos · freq_i with
// pos = offset[stream] + step, both as upstream's float32 `freqs * ts`.
//
// The frequencies come from the host (upstream's f32 exp(i · (−2 ln(max_period) / head_dim))), and the
// angle's cos and sin are computed here by an explicit Cody–Waite reduction by π/2 and the Cephes sinf/cosf
// polynomials: WGSL only promises 2⁻¹¹ absolute error for sin/cos on [−π, π] and nothing beyond it,
// while the angle grows by 16 per latent frame and reaches thousands of radians in a long utterance.

struct RopeParams {
  streams: u32,
  steps: u32,
  heads: u32,
  head_dim: u32,
}

@group(0) @binding(0) var<uniform> params: RopeParams;
// Per stream: (cache slot, offset = positions already decoded). Only the offset matters here.
@group(0) @binding(1) var<storage, read> stream_table: array<vec2u>;
@group(0) @binding(2) var<storage, read> frequencies: array<f32>;
@group(0) @binding(3) var<storage, read_write> qkv: array<f32>;

// π/2 in four parts, the first three with 8 significant bits each, so quadrant · part is exact for every
// quadrant below 2¹⁶, i.e. angles below 102 943 rad: positions (at frequency 1) of 8.5 minutes of audio
// in one Mimi state, which upstream resets for every text chunk.
const PIO2_1 = 1.5703125;
const PIO2_2 = 4.825592041015625e-4;
const PIO2_3 = 1.2665987014770508e-6;
const PIO2_4 = 9.920935796805404e-10;
const TWO_OVER_PI = 0.636619772367581343;

fn sin_reduced(x: f32) -> f32 {
  let x2 = x * x;
  return x + x * x2 * (-1.6666654611e-1 + x2 * (8.3321608736e-3 + x2 * -1.9515295891e-4));
}

fn cos_reduced(x: f32) -> f32 {
  let x2 = x * x;
  return 1.0 - 0.5 * x2 + x2 * x2 * (4.166664568298827e-2 + x2 * (-1.388731625493765e-3 + x2 * 2.443315711809948e-5));
}

// (cos a, sin a) for a ≥ 0.
fn cos_sin(angle: f32) -> vec2f {
  let quadrant = round(angle * TWO_OVER_PI);
  let r = (((angle - quadrant * PIO2_1) - quadrant * PIO2_2) - quadrant * PIO2_3) - quadrant * PIO2_4;
  let s = sin_reduced(r);
  let c = cos_reduced(r);
  switch (u32(quadrant) & 3u) {
    case 0u: { return vec2f(c, s); }
    case 1u: { return vec2f(-s, c); }
    case 2u: { return vec2f(-c, -s); }
    default: { return vec2f(s, -c); }
  }
}

fn rotate(index: u32, rotation: vec2f) {
  let real = qkv[index];
  let imaginary = qkv[index + 1u];
  qkv[index] = real * rotation.x - imaginary * rotation.y;
  qkv[index + 1u] = real * rotation.y + imaginary * rotation.x;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u) {
  let half_dim = params.head_dim / 2u;
  let pair = id.x; // head · half_dim + i
  let step = id.y;
  let stream = id.z;
  if (pair >= params.heads * half_dim || step >= params.steps || stream >= params.streams) {
    return;
  }
  let head = pair / half_dim;
  let i = pair % half_dim;
  let position = f32(stream_table[stream].y + step);
  let rotation = cos_sin(position * frequencies[i]);
  let width = params.heads * params.head_dim;
  let row = (stream * params.steps + step) * 3u * width;
  let within = head * params.head_dim + 2u * i;
  rotate(row + within, rotation);
  rotate(row + width + within, rotation);
}
