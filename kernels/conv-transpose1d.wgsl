// Streaming ConvTranspose1d, batched over N streams (docs/pocket-tts.md §1.3 "Streaming ConvTranspose"):
// the full transposed convolution of T input frames has (T − 1)·S + K output frames; the stored `partial`
// (P = K − S frames) is added to its first P frames, the first T·S frames are emitted, and the last P frames
// minus the bias become the new partial (so the bias is counted once). Depthwise when groups = channels
// (the 12.5 → 200 Hz upsample, §1.5). Layouts: input [N, Cin, T]; weight [Cin, Cout/groups, K]; bias [Cout];
// partial [slots, Cout, P], batch row n keeping its partial in slot streamTable[2n] (src/gpu/stream-table.ts);
// output [N, Cout, T·S].
//
// `main` covers every frame of the full (emitted + carried) output, [0, T·S + P): x = channel block × frame,
// y = stream; carried frames go to scratch, and `commit_partial` copies scratch to partial afterwards,
// because `main` still reads the old partial while other invocations produce the new one.

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

// Each invocation computes one output frame for CHANNELS consecutive output channels of a group, so each
// input read serves CHANNELS products (2.2× on llvmpipe); invocations are numbered over (channel block,
// frame) together, as calls are often short. Channels past the group's end (depthwise: all but the first)
// read the group's last weights and are not stored.
const CHANNELS = 4u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u) {
  let emitted = params.inLength * params.stride;
  let fullLength = emitted + params.partialLength;
  let outPerGroup = params.outChannels / params.groups;
  let blocksPerGroup = (outPerGroup + CHANNELS - 1u) / CHANNELS;
  let block = id.x / fullLength;
  let u = id.x % fullLength;
  let n = id.y;
  let group = block / blocksPerGroup;
  if (group >= params.groups || n >= params.batch) { return; }
  let firstInGroup = (block % blocksPerGroup) * CHANNELS;
  let inPerGroup = params.inChannels / params.groups;
  let lastInGroup = outPerGroup - 1u;
  let K = params.kernelSize;
  let columns = vec4<u32>(min(firstInGroup, lastInGroup), min(firstInGroup + 1u, lastInGroup), min(firstInGroup + 2u, lastInGroup), min(firstInGroup + 3u, lastInGroup)) * K;
  // Input frames t with 0 ≤ u − t·S < K.
  var firstT = 0u;
  if (u >= K) { firstT = (u - K) / params.stride + 1u; }
  let lastT = min(params.inLength - 1u, u / params.stride);
  var sums = vec4<f32>(0.0);
  for (var t = firstT; t <= lastT; t++) {
    let k = u - t * params.stride;
    for (var ci = group * inPerGroup; ci < (group + 1u) * inPerGroup; ci++) {
      let x = input[(n * params.inChannels + ci) * params.inLength + t];
      let at = columns + vec4<u32>(ci * outPerGroup * K + k);
      sums += x * vec4<f32>(weight[at.x], weight[at.y], weight[at.z], weight[at.w]);
    }
  }
  for (var j = 0u; j < CHANNELS; j++) {
    if (firstInGroup + j > lastInGroup) { break; }
    let co = group * outPerGroup + firstInGroup + j;
    let row = n * params.outChannels + co;
    var sum = sums[j];
    if (u < params.partialLength) { sum += partial[(streamTable[2u * n] * params.outChannels + co) * params.partialLength + u]; }
    if (u < emitted) {
      if (params.hasBias != 0u) { sum += bias[co]; }
      output[row * emitted + u] = sum;
    } else {
      scratch[row * params.partialLength + u - emitted] = sum;
    }
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
