/**
 * onnxruntime-web's WebGPU execution provider on our shared device (device.ts), so the language-model
 * stages and the WGSL decoder use one GPUDevice. Two shims are needed under Bun (architecture.md): the EP
 * refuses to start without `navigator.gpu` even when handed a device, and bun-webgpu's queue.writeBuffer
 * rejects the SharedArrayBuffer-backed views the EP writes from. Setting `env.webgpu.device` before the
 * first session is ignored, so the device goes in the EP options of every session.
 */
import type * as ort from "onnxruntime-web";
import { isBun } from "../runtime/detect.ts";

export interface OrtWebGpu {
  InferenceSession: typeof ort.InferenceSession;
  Tensor: typeof ort.Tensor;
  env: ort.Env;
  sessionOptions: ort.InferenceSession.SessionOptions;
}

const patchedQueues = new WeakSet<GPUQueue>();

/** `wasmPaths`: where the EP's .wasm files are fetched from (runtime.ts onnxWasmPaths). */
export async function loadOrtWebGpu(device: GPUDevice, wasmPaths: string): Promise<OrtWebGpu> {
  if (isBun()) {
    if (!(navigator as Navigator & { gpu?: GPU }).gpu) {
      const { createGPUInstance } = await import("bun-webgpu");
      Object.defineProperty(navigator, "gpu", { value: createGPUInstance(), configurable: true });
    }
    const queue = device.queue as GPUQueue & { writeBuffer: (...args: unknown[]) => void };
    if (!patchedQueues.has(queue)) {
      patchedQueues.add(queue);
      const writeBuffer = queue.writeBuffer.bind(queue);
      queue.writeBuffer = (buffer: unknown, offset: unknown, data: unknown, ...rest: unknown[]) => {
        const copy = ArrayBuffer.isView(data) && !(data.buffer instanceof ArrayBuffer) ? new (data.constructor as new (source: ArrayBufferView) => ArrayBufferView)(data) : data;
        writeBuffer(buffer, offset, copy, ...rest);
      };
    }
  }
  const ortWeb = (await import("onnxruntime-web/webgpu")) as unknown as typeof ort;
  // Local files (or the server's route in a page), never the default CDN.
  ortWeb.env.wasm.wasmPaths = wasmPaths;
  return {
    InferenceSession: ortWeb.InferenceSession,
    Tensor: ortWeb.Tensor,
    env: ortWeb.env,
    // Severity 3 (errors): the EP warns on every session that shape ops stay on the CPU, which is by design.
    sessionOptions: { executionProviders: [{ name: "webgpu", device } as ort.InferenceSession.ExecutionProviderConfig], graphOptimizationLevel: "all", logSeverityLevel: 3 },
  };
}
