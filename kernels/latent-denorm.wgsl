// Latent denormalisation z = latent · emb_std + emb_mean (docs/pocket-tts.md §1.6, §6.2), fused with the
// move from the FlowLM's frame-major rows [N, T, D] to the channel-major [N, D, T] layout the 1×1 output
// projection (a Conv1d) reads. One invocation per output element: x = frame, y = channel, z = stream.

struct LatentDenormParams {
  batch: u32,
  latentDim: u32,
  frames: u32,
}

@group(0) @binding(0) var<uniform> params: LatentDenormParams;
@group(0) @binding(1) var<storage, read> latents: array<f32>;
@group(0) @binding(2) var<storage, read> embStd: array<f32>;
@group(0) @binding(3) var<storage, read> embMean: array<f32>;
@group(0) @binding(4) var<storage, read_write> output: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u) {
  let t = id.x;
  let d = id.y;
  let n = id.z;
  if (t >= params.frames || d >= params.latentDim || n >= params.batch) { return; }
  let value = latents[(n * params.frames + t) * params.latentDim + d];
  output[(n * params.latentDim + d) * params.frames + t] = value * embStd[d] + embMean[d];
}
