/**
 * CPU inference sessions on either of two packages that share onnxruntime-common's InferenceSession and
 * Tensor API: onnxruntime-node (native CPU execution provider) or onnxruntime-web (wasm execution provider).
 *
 * Nothing happens on import, and neither package is imported until a session of it is asked for:
 * `configureOnnxRuntime` fixes the process-wide thread count once, before the first session, and
 * `openPocketSessions` (models/pocket/sessions.ts) creates the sessions of a bundle explicitly.
 *
 * Tensors must come from the package that made the session. Feeds are duck-typed, so a foreign Tensor
 * happens to run, but `run(feeds, fetches)` recognises preallocated outputs with `instanceof` on the
 * session's own Tensor class (onnxruntime-common inference-session-impl), and each package carries its own
 * copy of that class (onnxruntime-web bundles onnxruntime-common). So every session travels with its
 * package's Tensor class (`OnnxSession.Tensor`), and the stages build their tensors from it.
 *
 * Threads (measured on a 2-core machine, onnxruntime-web 1.30.0, Bun 1.4.5 and Deno 2.9.6): with
 * `numThreads` 2 both runtimes spawn one worker and produce identical results, but 16 one-latent calls
 * of the full-size Mimi decoder took 0.75–0.79 s with 1 thread vs 0.87–0.88 s with 2 under Bun, and
 * 1.27 s vs 1.17 s under Deno; the tiny graphs are dominated by call overhead. One thread is the default
 * (KR1 also caps intra-op threads at 4 because the small sequential matmuls do not scale, docs/pocket-tts.md §3.7), and
 * onnxruntime-node gets the same count as its intra-op thread pool so the two providers compare fairly.
 */
import { readFile } from "node:fs/promises";
// Types only: both packages re-export onnxruntime-common's declarations, so these describe either one.
import type * as ort from "onnxruntime-web";
import { SerialQueue } from "../async/serial-queue.ts";

export type CpuProvider = "onnxruntime-node" | "onnxruntime-web";
export type CpuProviderChoice = "auto" | CpuProvider;

/**
 * The order "auto" tries the providers in: the faster first, the other as the fallback where it does not
 * load (no prebuilt binary for the platform, or Deno without --allow-ffi). onnxruntime-node was the faster
 * under every runtime measured, so the order does not depend on the runtime. bench/pocket-providers.ts on
 * a 2-core x86-64 machine (onnxruntime 1.30.0, 1 thread, min / median of 3 runs), node vs web:
 * - pocket-tiny, 30-word sentence, EOS disabled, fp32 RTF: Bun 0.026 / 0.027 vs 0.047 / 0.048,
 *   Deno 0.028 / 0.028 vs 0.045 / 0.045 (int8: Bun 0.027 vs 0.051, Deno 0.031 vs 0.040);
 * - the real-size Mimi decoder (fixtures/mimi-full), ms per one-latent call, fp32: Bun 22.5 vs 43.6,
 *   Deno 19.6 vs 38.3 (int8: Bun 20.1 vs 39.7, Deno 17.3 vs 36.7);
 * - real-size FlowLM main step (docs/anchors.md), ms per frame: Bun 109 vs 206; under Node the
 *   whole loop runs at RTF 1.11 vs 1.23.
 * Repeated passes on the shared machine moved single cells by up to ~40% but never changed the order.
 */
export const AUTO_PROVIDER_ORDER: readonly CpuProvider[] = ["onnxruntime-node", "onnxruntime-web"];

/** How one session is made, beside the runtime's defaults. */
export interface SessionChoices {
  memoryArena?: boolean;
}

/** What the stages use of a package; both packages' module namespaces satisfy it. */
export interface OnnxRuntimePackage {
  InferenceSession: typeof ort.InferenceSession;
  Tensor: typeof ort.Tensor;
  env: ort.Env;
}

/** Imports a provider's package; tests inject one that fails to simulate a missing native binding. */
export type OnnxPackageLoader = (provider: CpuProvider) => Promise<OnnxRuntimePackage>;

/**
 * The packages' own dynamic imports. onnxruntime-node loads its native binding while being imported, so a
 * platform without a prebuilt binary, or Deno without --allow-ffi, fails here rather than at the first run.
 */
export const importOnnxPackage: OnnxPackageLoader = (provider) => (provider === "onnxruntime-node" ? import("onnxruntime-node") : import("onnxruntime-web"));

export interface OnnxProviderOptions {
  /** Which package runs the sessions; "auto" takes the first of AUTO_PROVIDER_ORDER that loads. Default "auto". */
  provider?: CpuProviderChoice;
  loader?: OnnxPackageLoader;
  /** Run the sessions on this WebGPU device through onnxruntime-web's WebGPU EP instead (provider ignored). */
  gpuDevice?: GPUDevice;
}

/** A session together with the provider that made it and that provider's Tensor class. */
export type OnnxSession = ort.InferenceSession & {
  readonly provider: CpuProvider;
  /** Where onnxruntime runs the graph: the CPU (either package), or the WebGPU EP. */
  readonly executionProvider: "cpu" | "webgpu";
  readonly Tensor: typeof ort.Tensor;
};

export interface OnnxRuntimeOptions {
  /** Intra-op threads: onnxruntime-web runs workers beyond 1 (needs SharedArrayBuffer). Default 1. */
  threads?: number;
  /**
   * Where onnxruntime-web fetches its .wasm files and their loaders: a URL prefix. Default: beside the
   * package's entry point, so every load stays local; a page sets the server's route instead.
   */
  wasmPaths?: string;
}

let configuredThreads: number | undefined;
let configuredWasmPaths: string | undefined;

/**
 * Sets the process-wide thread count. onnxruntime-web reads it once, when the first session initialises
 * its wasm backend, so a later call with a different count is an error rather than silently ignored.
 */
export function configureOnnxRuntime(options: OnnxRuntimeOptions = {}): void {
  if (options.wasmPaths !== undefined) {
    configuredWasmPaths = options.wasmPaths;
    // Where the files are, alone, leaves the thread count to a later call.
    if (options.threads === undefined) return;
  }
  const threads = options.threads ?? 1;
  if (!Number.isInteger(threads) || threads < 1) throw new RangeError(`onnxruntime threads must be a positive integer, got ${threads}`);
  if (configuredThreads !== undefined) {
    if (configuredThreads !== threads) throw new Error(`onnxruntime is already configured with ${configuredThreads} thread(s); it cannot switch to ${threads}`);
    return;
  }
  configuredThreads = threads;
}

/** The process-wide thread count (configureOnnxRuntime), so a worker's sessions can use the same. */
export function configuredOnnxThreads(): number {
  if (configuredThreads === undefined) configureOnnxRuntime();
  return configuredThreads!;
}

/** Where onnxruntime-web finds its .wasm files (see OnnxRuntimeOptions.wasmPaths). */
export function onnxWasmPaths(): string {
  return configuredWasmPaths ?? new URL(".", import.meta.resolve("onnxruntime-web")).href;
}

/** A loaded provider: its package, ready to create sessions. */
export interface OnnxRuntime {
  readonly provider: CpuProvider;
  readonly executionProvider: "cpu" | "webgpu";
  /**
   * `model`: the file's bytes, already read (and possibly rewritten); `path` then only names it.
   * `options.memoryArena`: onnxruntime-node's CPU arena for this session (see below); ignored elsewhere.
   */
  createSession(path: string, model?: Uint8Array, options?: SessionChoices): Promise<OnnxSession>;
}

/**
 * Loads the chosen provider's package. An explicit provider that fails to load is an error; "auto" tries
 * the faster provider, then the other, and reports both failures if neither loads.
 */
export async function loadOnnxRuntime(options: OnnxProviderOptions = {}): Promise<OnnxRuntime> {
  if (options.gpuDevice) return webGpuRuntime(options.gpuDevice);
  const choice = options.provider ?? "auto";
  const loader = options.loader ?? importOnnxPackage;
  const candidates = choice === "auto" ? AUTO_PROVIDER_ORDER : [choice];
  const failures: string[] = [];
  for (const provider of candidates) {
    let ortPackage: OnnxRuntimePackage;
    try {
      ortPackage = await loader(provider);
    } catch (error) {
      failures.push(`${provider}: ${(error as Error).message}`);
      continue;
    }
    return providerRuntime(provider, ortPackage);
  }
  throw new Error(`onnxruntime could not be loaded (${failures.join("; ")})`);
}

function providerRuntime(provider: CpuProvider, ortPackage: OnnxRuntimePackage): OnnxRuntime {
  if (configuredThreads === undefined) configureOnnxRuntime();
  const threads = configuredThreads!;
  const Tensor = ortPackage.Tensor;
  if (provider === "onnxruntime-web") {
    ortPackage.env.wasm.numThreads = threads;
    // Never onnxruntime-web's default, a CDN: the files beside the package, or the server's route in a page.
    ortPackage.env.wasm.wasmPaths = onnxWasmPaths();
  }
  // No CPU arena on onnxruntime-node by default: an arena keeps every session's largest working set for
  // good (the voice encoder's, a k-frame decode's in each decoder worker), and the allocator returns what a
  // run frees. 16 full-size streams on 2 cores (bench/load.ts): server RSS idle 813 → 557 MiB, median
  // 1271 → 1195, peak 1557 → 1333, wall time the same (15.2 vs 15.1 s). A session asks for one with
  // `memoryArena` where its runs' buffers are large and many (the decoder workers: see decoder/worker.ts).
  const sessionOptions: ort.InferenceSession.SessionOptions =
    provider === "onnxruntime-web"
      ? { executionProviders: ["wasm"], graphOptimizationLevel: "all" }
      : { executionProviders: ["cpu"], graphOptimizationLevel: "all", intraOpNumThreads: threads, enableCpuMemArena: false };
  return {
    provider,
    executionProvider: "cpu",
    async createSession(path, model, choices) {
      const options = choices?.memoryArena && provider === "onnxruntime-node" ? { ...sessionOptions, enableCpuMemArena: true } : sessionOptions;
      try {
        // onnxruntime-node reads the file natively; onnxruntime-web takes bytes in every runtime.
        const session =
          provider === "onnxruntime-node" && !model
            ? await ortPackage.InferenceSession.create(path, options)
            : await ortPackage.InferenceSession.create(model ?? (await readFile(path)), options);
        return Object.assign(session, { provider, executionProvider: "cpu" as const, Tensor });
      } catch (error) {
        throw new Error(`${provider} could not load ${path}: ${(error as Error).message}`, { cause: error });
      }
    },
  };
}

async function webGpuRuntime(device: GPUDevice): Promise<OnnxRuntime> {
  const { loadOrtWebGpu } = await import("./webgpu.ts");
  const ortWebGpu = await loadOrtWebGpu(device, onnxWasmPaths());
  // The EP creates one session at a time ("another WebGPU EP inference session is being created").
  const sessionCreation = new SerialQueue();
  return {
    provider: "onnxruntime-web",
    executionProvider: "webgpu",
    async createSession(path, model) {
      try {
        const bytes = model ?? (await readFile(path));
        const session = await sessionCreation.run(() => ortWebGpu.InferenceSession.create(bytes, ortWebGpu.sessionOptions));
        return Object.assign(session, { provider: "onnxruntime-web" as const, executionProvider: "webgpu" as const, Tensor: ortWebGpu.Tensor });
      } catch (error) {
        throw new Error(`onnxruntime-web (WebGPU) could not load ${path}: ${(error as Error).message}`, { cause: error });
      }
    },
  };
}

/** Creates a CPU session from a file on the chosen provider. */
export async function createOnnxSession(path: string, options: OnnxProviderOptions = {}): Promise<OnnxSession> {
  return (await loadOnnxRuntime(options)).createSession(path);
}
