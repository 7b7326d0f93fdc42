// Streaming multi-head self-attention of the Mimi transformer with a ring KV cache, for N streams that
// each sit at their own position (docs/pocket-tts.md §1.4).
//
//   qkv     [streams, steps, 3, heads, head_dim]  in_proj output, q and k already rotated (rope.wgsl)
//   cache   [slots, 2, context, heads, head_dim]  per slot: K then V of the last `context` positions,
//                                                 position p at ring index p mod context
//   output  [streams, steps, heads, head_dim]
//
// Query position i = offset + t sees key j iff 0 ≤ i − j < context (upstream `_build_attention_mask`).
// Keys before `offset` come from the ring, keys of this call from qkv itself, so the ring never needs more
// than `context` entries however many steps a call carries; `store_kv` then writes this call's keys into
// the ring, after `attend` has read the entries they replace.

struct AttentionParams {
  streams: u32,
  steps: u32,
  heads: u32,
  head_dim: u32,
  context: u32,
  scale: f32,
}

@group(0) @binding(0) var<uniform> params: AttentionParams;
// Per stream: (cache slot, offset = positions already in that slot's ring).
@group(0) @binding(1) var<storage, read> stream_table: array<vec2u>;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;

const KEYS_PER_BLOCK = 64u;
const MAX_HEAD_DIM = 256u;
const DIMS_PER_THREAD = 4u; // MAX_HEAD_DIM / KEYS_PER_BLOCK

fn qkv_index(stream: u32, step: u32, part: u32, head: u32) -> u32 {
  return ((stream * params.steps + step) * 3u + part) * params.heads * params.head_dim + head * params.head_dim;
}

fn ring_index(slot: u32, kv: u32, position: u32, head: u32) -> u32 {
  return ((slot * 2u + kv) * params.context + position % params.context) * params.heads * params.head_dim + head * params.head_dim;
}

// ---- attend: one workgroup per (head, step, stream); a flash-style online softmax over blocks of keys.

@group(0) @binding(3) var<storage, read> cache_in: array<f32>;
@group(0) @binding(4) var<storage, read_write> output: array<f32>;

var<workgroup> query: array<f32, MAX_HEAD_DIM>;
var<workgroup> block_scores: array<f32, KEYS_PER_BLOCK>;

// Where key/value `position` of this stream lives: its base index and whether it is in the ring.
fn key_base(stream: u32, slot: u32, offset: u32, position: u32, kv: u32, head: u32) -> vec2u {
  if (position < offset) {
    return vec2u(ring_index(slot, kv, position, head), 1u);
  }
  return vec2u(qkv_index(stream, position - offset, 1u + kv, head), 0u);
}

fn load_key(location: vec2u, d: u32) -> f32 {
  if (location.y == 1u) {
    return cache_in[location.x + d];
  }
  return qkv[location.x + d];
}

@compute @workgroup_size(KEYS_PER_BLOCK)
fn attend(@builtin(workgroup_id) workgroup: vec3u, @builtin(local_invocation_index) lane: u32) {
  let head = workgroup.x;
  let step = workgroup.y;
  let stream = workgroup.z;
  let head_dim = params.head_dim;
  let slot = stream_table[stream].x;
  let offset = stream_table[stream].y;
  let position = offset + step;
  let first = select(0u, position + 1u - params.context, position + 1u > params.context);

  let query_base = qkv_index(stream, step, 0u, head);
  for (var d = lane; d < head_dim; d = d + KEYS_PER_BLOCK) {
    query[d] = qkv[query_base + d];
  }
  workgroupBarrier();

  var running_max = -3.0e38;
  var running_sum = 0.0;
  var acc: array<f32, DIMS_PER_THREAD>;
  for (var r = 0u; r < DIMS_PER_THREAD; r = r + 1u) {
    acc[r] = 0.0;
  }

  for (var block = first; block <= position; block = block + KEYS_PER_BLOCK) {
    let key_position = block + lane;
    var score = -3.0e38;
    if (key_position <= position) {
      let location = key_base(stream, slot, offset, key_position, 0u, head);
      var dot = 0.0;
      for (var d = 0u; d < head_dim; d = d + 1u) {
        dot = dot + query[d] * load_key(location, d);
      }
      score = dot * params.scale;
    }
    block_scores[lane] = score;
    workgroupBarrier();

    let count = min(KEYS_PER_BLOCK, position + 1u - block);
    var block_max = running_max;
    for (var k = 0u; k < count; k = k + 1u) {
      block_max = max(block_max, block_scores[k]);
    }
    let correction = exp(running_max - block_max);
    running_sum = running_sum * correction;
    for (var r = 0u; r < DIMS_PER_THREAD; r = r + 1u) {
      acc[r] = acc[r] * correction;
    }
    for (var k = 0u; k < count; k = k + 1u) {
      let weight = exp(block_scores[k] - block_max);
      running_sum = running_sum + weight;
      let location = key_base(stream, slot, offset, block + k, 1u, head);
      for (var r = 0u; r < DIMS_PER_THREAD; r = r + 1u) {
        let d = lane + r * KEYS_PER_BLOCK;
        if (d < head_dim) {
          acc[r] = acc[r] + weight * load_key(location, d);
        }
      }
    }
    running_max = block_max;
    // The next block overwrites block_scores.
    workgroupBarrier();
  }

  let output_base = ((stream * params.steps + step) * params.heads + head) * head_dim;
  for (var r = 0u; r < DIMS_PER_THREAD; r = r + 1u) {
    let d = lane + r * KEYS_PER_BLOCK;
    if (d < head_dim) {
      output[output_base + d] = acc[r] / running_sum;
    }
  }
}

// ---- store_kv: one thread per (head · head_dim element, step, stream); writes this call's last
// `context` keys and values into the ring.

@group(0) @binding(3) var<storage, read_write> cache_out: array<f32>;

@compute @workgroup_size(64)
fn store_kv(@builtin(global_invocation_id) id: vec3u) {
  let width = params.heads * params.head_dim;
  let element = id.x;
  let step = id.y;
  let stream = id.z;
  // Older steps of a call longer than the window would be overwritten by newer ones in the same ring entry.
  if (element >= width || step >= params.steps || stream >= params.streams || step + params.context < params.steps) {
    return;
  }
  let slot = stream_table[stream].x;
  let position = stream_table[stream].y + step;
  let head = element / params.head_dim;
  let d = element % params.head_dim;
  for (var kv = 0u; kv < 2u; kv = kv + 1u) {
    cache_out[ring_index(slot, kv, position, head) + d] = qkv[qkv_index(stream, step, 1u + kv, head) + d];
  }
}
