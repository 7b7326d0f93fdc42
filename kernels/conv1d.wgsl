// Causal streaming Conv1d, batched over N streams (docs/pocket-tts.md §1.3 "Causal streaming conv"):
// each call convolves [previous, input] with a *valid* convolution, so the output has inLength / stride
// frames and depends on no future input; `previous` carries the last tailLength = (K − 1)·dilation + 1 −
// stride input frames of each stream to the next call. Optionally adds a residual (ResBlock skip) to the
// output. Layouts: input/residual/output [N, C, T] channel-major per stream; weight [Cout, Cin/groups, K];
// bias [Cout]; previous [slots, Cin, tailLength], batch row n keeping its tail in slot streamTable[2n]
// (src/gpu/stream-table.ts), so any mix of streams runs as one batch without moving state. With
// `replicate` set (pad_mode replicate, the encoder's downsample), a stream's first call (stream-table
// offset 0) pads with copies of its first input frame instead of the zeros a fresh `previous` holds.
//
// Entry points, dispatched in this order within one pass (WebGPU orders storage writes between
// dispatches):
// - `assemble` writes window [N, Cin, tailLength + inLength] = [previous, input], one invocation per element;
// - `main` convolves the window (x = block of CHANNELS output channels × block of FRAMES frames, y = stream);
// - `save_tail` copies the window's last tailLength frames into `previous`.
// Going through the window keeps the tail test out of the multiply-add loop (3× faster on llvmpipe) and
// lets the new tail be saved without overwriting a `previous` that is still being read. With no tail
// (K = 1) the host binds the input itself as the window and dispatches `main` alone.

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
  replicate: u32,
}

@group(0) @binding(0) var<uniform> params: Conv1dParams;
@group(0) @binding(1) var<storage, read> input: array<f32>;
@group(0) @binding(2) var<storage, read_write> previous: array<f32>;
@group(0) @binding(3) var<storage, read_write> window: array<f32>;
@group(0) @binding(4) var<storage, read> weight: array<f32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
@group(0) @binding(6) var<storage, read> residual: array<f32>;
@group(0) @binding(7) var<storage, read_write> output: array<f32>;
@group(0) @binding(8) var<storage, read> streamTable: array<u32>;

fn tailRow(n: u32, channel: u32) -> u32 {
  return streamTable[2u * n] * params.inChannels + channel;
}

@compute @workgroup_size(64)
fn assemble(@builtin(global_invocation_id) id: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let windowLength = params.tailLength + params.inLength;
  let index = id.y * groups.x * 64u + id.x;
  if (index >= params.batch * params.inChannels * windowLength) { return; }
  let position = index % windowLength;
  let row = index / windowLength;
  let n = row / params.inChannels;
  if (position < params.tailLength && params.replicate != 0u && streamTable[2u * n + 1u] == 0u) {
    window[index] = input[row * params.inLength];
  } else if (position < params.tailLength) {
    window[index] = previous[tailRow(n, row % params.inChannels) * params.tailLength + position];
  } else {
    window[index] = input[row * params.inLength + position - params.tailLength];
  }
}

// Each invocation computes FRAMES consecutive output frames of CHANNELS consecutive output channels of a
// group, so every window read serves CHANNELS products and every weight read FRAMES; invocations are
// numbered over (channel block, frame block) together, because per-call lengths are often short (16
// transformer steps per latent) and a workgroup along time alone would idle most lanes. Frames past the
// end and channels past the group's end recompute the last valid one rather than branch; they are not stored.
const FRAMES = 4u;
const CHANNELS = 4u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u) {
  let outPerGroup = params.outChannels / params.groups;
  let channelBlocksPerGroup = (outPerGroup + CHANNELS - 1u) / CHANNELS;
  let frameBlocks = (params.outLength + FRAMES - 1u) / FRAMES;
  let channelBlock = id.x / frameBlocks;
  let firstT = (id.x % frameBlocks) * FRAMES;
  let n = id.y;
  let group = channelBlock / channelBlocksPerGroup;
  if (group >= params.groups || n >= params.batch) { return; }
  let firstInGroup = (channelBlock % channelBlocksPerGroup) * CHANNELS;
  let lastInGroup = outPerGroup - 1u;
  let inPerGroup = params.inChannels / params.groups;
  let firstIn = group * inPerGroup;
  let K = params.kernelSize;
  let windowLength = params.tailLength + params.inLength;
  let lastT = params.outLength - 1u;
  let starts = vec4<u32>(min(firstT, lastT), min(firstT + 1u, lastT), min(firstT + 2u, lastT), min(firstT + 3u, lastT)) * params.stride;
  // Weight rows (co · inPerGroup) of the block's channels.
  let rows = (vec4<u32>(group * outPerGroup) + vec4<u32>(min(firstInGroup, lastInGroup), min(firstInGroup + 1u, lastInGroup), min(firstInGroup + 2u, lastInGroup), min(firstInGroup + 3u, lastInGroup))) * inPerGroup;
  // sums[c][f]: channel c of the block, frame f.
  var sums = mat4x4<f32>();
  for (var ci = 0u; ci < inPerGroup; ci++) {
    let windowRow = starts + vec4<u32>((n * params.inChannels + firstIn + ci) * windowLength);
    let weightAt = (rows + vec4<u32>(ci)) * K;
    for (var k = 0u; k < K; k++) {
      let at = windowRow + vec4<u32>(k * params.dilation);
      let frames = vec4<f32>(window[at.x], window[at.y], window[at.z], window[at.w]);
      sums[0] += weight[weightAt.x + k] * frames;
      sums[1] += weight[weightAt.y + k] * frames;
      sums[2] += weight[weightAt.z + k] * frames;
      sums[3] += weight[weightAt.w + k] * frames;
    }
  }
  for (var c = 0u; c < CHANNELS; c++) {
    if (firstInGroup + c > lastInGroup) { break; }
    let co = group * outPerGroup + firstInGroup + c;
    let rowBase = (n * params.outChannels + co) * params.outLength;
    var base = 0.0;
    if (params.hasBias != 0u) { base = bias[co]; }
    for (var f = 0u; f < FRAMES; f++) {
      let t = firstT + f;
      if (t >= params.outLength) { break; }
      var value = sums[c][f] + base;
      if (params.hasResidual != 0u) { value += residual[rowBase + t]; }
      output[rowBase + t] = value;
    }
  }
}

@compute @workgroup_size(64)
fn save_tail(@builtin(global_invocation_id) id: vec3u) {
  let index = id.x;
  if (index >= params.batch * params.inChannels * params.tailLength) { return; }
  let j = index % params.tailLength;
  let row = index / params.tailLength;
  previous[tailRow(row / params.inChannels, row % params.inChannels) * params.tailLength + j] = window[row * (params.tailLength + params.inLength) + params.inLength + j];
}
