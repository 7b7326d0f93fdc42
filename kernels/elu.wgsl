// ELU with α = 1 (SEANet's nn.ELU, docs/pocket-tts.md §1.3), element-wise over `count` floats of any
// batched tensor. One invocation per element, numbered x + y · (groups.x · 64) (kernel.ts elementwiseGrid).

struct EluParams {
  count: u32,
}

@group(0) @binding(0) var<uniform> params: EluParams;
@group(0) @binding(1) var<storage, read> input: array<f32>;
@group(0) @binding(2) var<storage, read_write> output: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let index = id.y * groups.x * 64u + id.x;
  if (index >= params.count) { return; }
  let x = input[index];
  output[index] = select(exp(x) - 1.0, x, x > 0.0);
}
