// Batched transpose: input [batch, rows, cols] → output [batch, cols, rows]. Converts between the
// channels-first layout of the SEANet convolutions ([N, C, T]) and the time-major rows the transformer's
// matmuls and norms read ([N, T, C]), as ProjectedTransformer's transpose(1, 2) does upstream. Each 16×16
// tile goes through workgroup memory so both the reads and the writes are contiguous.

struct TransposeParams {
  batch: u32,
  rows: u32,
  cols: u32,
}

@group(0) @binding(0) var<uniform> params: TransposeParams;
@group(0) @binding(1) var<storage, read> input: array<f32>;
@group(0) @binding(2) var<storage, read_write> output: array<f32>;

const TILE = 16u;
var<workgroup> tile: array<f32, 272>; // TILE × (TILE + 1): the padding column avoids bank conflicts

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) workgroup: vec3u, @builtin(local_invocation_id) local: vec3u) {
  let n = workgroup.z;
  let plane = params.rows * params.cols;
  let row = workgroup.y * TILE + local.y;
  let col = workgroup.x * TILE + local.x;
  if (row < params.rows && col < params.cols) {
    tile[local.y * (TILE + 1u) + local.x] = input[n * plane + row * params.cols + col];
  }
  workgroupBarrier();
  let out_row = workgroup.x * TILE + local.y; // a column of the input
  let out_col = workgroup.y * TILE + local.x; // a row of the input
  if (out_row < params.cols && out_col < params.rows) {
    output[n * plane + out_row * params.rows + out_col] = tile[local.x * (TILE + 1u) + local.y];
  }
}
