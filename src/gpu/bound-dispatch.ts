/**
 * Dispatches of kernels whose entry points bind different subsets of one binding table (the streaming
 * convolutions' `main` / tail entry points). `kernelDispatch` in kernel.ts binds buffers 1…m in order,
 * which fits kernels whose every entry point reads every binding; with `layout: "auto"` a bind group must
 * name exactly the bindings its entry point uses, so these hosts list them by number.
 */
import { computePipeline, packUniforms, uniformBuffer, validateInputs, type KernelDispatch, type UniformFields } from "./kernel.ts";

export function boundDispatch(
  device: GPUDevice,
  kernel: { name: string; entryPoint: string },
  uniforms: UniformFields,
  bindings: ReadonlyArray<readonly [binding: number, buffer: GPUBuffer]>,
  workgroups: readonly [number, number, number],
): KernelDispatch {
  const pipeline = computePipeline(device, kernel.name, kernel.entryPoint);
  const limit = device.limits.maxComputeWorkgroupsPerDimension;
  validateInputs(`${kernel.name}.${kernel.entryPoint}`, { rules: [["workgroups ≤ maxComputeWorkgroupsPerDimension", workgroups.every((count) => count <= limit), `${workgroups.join("×")} workgroups exceed the device limit ${limit} per dimension`]] });
  const bindGroup = device.createBindGroup({
    label: `${kernel.name}.${kernel.entryPoint}`,
    layout: pipeline.getBindGroupLayout(0),
    entries: [[0, uniformBuffer(device, packUniforms(uniforms))] as const, ...bindings].map(([binding, buffer]) => ({ binding, resource: { buffer } })),
  });
  return { label: `${kernel.name}.${kernel.entryPoint}`, pipeline, bindGroup, workgroups };
}

/** Workgroups of 64 invocations covering `count` elements along x. */
export function linearWorkgroups(count: number): [number, number, number] {
  return [Math.ceil(count / 64), 1, 1];
}
