/**
 * WGSL kernel plumbing shared by every kernel host module: source loading from `kernels/<name>.wgsl`, one
 * compiled pipeline per (device, kernel, entry point), the buffer-usage flags and buffer helpers, the input
 * check every host opens with, the one dispatch builder, and the one readback (guarded against device loss).
 *
 * Host modules turn a shape and a set of buffers into a `KernelDispatch` once (uniforms packed, bind group
 * built) and encode it into a caller's compute pass as often as they like, so a whole decoder step is one
 * command submission with no per-step allocation.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

// WebGPU's GPUBufferUsage / GPUMapMode flag values (https://www.w3.org/TR/webgpu/#buffer-usage): not every runtime's WebGPU
// binding installs those globals, and the values are fixed by the spec.
export const BufferUsage = { MAP_READ: 0x1, COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 } as const;
export const MapMode = { READ: 0x1 } as const;

const kernelSources = new Map<string, string>();
const pipelineCaches = new WeakMap<GPUDevice, Map<string, GPUComputePipeline>>();

/** Kernel sources known before any file is read: the browser build bundles them (browser/page/kernel-sources.ts). */
export function provideKernelSources(sources: Readonly<Record<string, string>>): void {
  for (const [name, source] of Object.entries(sources)) kernelSources.set(name, source);
}

/** The WGSL text of `kernels/<name>.wgsl`, resolved from this module so it works from any working directory. */
export function loadKernel(name: string): string {
  const cached = kernelSources.get(name);
  if (cached !== undefined) return cached;
  if (!/^[a-z0-9_-]+$/.test(name)) throw new Error(`kernel name ${JSON.stringify(name)} is not a plain file stem`);
  const path = fileURLToPath(new URL(`../../kernels/${name}.wgsl`, import.meta.url));
  const source = readFileSync(path, "utf8");
  kernelSources.set(name, source);
  return source;
}

/**
 * The compute pipeline of a kernel's entry point, compiled on first use and cached per device. The layout is
 * `auto`, so each entry point's bind group 0 holds exactly the bindings that entry point reads.
 */
function computePipeline(device: GPUDevice, name: string, entryPoint = "main"): GPUComputePipeline {
  let pipelines = pipelineCaches.get(device);
  if (!pipelines) {
    pipelines = new Map();
    pipelineCaches.set(device, pipelines);
  }
  const key = `${name}#${entryPoint}`;
  const cached = pipelines.get(key);
  if (cached) return cached;
  const module = device.createShaderModule({ label: name, code: loadKernel(name) });
  const pipeline = device.createComputePipeline({ label: key, layout: "auto", compute: { module, entryPoint } });
  pipelines.set(key, pipeline);
  return pipeline;
}

// Zero-sized bindings are invalid in WebGPU and storage bindings must be 4-byte multiples.
function bufferByteSize(byteLength: number): number {
  return Math.max(16, Math.ceil(byteLength / 16) * 16);
}

function bytesOf(data: ArrayBufferView | ArrayBuffer): Uint8Array {
  return data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/**
 * A storage buffer (also a copy source and destination) holding `data`, or `byteLength` zero bytes. The size
 * is rounded up to 16 bytes; readers must use the logical length.
 */
export function storageBuffer(device: GPUDevice, dataOrByteLength: ArrayBufferView | ArrayBuffer | number, label?: string): GPUBuffer {
  const byteLength = typeof dataOrByteLength === "number" ? dataOrByteLength : dataOrByteLength.byteLength;
  const buffer = device.createBuffer({
    label,
    size: bufferByteSize(byteLength),
    usage: BufferUsage.STORAGE | BufferUsage.COPY_SRC | BufferUsage.COPY_DST,
    mappedAtCreation: typeof dataOrByteLength !== "number",
  });
  if (typeof dataOrByteLength !== "number") {
    new Uint8Array(buffer.getMappedRange()).set(bytesOf(dataOrByteLength));
    buffer.unmap();
  }
  return buffer;
}

/** A uniform buffer holding the packed words of a kernel's uniform struct (rounded up to 16 bytes). */
function uniformBuffer(device: GPUDevice, words: Uint32Array | ArrayBuffer): GPUBuffer {
  const bytes = bytesOf(words);
  const buffer = device.createBuffer({ size: bufferByteSize(bytes.byteLength), usage: BufferUsage.UNIFORM | BufferUsage.COPY_DST, mappedAtCreation: true });
  new Uint8Array(buffer.getMappedRange()).set(bytes);
  buffer.unmap();
  return buffer;
}

/**
 * Packs a uniform struct made only of 4-byte scalars (`u32` and `f32`, in declaration order) — the only kind
 * of uniform struct the kernels declare, so no member ever needs alignment padding.
 */
export type UniformFields = ReadonlyArray<readonly ["u32" | "f32", number]>;

function packUniforms(fields: UniformFields): Uint32Array {
  const words = new Uint32Array(Math.max(4, Math.ceil(fields.length / 4) * 4));
  const floats = new Float32Array(words.buffer);
  fields.forEach(([type, value], index) => {
    if (type === "f32") floats[index] = value;
    else {
      if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) throw new Error(`uniform field ${index} = ${value} is not a u32`);
      words[index] = value;
    }
  });
  return words;
}

/** Raised (as a rejection) by work on a device that was lost or destroyed, instead of waiting forever. */
export class GpuDeviceLostError extends Error {
  constructor(
    readonly reason: string,
    detail: string,
  ) {
    super(`WebGPU device lost (${reason})${detail ? `: ${detail}` : ""}`);
    this.name = "GpuDeviceLostError";
  }
}

/**
 * Settles like `work`, unless the device is lost first: then rejects with GpuDeviceLostError. Wrap every
 * wait on the GPU (buffer maps, `onSubmittedWorkDone`) so a lost device is an error, not a hang.
 */
export function whileDeviceAlive<T>(device: GPUDevice, work: Promise<T>): Promise<T> {
  const watch = lossWatch(device);
  if (watch.lost) return Promise.reject(watch.lost);
  return new Promise<T>((resolve, reject) => {
    // One listener per device rejects the waiters still pending when it is lost; each waiter leaves the
    // set when it settles, so nothing accumulates on the device's lifelong `lost` promise.
    watch.waiters.add(reject);
    work.then(resolve, reject).finally(() => watch.waiters.delete(reject));
  });
}

interface LossWatch {
  waiters: Set<(error: GpuDeviceLostError) => void>;
  lost?: GpuDeviceLostError;
}

const lossWatches = new WeakMap<GPUDevice, LossWatch>();

function lossWatch(device: GPUDevice): LossWatch {
  let watch = lossWatches.get(device);
  if (!watch) {
    const created: LossWatch = { waiters: new Set() };
    watch = created;
    lossWatches.set(device, created);
    void device.lost.then((info) => {
      created.lost = new GpuDeviceLostError(info.reason ?? "unknown", info.message ?? "");
      for (const reject of created.waiters) reject(created.lost);
      created.waiters.clear();
    });
  }
  return watch;
}

/** The first `floats` floats of a storage buffer (a copy source), to come back to the CPU. */
export interface ReadbackSource {
  buffer: GPUBuffer;
  floats: number;
}

/**
 * The one way results come back to the CPU: copies each source into a staging buffer after the work already
 * recorded in `encoder`, submits it (before this returns its promise), then maps, copies out and unmaps each
 * staging buffer in turn. On a device that is lost, before or meanwhile, it rejects with GpuDeviceLostError
 * rather than hanging or surfacing the binding's own error for the symptom (an aborted map, a missing queue).
 */
export async function submitAndReadBack(device: GPUDevice, encoder: GPUCommandEncoder, sources: readonly ReadbackSource[]): Promise<Float32Array[]> {
  validateInputs("readback", { buffers: Object.fromEntries(sources.map(({ buffer, floats }, index) => [`source ${index}`, [buffer, floats] as const])) });
  const stagings: Array<GPUBuffer | null> = [];
  try {
    for (const { buffer, floats } of sources) {
      const staging = floats === 0 ? null : device.createBuffer({ label: "readback", size: floats * 4, usage: BufferUsage.MAP_READ | BufferUsage.COPY_DST });
      if (staging) encoder.copyBufferToBuffer(buffer, 0, staging, 0, floats * 4);
      stagings.push(staging);
    }
    device.queue.submit([encoder.finish()]);
    const results: Float32Array[] = [];
    for (const staging of stagings) {
      if (!staging) {
        results.push(new Float32Array(0));
        continue;
      }
      await whileDeviceAlive(device, staging.mapAsync(MapMode.READ));
      results.push(new Float32Array(staging.getMappedRange().slice(0)));
      staging.unmap();
    }
    return results;
  } catch (error) {
    throw (await lossOf(device)) ?? error;
  } finally {
    for (const staging of stagings) staging?.destroy();
  }
}

/** The device's loss, if it has been reported by now (a lost device's `lost` promise is already settled). */
async function lossOf(device: GPUDevice): Promise<GpuDeviceLostError | undefined> {
  const watch = lossWatch(device);
  // The watch's own reaction to `lost` was registered first, so it has run by the time this race settles.
  await Promise.race([device.lost, undefined]);
  return watch.lost;
}

/**
 * Workgroup grid for one-thread-per-element kernels that index x + y · (groups.x · workgroupSize), so
 * element counts past 65535 workgroups spill into a second dimension.
 */
export function elementwiseGrid(device: GPUDevice, count: number, workgroupSize: number): [number, number, number] {
  const groups = Math.ceil(count / workgroupSize);
  const limit = device.limits.maxComputeWorkgroupsPerDimension;
  if (groups <= limit) return [groups, 1, 1];
  return [limit, Math.ceil(groups / limit), 1];
}

/**
 * A kernel host was handed a shape or buffers its kernel cannot run on. `rule` states the broken rule as the
 * host checks it ("slots ≥ batch", "weight holds the shape"), so the error says which rule failed, not only
 * the numbers.
 */
export class KernelInputError extends RangeError {
  constructor(
    readonly kernel: string,
    readonly rule: string,
    detail: string,
  ) {
    super(`${kernel}: ${detail} (rule: ${rule})`);
    this.name = "KernelInputError";
  }
}

export interface KernelInputs {
  /** Shape numbers that must be positive integers (a zero-sized dispatch is never meant). */
  dims?: Readonly<Record<string, number>>;
  /** The kernel's own rules, checked in order after `dims`: the rule, whether it holds, what broke it. */
  rules?: ReadonlyArray<readonly [rule: string, holds: boolean, detail: string]>;
  /**
   * Each bound buffer with the floats the shape makes the kernel touch: a short binding would read or write
   * out of range. An optional buffer that is absent (null or undefined) is skipped.
   */
  buffers?: Readonly<Record<string, readonly [buffer: GPUBuffer | null | undefined, floats: number]>>;
}

/**
 * Every host's opening check, after onnxruntime's `validateInputs`: throws a KernelInputError for the first
 * broken rule (dims, then the kernel's rules, then buffer sizes) before anything is built.
 */
export function validateInputs(kernel: string, inputs: KernelInputs): void {
  for (const [name, value] of Object.entries(inputs.dims ?? {})) {
    if (!Number.isInteger(value) || value < 1) throw new KernelInputError(kernel, `${name} is a positive integer`, `${name} = ${value}`);
  }
  for (const [rule, holds, detail] of inputs.rules ?? []) {
    if (!holds) throw new KernelInputError(kernel, rule, detail);
  }
  for (const [name, [buffer, floats]] of Object.entries(inputs.buffers ?? {})) {
    if (buffer && buffer.size < floats * 4) throw new KernelInputError(kernel, `${name} holds the shape`, `the ${name} buffer of ${buffer.size} bytes is smaller than the ${floats} floats it must hold`);
  }
}

/** One prepared kernel launch: pipeline, bound buffers and workgroup counts, encodable any number of times. */
export interface KernelDispatch {
  readonly label: string;
  readonly pipeline: GPUComputePipeline;
  readonly bindGroup: GPUBindGroup;
  readonly workgroups: readonly [number, number, number];
}

/** Buffers by binding number, as the WGSL declares them (`@group(0) @binding(n)`); 0 is the uniforms'. */
export type KernelBindings = ReadonlyArray<readonly [binding: number, buffer: GPUBuffer]>;

/**
 * The one way a host builds a dispatch: bind group 0 holds the packed `uniforms` at binding 0 and each
 * listed buffer at its own binding number. With `layout: "auto"` an entry point's bind group must name
 * exactly the bindings that entry point reads, so entry points that read a subset of a kernel's table (the
 * streaming convolutions' window, tail and partial passes) list just those.
 */
export function kernelDispatch(
  device: GPUDevice,
  kernel: { name: string; entryPoint?: string },
  uniforms: UniformFields,
  bindings: KernelBindings,
  workgroups: readonly [number, number, number],
): KernelDispatch {
  const label = kernel.entryPoint ? `${kernel.name}.${kernel.entryPoint}` : kernel.name;
  const limit = device.limits.maxComputeWorkgroupsPerDimension;
  const numbers = bindings.map(([binding]) => binding);
  validateInputs(label, {
    rules: [
      ["bindings are distinct and ≥ 1", numbers.every((binding) => Number.isInteger(binding) && binding >= 1) && new Set(numbers).size === numbers.length, `bindings ${numbers.join(", ")} (0 holds the uniforms)`],
      ["workgroups ≤ maxComputeWorkgroupsPerDimension", workgroups.every((count) => count <= limit), `${workgroups.join("×")} workgroups exceed the device limit ${limit} per dimension`],
    ],
  });
  const pipeline = computePipeline(device, kernel.name, kernel.entryPoint);
  const bindGroup = device.createBindGroup({
    label,
    layout: pipeline.getBindGroupLayout(0),
    entries: [[0, uniformBuffer(device, packUniforms(uniforms))] as const, ...bindings].map(([binding, buffer]) => ({ binding, resource: { buffer } })),
  });
  return { label, pipeline, bindGroup, workgroups };
}

/** Workgroups of 64 invocations covering `count` elements along x, for entry points that index x only. */
export function linearWorkgroups(count: number): [number, number, number] {
  return [Math.ceil(count / 64), 1, 1];
}

/** Encodes dispatches in order into one compute pass; WebGPU orders storage writes between dispatches. */
export function encodeDispatches(pass: GPUComputePassEncoder, dispatches: readonly KernelDispatch[]): void {
  for (const dispatch of dispatches) {
    if (dispatch.workgroups.some((count) => count === 0)) continue;
    pass.setPipeline(dispatch.pipeline);
    pass.setBindGroup(0, dispatch.bindGroup);
    pass.dispatchWorkgroups(...dispatch.workgroups);
  }
}
