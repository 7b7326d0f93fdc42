// out [rows, cols] = a [rows, inner] · b [inner, cols] (+ bias [cols]), all row-major f32. b is the
// transposed nn.Linear weight ([in, out]), the layout the ONNX export stores. rows = streams · steps.
//
// Tiling: each 16×4 workgroup owns a 16-row × 64-column tile of out and walks the inner dimension in slabs
// of 32, staging a 16×32 slab of a and a 32×64 slab of b in workgroup memory. Thread (tx, ty) accumulates
// the 4×4 outputs at rows ty + 4i and columns tx + 16j: neighbouring threads touch neighbouring columns,
// so the b-slab reads and the output writes stay contiguous and conflict-free. 16 rows is one stream's
// latent frame (16 transformer steps), so a single stream wastes no tile rows; 32-row tiles measured 3.8×
// slower for that case on llvmpipe.

struct MatmulParams {
  rows: u32,
  inner: u32,
  cols: u32,
  has_bias: u32,
}

@group(0) @binding(0) var<uniform> params: MatmulParams;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

const TILE_ROWS = 16u;
const TILE_COLS = 64u;
const TILE_INNER = 32u;
const THREADS = 64u;

var<workgroup> a_tile: array<f32, 512>; // TILE_ROWS × TILE_INNER
var<workgroup> b_tile: array<f32, 2048>; // TILE_INNER × TILE_COLS

@compute @workgroup_size(16, 4)
fn main(
  @builtin(workgroup_id) workgroup: vec3u,
  @builtin(local_invocation_id) local: vec3u,
  @builtin(local_invocation_index) lane: u32,
) {
  let row0 = workgroup.y * TILE_ROWS;
  let col0 = workgroup.x * TILE_COLS;
  let rows = params.rows;
  let inner = params.inner;
  let cols = params.cols;

  var acc: array<array<f32, 4>, 4>;
  for (var i = 0u; i < 4u; i = i + 1u) {
    for (var j = 0u; j < 4u; j = j + 1u) {
      acc[i][j] = 0.0;
    }
  }

  for (var k0 = 0u; k0 < inner; k0 = k0 + TILE_INNER) {
    for (var e = lane; e < TILE_ROWS * TILE_INNER; e = e + THREADS) {
      let r = row0 + e / TILE_INNER;
      let k = k0 + e % TILE_INNER;
      a_tile[e] = select(0.0, a[r * inner + k], r < rows && k < inner);
    }
    for (var e = lane; e < TILE_INNER * TILE_COLS; e = e + THREADS) {
      let k = k0 + e / TILE_COLS;
      let c = col0 + e % TILE_COLS;
      b_tile[e] = select(0.0, b[k * cols + c], k < inner && c < cols);
    }
    workgroupBarrier();
    for (var kk = 0u; kk < TILE_INNER; kk = kk + 1u) {
      var a_values: array<f32, 4>;
      var b_values: array<f32, 4>;
      for (var i = 0u; i < 4u; i = i + 1u) {
        a_values[i] = a_tile[(local.y + 4u * i) * TILE_INNER + kk];
        b_values[i] = b_tile[kk * TILE_COLS + local.x + 16u * i];
      }
      for (var i = 0u; i < 4u; i = i + 1u) {
        for (var j = 0u; j < 4u; j = j + 1u) {
          acc[i][j] = acc[i][j] + a_values[i] * b_values[j];
        }
      }
    }
    workgroupBarrier();
  }

  for (var i = 0u; i < 4u; i = i + 1u) {
    let r = row0 + local.y + 4u * i;
    for (var j = 0u; j < 4u; j = j + 1u) {
      let c = col0 + local.x + 16u * j;
      if (r < rows && c < cols) {
        var value = acc[i][j];
        if (params.has_bias != 0u) {
          value = value + bias[c];
        }
        out[r * cols + c] = value;
      }
    }
  }
}
