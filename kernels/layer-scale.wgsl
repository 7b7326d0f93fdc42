// Layer-scale residual in place: residual [rows, channels] ← residual + scale [channels] ⊙ update, the
// `x + layer_scale(update)` of a Mimi transformer layer (LayerScale multiplies the last dimension).

struct LayerScaleParams {
  count: u32,
  channels: u32,
}

@group(0) @binding(0) var<uniform> params: LayerScaleParams;
@group(0) @binding(1) var<storage, read> update: array<f32>;
@group(0) @binding(2) var<storage, read> scale: array<f32>;
@group(0) @binding(3) var<storage, read_write> residual: array<f32>;

const WORKGROUP_SIZE = 256u;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(global_invocation_id) id: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let index = id.x + id.y * groups.x * WORKGROUP_SIZE;
  if (index >= params.count) {
    return;
  }
  residual[index] = residual[index] + scale[index % params.channels] * update[index];
}
