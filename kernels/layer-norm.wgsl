// LayerNorm over the last dimension of x [rows, channels] (rows = streams · steps), nn.LayerNorm semantics:
// y = (x − mean) / sqrt(var + eps) · weight + bias with the biased variance. One workgroup per row; the
// variance is taken around the mean in a second pass rather than as E[x²] − mean², which cancels badly
// when |mean| ≫ std.

struct LayerNormParams {
  rows: u32,
  channels: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> params: LayerNormParams;
@group(0) @binding(1) var<storage, read> input: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> output: array<f32>;

const WORKGROUP_SIZE = 128u;
var<workgroup> partial_sums: array<f32, WORKGROUP_SIZE>;

// The leading barrier keeps a previous call's readers of partial_sums[0] ahead of this call's writes.
// (Copying the total into a `let` and putting the barrier after it instead is not enough on Dawn's
// OpenGL ES backend over llvmpipe: the read was moved past the barrier and saw the next reduction.)
fn workgroup_sum(value: f32, lane: u32) -> f32 {
  workgroupBarrier();
  partial_sums[lane] = value;
  workgroupBarrier();
  for (var stride = WORKGROUP_SIZE / 2u; stride > 0u; stride = stride / 2u) {
    if (lane < stride) {
      partial_sums[lane] = partial_sums[lane] + partial_sums[lane + stride];
    }
    workgroupBarrier();
  }
  return partial_sums[0];
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) workgroup: vec3u, @builtin(local_invocation_index) lane: u32) {
  let row = workgroup.x;
  // Uniform across the workgroup, so the barriers below stay in uniform control flow.
  if (row >= params.rows) {
    return;
  }
  let channels = params.channels;
  let base = row * channels;

  var sum = 0.0;
  for (var c = lane; c < channels; c = c + WORKGROUP_SIZE) {
    sum = sum + input[base + c];
  }
  let mean = workgroup_sum(sum, lane) / f32(channels);

  var squares = 0.0;
  for (var c = lane; c < channels; c = c + WORKGROUP_SIZE) {
    let centred = input[base + c] - mean;
    squares = squares + centred * centred;
  }
  let inverse_std = 1.0 / sqrt(workgroup_sum(squares, lane) / f32(channels) + params.eps);

  for (var c = lane; c < channels; c = c + WORKGROUP_SIZE) {
    output[base + c] = (input[base + c] - mean) * inverse_std * weight[c] + bias[c];
  }
}
