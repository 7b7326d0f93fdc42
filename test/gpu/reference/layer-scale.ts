/** CPU layer-scale residual: residual [rows, channels] + scale [channels] ⊙ update, as a new array. */
export function layerScaleReference(residual: Float32Array, scale: Float32Array, update: Float32Array): Float32Array {
  const channels = scale.length;
  return residual.map((value, index) => value + scale[index % channels]! * update[index]!);
}
