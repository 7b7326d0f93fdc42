/**
 * WebGPU device acquisition for every runtime we serve from: `navigator.gpu` where the runtime has it
 * (Deno, browsers), the `bun-webgpu` package (Dawn through bun:ffi) under Bun. One device per process,
 * shared by every kernel (and meant to be handed to onnxruntime-web's WebGPU EP so tensors stay on it).
 *
 * Software adapters need care (docs/architecture.md "Runtimes and devices"), all seen on Debian 12 with
 * Mesa 22.3 (llvmpipe / lavapipe):
 * - Dawn's default adapter there is its Null backend (`info.device === "null-backend"`): it accepts every
 *   call and computes nothing. Dawn skips lavapipe on Vulkan ("Vulkan shaderUniform*ArrayDynamicIndexing
 *   required"), and its OpenGL ES discovery fails with EGL_NOT_INITIALIZED unless EGL_PLATFORM=surfaceless
 *   is in the C environment before EGL starts. With it, `{ featureLevel: "compatibility", backendType:
 *   "OpenGLES" }` yields llvmpipe ("OpenGL ES 3.2 Mesa 22.3.6"), which computes correctly.
 * - bun-webgpu packs every limit of a device descriptor, filling the unnamed ones with WebGPU's core
 *   defaults, and rejects the request when a default exceeds a compatibility adapter's limit. So the device
 *   is requested with all of the adapter's own limits, which also lifts maxStorageBuffersPerShaderStage from
 *   the default 8 (kernels with many tensors need more).
 * - Deno's built-in WebGPU (wgpu) takes lavapipe on Vulkan directly and reports it as a fallback adapter.
 *
 * Every new device runs a self-test kernel before anyone gets it, so a backend that silently computes
 * zeros (or garbage) is refused with a clear Error instead of producing silent audio.
 */
import { isBun, isDeno } from "../runtime/detect.ts";
import { BufferUsage, submitAndReadBack } from "./kernel.ts";

export interface GpuContext {
  device: GPUDevice;
  /** Human-readable adapter name, for logs and error messages. */
  adapterDescription: string;
  /** A CPU rasteriser (llvmpipe, lavapipe, SwiftShader) rather than a real GPU. */
  isSoftware: boolean;
  backend: "navigator.gpu" | "bun-webgpu" | "webgpu-dawn";
}

/** What a machine without any usable adapter should install (CI installs it too). */
const SOFTWARE_ADAPTER_INSTALL_HINT = "apt-get install -y mesa-vulkan-drivers libgl1-mesa-dri libegl-mesa0 libegl1 (Mesa lavapipe for Vulkan, llvmpipe for EGL/OpenGL ES)";

type Backend = GpuContext["backend"];

interface AdapterChoice {
  adapter: GPUAdapter;
  backend: Backend;
}

/** Adapter info fields as the runtimes report them; bun-webgpu adds Dawn's numeric `backendType`/`adapterType`. */
interface AdapterInfoFields {
  vendor?: string;
  architecture?: string;
  device?: string;
  description?: string;
  isFallbackAdapter?: boolean;
  backendType?: number;
}

// WGPUBackendType_Null in webgpu.h.
const DAWN_NULL_BACKEND = 1;
const SOFTWARE_ADAPTER_NAMES = /llvmpipe|lavapipe|softpipe|swiftshader|software/i;

function adapterInfo(adapter: GPUAdapter): AdapterInfoFields {
  return ((adapter as unknown as { info?: AdapterInfoFields }).info ?? {}) as AdapterInfoFields;
}

function describeAdapter(info: AdapterInfoFields): string {
  const parts = [info.description, info.device, info.vendor, info.architecture].filter((part): part is string => typeof part === "string" && part.length > 0 && part !== "0");
  return [...new Set(parts)].join(" / ") || "unnamed adapter";
}

function isNullBackend(info: AdapterInfoFields): boolean {
  return info.device === "null-backend" || info.backendType === DAWN_NULL_BACKEND;
}

function isSoftwareAdapter(adapter: GPUAdapter, info: AdapterInfoFields): boolean {
  const fallback = info.isFallbackAdapter ?? (adapter as unknown as { isFallbackAdapter?: boolean }).isFallbackAdapter;
  return fallback === true || SOFTWARE_ADAPTER_NAMES.test(describeAdapter(info));
}

/** Sets a variable in the C environment (what Mesa's EGL reads), which Bun's `process.env` does not reach. */
async function setNativeEnvironment(name: string, value: string): Promise<void> {
  const { dlopen, FFIType } = await import("bun:ffi");
  const libc = dlopen("libc.so.6", { setenv: { args: [FFIType.cstring, FFIType.cstring, FFIType.i32], returns: FFIType.i32 } });
  try {
    const encoder = new TextEncoder();
    const status = libc.symbols.setenv(encoder.encode(`${name}\0`), encoder.encode(`${value}\0`), 0);
    if (status !== 0) throw new Error(`setenv(${name}) failed`);
  } finally {
    libc.close();
  }
}

async function bunWebGpuAdapter(): Promise<AdapterChoice | null> {
  // Must precede the first EGL initialisation in the process (see the module comment). Only on Linux:
  // elsewhere Dawn has Metal / D3D and no EGL.
  if (process.platform === "linux" && !process.env.EGL_PLATFORM) {
    await setNativeEnvironment("EGL_PLATFORM", "surfaceless");
    process.env.EGL_PLATFORM = "surfaceless";
  }
  const { createGPUInstance, globals } = await import("bun-webgpu");
  // Installs GPUBufferUsage, GPUMapMode, … which code written against the WebGPU spec expects as globals.
  globals();
  const gpu = createGPUInstance() as unknown as GPU;
  const attempts: Array<GPURequestAdapterOptions & Record<string, unknown>> = [{ powerPreference: "high-performance" }, { featureLevel: "compatibility", backendType: "OpenGLES" }];
  for (const options of attempts) {
    const adapter = await gpu.requestAdapter(options);
    if (adapter && !isNullBackend(adapterInfo(adapter))) return { adapter, backend: "bun-webgpu" };
  }
  return null;
}

async function navigatorAdapter(): Promise<AdapterChoice | null> {
  const gpu = (globalThis.navigator as Navigator | undefined)?.gpu;
  if (!gpu) return null;
  const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter || isNullBackend(adapterInfo(adapter))) return null;
  return { adapter, backend: "navigator.gpu" };
}

async function chooseAdapter(): Promise<AdapterChoice | null> {
  if (isBun()) return bunWebGpuAdapter();
  if (isDeno() || (globalThis.navigator as Navigator | undefined)?.gpu) return navigatorAdapter();
  throw new Error("no WebGPU binding for this runtime: run under Bun (bun-webgpu) or Deno (navigator.gpu)");
}

/** Every numeric limit the adapter reports, whether as own fields (bun-webgpu) or prototype getters (Deno). */
function adapterLimits(adapter: GPUAdapter): Record<string, number> {
  const limits = adapter.limits as unknown as Record<string, unknown>;
  const names = new Set<string>();
  for (let object: object | null = limits; object && object !== Object.prototype; object = Object.getPrototypeOf(object)) {
    for (const name of Object.getOwnPropertyNames(object)) names.add(name);
  }
  const required: Record<string, number> = {};
  for (const name of names) {
    const value = limits[name];
    if (typeof value === "number" && /^(max|min)[A-Z]/.test(name)) required[name] = value;
  }
  return required;
}

// out[i] = a[i] · scale + f32(i) · offset: exercises a storage read, a uniform read, the invocation id and
// bounds checking over a non-multiple of the workgroup size.
const SELF_TEST_KERNEL = /* wgsl */ `
struct Params { count: u32, scale: f32, offset: f32, pad: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u) {
  if (id.x >= params.count) { return; }
  out[id.x] = a[id.x] * params.scale + f32(id.x) * params.offset;
}`;
const SELF_TEST_COUNT = 100;

/** Runs the self-test kernel; throws when the device reports an error or computes anything else. */
async function selfTest(device: GPUDevice, adapterDescription: string): Promise<void> {
  const count = SELF_TEST_COUNT;
  const scale = 2;
  const offset = 0.5;
  const input = Float32Array.from({ length: count }, (_, index) => index - 37);
  const params = new ArrayBuffer(16);
  new Uint32Array(params, 0, 1)[0] = count;
  new Float32Array(params, 4, 2).set([scale, offset]);

  device.pushErrorScope("validation");
  const module = device.createShaderModule({ label: "self-test", code: SELF_TEST_KERNEL });
  const pipeline = device.createComputePipeline({ label: "self-test", layout: "auto", compute: { module, entryPoint: "main" } });
  const uniform = device.createBuffer({ size: 16, usage: BufferUsage.UNIFORM | BufferUsage.COPY_DST });
  const source = device.createBuffer({ size: count * 4, usage: BufferUsage.STORAGE | BufferUsage.COPY_DST });
  const result = device.createBuffer({ size: count * 4, usage: BufferUsage.STORAGE | BufferUsage.COPY_SRC });
  device.queue.writeBuffer(uniform, 0, params);
  device.queue.writeBuffer(source, 0, input);
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(
    0,
    device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: [uniform, source, result].map((buffer, binding) => ({ binding, resource: { buffer } })),
    }),
  );
  pass.dispatchWorkgroups(Math.ceil(count / 64));
  pass.end();
  // Submits now, inside the error scope; its result counts only once validation has passed (and a failure
  // meanwhile is not an unhandled rejection).
  const reading = submitAndReadBack(device, encoder, [{ buffer: result, floats: count }]);
  reading.catch(() => undefined);
  const validationError = await device.popErrorScope();
  if (validationError) throw new Error(`WebGPU self-test on ${adapterDescription} failed validation: ${validationError.message}`);
  const output = (await reading)[0]!;
  for (const buffer of [uniform, source, result]) buffer.destroy();
  for (let index = 0; index < count; index++) {
    const expected = input[index]! * scale + index * offset;
    if (output[index] !== expected) {
      throw new Error(`WebGPU self-test on ${adapterDescription} computed out[${index}] = ${output[index]}, expected ${expected}: the adapter does not compute correctly`);
    }
  }
}

/**
 * A new device on the best adapter of this runtime, self-tested. Prefer `acquireGpu`, which shares one
 * device per process; this exists for callers that must not share (tests of device loss).
 */
export async function openGpuContext(): Promise<GpuContext> {
  const choice = await chooseAdapter();
  if (!choice) throw new Error("no WebGPU adapter found (only Dawn's Null backend, which computes nothing, or none at all)");
  const { adapter, backend } = choice;
  const info = adapterInfo(adapter);
  const adapterDescription = describeAdapter(info);
  const device = await requestDeviceRetryingStrayChain(adapter);
  const context: GpuContext = { device, adapterDescription, isSoftware: isSoftwareAdapter(adapter, info), backend };
  try {
    await selfTest(device, adapterDescription);
  } catch (error) {
    device.destroy();
    throw error;
  }
  return context;
}

/**
 * bun-webgpu 0.1.7 now and then hands Dawn a DeviceDescriptor whose chain pointer was never cleared, and Dawn
 * refuses it ("Unexpected chained struct of type SType::SurfaceSourceWaylandSurface found on DeviceDescriptor
 * chain"; seen about once in six runs of test/onnx/webgpu.test.ts). It has also resolved to null instead of a
 * device (with a second process on the same software adapter; three times running once, on a busy machine).
 * Either way the same request made again, after a pause that grows, is built afresh and goes through; any
 * other error is the adapter's answer.
 */
async function requestDeviceRetryingStrayChain(adapter: GPUAdapter): Promise<GPUDevice> {
  const ATTEMPTS = 6;
  for (let attempt = 1; ; attempt++) {
    // 0, 50, 100, 200, 400, 800 ms: about 1.5 s in all before giving up.
    if (attempt > 1) await new Promise((resolve) => setTimeout(resolve, 25 * 2 ** (attempt - 1)));
    let device: GPUDevice | null;
    try {
      device = await adapter.requestDevice({ label: "voxedge", requiredLimits: adapterLimits(adapter) });
    } catch (error) {
      if (attempt >= ATTEMPTS || !String((error as Error)?.message ?? error).includes("Unexpected chained struct")) throw error;
      continue;
    }
    if (device) return device;
    if (attempt >= ATTEMPTS) throw new Error(`the adapter gave no device, ${ATTEMPTS} times asked`);
  }
}

let shared: Promise<GpuContext> | undefined;

function sharedContext(): Promise<GpuContext> {
  if (!shared) {
    const opening = openGpuContext();
    shared = opening;
    opening.then(
      (context) => {
        // A lost device is never handed out again: the next caller gets a fresh one.
        void context.device.lost.then(() => {
          if (shared === opening) shared = undefined;
        });
      },
      () => {
        if (shared === opening) shared = undefined;
      },
    );
  }
  return shared;
}

/**
 * The process's shared WebGPU device. Rejects when there is no adapter, only a Null backend, a device that
 * fails the self-test, or (unless `allowSoftware`) only a software adapter, which is slower than the CPU path.
 */
export async function acquireGpu(options: { allowSoftware?: boolean } = {}): Promise<GpuContext> {
  let context: GpuContext;
  try {
    context = await sharedContext();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(`${reason}; on a machine without a GPU, Mesa's software adapter serves: ${SOFTWARE_ADAPTER_INSTALL_HINT}`, { cause: error });
  }
  if (context.isSoftware && !options.allowSoftware) {
    throw new Error(`the only WebGPU adapter is a software one (${context.adapterDescription}); pass allowSoftware to use it anyway`);
  }
  return context;
}
