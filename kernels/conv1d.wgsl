// Causal streaming Conv1d, batched over N streams (docs/pocket-tts.md §1.3 "Causal streaming conv"):
// each call convolves [previous, input] with a *valid* convolution, so the output has inLength / stride
// frames and depends on no future input; `previous` carries the last tailLength = (K − 1)·dilation + 1 −
// stride input frames of each stream to the next call. Optionally adds a residual (ResBlock skip) to the
// output. Layouts: input/residual/output [N, C, T] channel-major per stream; weight [Cout, Cin/groups, K];
// bias [Cout]; previous [slots, Cin, tailLength], batch row n keeping its tail in slot streamTable[2n]
// (src/gpu/stream-table.ts), so any mix of streams runs as one batch without moving state.
//
// Entry points, dispatched in this order within one pass (WebGPU orders storage writes between
// dispatches): `main` (one invocation per output frame: x = time, y = output channel, z = stream),
// `save_tail` (new tail → scratch, one invocation per tail element), `commit_tail` (scratch → previous).
// The tail goes through scratch because it may shift within `previous` when inLength < tailLength.

struct Conv1dParams {
  batch: u32,
  inChannels: u32,
  outChannels: u32,
  inLength: u32,
  outLength: u32,
  kernelSize: u32,
  stride: u32,
  dilation: u32,
  groups: u32,
  tailLength: u32,
  hasBias: u32,
  hasResidual: u32,
}

@group(0) @binding(0) var<uniform> params: Conv1dParams;
@group(0) @binding(1) var<storage, read> input: array<f32>;
@group(0) @binding(2) var<storage, read_write> previous: array<f32>;
@group(0) @binding(3) var<storage, read_write> scratch: array<f32>;
@group(0) @binding(4) var<storage, read> weight: array<f32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
@group(0) @binding(6) var<storage, read> residual: array<f32>;
@group(0) @binding(7) var<storage, read_write> output: array<f32>;
@group(0) @binding(8) var<storage, read> streamTable: array<u32>;

fn tailRow(n: u32, channel: u32) -> u32 {
  return streamTable[2u * n] * params.inChannels + channel;
}

// Frame `position` of the stream's [previous, input] concatenation, channel `channel`.
fn concatenated(n: u32, channel: u32, position: u32) -> f32 {
  if (position < params.tailLength) {
    return previous[tailRow(n, channel) * params.tailLength + position];
  }
  return input[(n * params.inChannels + channel) * params.inLength + position - params.tailLength];
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u) {
  let t = id.x;
  let co = id.y;
  let n = id.z;
  if (t >= params.outLength || co >= params.outChannels || n >= params.batch) { return; }
  let inPerGroup = params.inChannels / params.groups;
  let outPerGroup = params.outChannels / params.groups;
  let firstIn = (co / outPerGroup) * inPerGroup;
  var sum = 0.0;
  if (params.hasBias != 0u) { sum = bias[co]; }
  let start = t * params.stride;
  for (var ci = 0u; ci < inPerGroup; ci++) {
    let weightBase = (co * inPerGroup + ci) * params.kernelSize;
    let channel = firstIn + ci;
    for (var k = 0u; k < params.kernelSize; k++) {
      sum += weight[weightBase + k] * concatenated(n, channel, start + k * params.dilation);
    }
  }
  let outIndex = (n * params.outChannels + co) * params.outLength + t;
  if (params.hasResidual != 0u) { sum += residual[outIndex]; }
  output[outIndex] = sum;
}

@compute @workgroup_size(64)
fn save_tail(@builtin(global_invocation_id) id: vec3u) {
  let index = id.x;
  if (index >= params.batch * params.inChannels * params.tailLength) { return; }
  let j = index % params.tailLength;
  let row = index / params.tailLength;
  scratch[index] = concatenated(row / params.inChannels, row % params.inChannels, params.inLength + j);
}

@compute @workgroup_size(64)
fn commit_tail(@builtin(global_invocation_id) id: vec3u) {
  let index = id.x;
  if (index >= params.batch * params.inChannels * params.tailLength) { return; }
  let row = index / params.tailLength;
  previous[tailRow(row / params.inChannels, row % params.inChannels) * params.tailLength + index % params.tailLength] = scratch[index];
}
