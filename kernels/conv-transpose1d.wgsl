// Streaming ConvTranspose1d, batched over N streams (docs/pocket-tts.md §1.3 "Streaming ConvTranspose"):
// the full transposed convolution of T input frames has (T − 1)·S + K output frames; the stored `partial`
// (P = K − S frames) is added to its first P frames, the first T·S frames are emitted, and the last P frames
// minus the bias become the new partial (so the bias is counted once). Depthwise when groups = channels
// (the 12.5 → 200 Hz upsample, §1.5). Layouts: input [N, Cin, T]; weight [Cin, Cout/groups, K]; bias [Cout];
// partial [slots, Cout, P], batch row n keeping its partial in slot streamTable[2n] (src/gpu/stream-table.ts);
// output [N, Cout, T·S].
//
// `main` covers every frame of the full (emitted + carried) output, [0, T·S + P): x = channel block × phase
// × frame block, y = stream; carried frames go to scratch, and `commit_partial` copies scratch to partial afterwards,
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

// Polyphase: output frame u = t·S + r receives input frame t − m through kernel tap m·S + r. Each
// invocation takes one phase r, FRAMES consecutive t (frames u = (t₀ + j)·S + r) and CHANNELS consecutive
// output channels of a group: the FRAMES outputs of a channel share every weight read and the CHANNELS
// outputs of a frame share every input read (about 4× the one-output-per-invocation kernel on llvmpipe).
// Invocations are numbered over (channel block, phase, frame block) together, as calls are often short.
// Channels past the group's end (depthwise: all but the first) and frames past the end compute from
// clamped indices and are not stored.
const FRAMES = 4u;
const CHANNELS = 4u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u) {
  let S = params.stride;
  let K = params.kernelSize;
  let emitted = params.inLength * S;
  let fullLength = emitted + params.partialLength;
  let phaseFrames = (fullLength + S - 1u) / S;
  let frameBlocks = (phaseFrames + FRAMES - 1u) / FRAMES;
  let outPerGroup = params.outChannels / params.groups;
  let channelBlocksPerGroup = (outPerGroup + CHANNELS - 1u) / CHANNELS;
  let frameBlock = id.x % frameBlocks;
  let r = (id.x / frameBlocks) % S;
  let channelBlock = id.x / (frameBlocks * S);
  let n = id.y;
  let group = channelBlock / channelBlocksPerGroup;
  if (group >= params.groups || n >= params.batch) { return; }
  let firstInGroup = (channelBlock % channelBlocksPerGroup) * CHANNELS;
  let lastInGroup = outPerGroup - 1u;
  let inPerGroup = params.inChannels / params.groups;
  let t0 = frameBlock * FRAMES;
  let columns = vec4<u32>(min(firstInGroup, lastInGroup), min(firstInGroup + 1u, lastInGroup), min(firstInGroup + 2u, lastInGroup), min(firstInGroup + 3u, lastInGroup)) * K;
  // sums[c][j]: channel c of the block, output frame (t0 + j)·S + r.
  var sums = mat4x4<f32>();
  for (var tap = r; tap < K; tap += S) {
    let m = tap / S;
    // Input frames t0 + j − m, zero outside [0, T).
    let frames = vec4<i32>(vec4<u32>(t0) + vec4<u32>(0u, 1u, 2u, 3u)) - vec4<i32>(i32(m));
    let valid = (frames >= vec4<i32>(0)) & (frames < vec4<i32>(i32(params.inLength)));
    let clamped = vec4<u32>(clamp(frames, vec4<i32>(0), vec4<i32>(i32(params.inLength) - 1)));
    for (var ci = group * inPerGroup; ci < (group + 1u) * inPerGroup; ci++) {
      let inputRow = clamped + vec4<u32>((n * params.inChannels + ci) * params.inLength);
      let x = select(vec4<f32>(0.0), vec4<f32>(input[inputRow.x], input[inputRow.y], input[inputRow.z], input[inputRow.w]), valid);
      let at = columns + vec4<u32>(ci * outPerGroup * K + tap);
      sums[0] += weight[at.x] * x;
      sums[1] += weight[at.y] * x;
      sums[2] += weight[at.z] * x;
      sums[3] += weight[at.w] * x;
    }
  }
  for (var c = 0u; c < CHANNELS; c++) {
    if (firstInGroup + c > lastInGroup) { break; }
    let co = group * outPerGroup + firstInGroup + c;
    let row = n * params.outChannels + co;
    for (var j = 0u; j < FRAMES; j++) {
      let u = (t0 + j) * S + r;
      if (u >= fullLength) { break; }
      var sum = sums[c][j];
      if (u < params.partialLength) { sum += partial[(streamTable[2u * n] * params.outChannels + co) * params.partialLength + u]; }
      if (u < emitted) {
        if (params.hasBias != 0u) { sum += bias[co]; }
        output[row * emitted + u] = sum;
      } else {
        scratch[row * params.partialLength + u - emitted] = sum;
      }
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
