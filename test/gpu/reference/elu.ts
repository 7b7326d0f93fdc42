/** Plain TypeScript reference of ELU with α = 1 (kernels/elu.wgsl). */
export function referenceElu(input: Float32Array): Float32Array {
  return input.map((x) => (x > 0 ? x : Math.expm1(x)));
}
