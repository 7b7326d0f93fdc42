// Streaming ConvTranspose1d, batched over N streams (docs/pocket-tts.md §1.3 "Streaming ConvTranspose"):
// the full transposed convolution of T input frames has (T − 1)·S + K output frames; the stored `partial`
// (P = K − S frames) is added to its first P frames, the first T·S frames are emitted, and the last P frames
// minus the bias become the new partial (so the bias is counted once). Depthwise when groups = channels
// (the 12.5 → 200 Hz upsample, §1.5). Layouts: input [N, Cin, T]; weight [Cin, Cout/groups, K]; bias [Cout];
// partial [slots, Cout, P], batch row n keeping its partial in slot streamTable[2n] (src/gpu/stream-table.ts);
// output [N, Cout, T·S].
//
// `main` has one invocation per frame of the full (emitted + carried) output: x = frame in [0, T·S + P),
// y = output channel, z = stream; carried frames go to scratch, and `commit_partial` copies scratch to
// partial afterwards, because `main` still reads the old partial while other invocations produce the new one.

struct ConvTranspose1dParams {
  batch: u32,
  inChannels: u32,
  outChannels: u32,
  inLength: u32,
  kernelSize: u32,
  stride: u32,
  groups: u32,
  partialLength: u32,
  hasBias: u32,
}

@group(0) @binding(0) var<uniform> params: ConvTranspose1dParams;
@group(0) @binding(1) var<storage, read> input: array<f32>;
@group(0) @binding(2) var<storage, read_write> partial: array<f32>;
@group(0) @binding(3) var<storage, read_write> scratch: array<f32>;
@group(0) @binding(4) var<storage, read> weight: array<f32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
@group(0) @binding(6) var<storage, read_write> output: array<f32>;
@group(0) @binding(7) var<storage, read> streamTable: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u) {
  let u = id.x;
  let co = id.y;
  let n = id.z;
  let emitted = params.inLength * params.stride;
  if (u >= emitted + params.partialLength || co >= params.outChannels || n >= params.batch) { return; }
  let inPerGroup = params.inChannels / params.groups;
  let outPerGroup = params.outChannels / params.groups;
  let group = co / outPerGroup;
  let coInGroup = co % outPerGroup;
  // Input frames t with 0 ≤ u − t·S < K.
  var firstT = 0u;
  if (u >= params.kernelSize) { firstT = (u - params.kernelSize) / params.stride + 1u; }
  let lastT = min(params.inLength - 1u, u / params.stride);
  var sum = 0.0;
  for (var ci = group * inPerGroup; ci < (group + 1u) * inPerGroup; ci++) {
    let inputBase = (n * params.inChannels + ci) * params.inLength;
    let weightBase = (ci * outPerGroup + coInGroup) * params.kernelSize;
    for (var t = firstT; t <= lastT; t++) {
      sum += input[inputBase + t] * weight[weightBase + u - t * params.stride];
    }
  }
  let row = n * params.outChannels + co;
  if (u < params.partialLength) { sum += partial[(streamTable[2u * n] * params.outChannels + co) * params.partialLength + u]; }
  if (u < emitted) {
    if (params.hasBias != 0u) { sum += bias[co]; }
    output[row * emitted + u] = sum;
  } else {
    scratch[row * params.partialLength + u - emitted] = sum;
  }
}

@compute @workgroup_size(64)
fn commit_partial(@builtin(global_invocation_id) id: vec3u) {
  let index = id.x;
  if (index >= params.batch * params.outChannels * params.partialLength) { return; }
  let row = index / params.partialLength;
  let n = row / params.outChannels;
  partial[(streamTable[2u * n] * params.outChannels + row % params.outChannels) * params.partialLength + index % params.partialLength] = scratch[index];
}
