/**
 * CPU Mimi decoder transformer (upstream `ProjectedTransformer` with identity projections), composed from
 * the per-op references: x [N, C, T] → [N, C, T]. Each stream's state is its full key/value history per
 * layer (upstream's linear cache), so it checks the GPU ring rather than mirroring it.
 *
 * `tensor(name)` returns `layers.{i}.<name>` with Linear weights as [in, out] (see mimi-transformer.ts).
 */
import type { MimiTransformerConfig } from "../../../src/models/pocket/mimi-wgsl/transformer.ts";
import { attentionReference, type StreamHistory } from "./attention.ts";
import { geluReference } from "./gelu.ts";
import { layerNormReference } from "./layer-norm.ts";
import { layerScaleReference } from "./layer-scale.ts";
import { matmulReference } from "./matmul.ts";
import { ropeReference } from "./rope.ts";
import { transposeReference } from "./transpose.ts";

/** One stream's transformer state: per layer, every key and value it has produced. */
export interface MimiTransformerReferenceState {
  layers: StreamHistory[];
}

export function freshMimiTransformerReferenceState(config: MimiTransformerConfig): MimiTransformerReferenceState {
  return { layers: Array.from({ length: config.layers }, () => ({ keys: [], values: [] })) };
}

/** Runs one call for N streams of T steps; each state grows by T positions. */
export function mimiTransformerReference(
  config: MimiTransformerConfig,
  tensor: (name: string) => Float32Array,
  input: Float32Array,
  states: MimiTransformerReferenceState[],
  steps: number,
): Float32Array {
  const { dModel, heads, dimFeedforward, context, maxPeriod, eps } = config;
  const streams = states.length;
  const headDim = dModel / heads;
  const rows = streams * steps;
  let x = transposeReference(input, { batch: streams, rows: dModel, cols: steps });
  for (let layer = 0; layer < config.layers; layer++) {
    const weight = (name: string) => tensor(`layers.${layer}.${name}`);
    const offsets = states.map((state) => state.layers[layer]!.keys.length);
    let normed = layerNormReference(x, weight("norm1.weight"), weight("norm1.bias"), { rows, channels: dModel, eps });
    const qkv = ropeReference(matmulReference(normed, weight("self_attn.in_proj.weight"), null, { rows, inner: dModel, cols: 3 * dModel }), offsets, {
      streams,
      steps,
      heads,
      headDim,
      maxPeriod,
    });
    const attended = attentionReference(
      qkv,
      states.map((state) => state.layers[layer]!),
      { streams, steps, heads, headDim, context },
    );
    x = layerScaleReference(x, weight("layer_scale_1.scale"), matmulReference(attended, weight("self_attn.out_proj.weight"), null, { rows, inner: dModel, cols: dModel }));
    normed = layerNormReference(x, weight("norm2.weight"), weight("norm2.bias"), { rows, channels: dModel, eps });
    const hidden = geluReference(matmulReference(normed, weight("linear1.weight"), null, { rows, inner: dModel, cols: dimFeedforward }));
    x = layerScaleReference(x, weight("layer_scale_2.scale"), matmulReference(hidden, weight("linear2.weight"), null, { rows, inner: dimFeedforward, cols: dModel }));
  }
  return transposeReference(x, { batch: streams, rows: steps, cols: dModel });
}
