/**
 * State manifests (docs/pocket-tts.md §3.1): which graph input is fed back from which output, in flatten order. `bundle.json`
 * states them; the other layouts' are rebuilt from the graphs (graph-input-bundle.ts). Either way the
 * FlowLM geometry is read from the manifest, keyed by module name.
 */
import { z } from "zod";
import { BundleError, type StateEntry } from "./pocket-bundle.ts";

export const stateEntrySchema = z.object({
  index: z.number().int().nonnegative(),
  input_name: z.string().min(1),
  output_name: z.string().min(1),
  module: z.string().min(1),
  key: z.string().min(1),
  dtype: z.enum(["float32", "int64", "bool"]),
  shape: z.array(z.number().int().nonnegative()),
  fill: z.enum(["nan", "zeros", "ones", "empty", "mixed"]),
});

export function toStateEntry(entry: z.infer<typeof stateEntrySchema>): StateEntry {
  return {
    index: entry.index,
    inputName: entry.input_name,
    outputName: entry.output_name,
    module: entry.module,
    key: entry.key,
    dtype: entry.dtype,
    shape: entry.shape,
    fill: entry.fill,
  };
}

/** Manifests list the states in flatten order; each index must appear once so that none goes unfed (§6.12). */
export function checkManifestOrder(manifest: readonly StateEntry[], fail: (reason: string) => Error): void {
  manifest.forEach((entry, position) => {
    if (entry.index !== position) throw fail(`entry ${position} has index ${entry.index}`);
  });
  const inputs = new Set(manifest.map((entry) => entry.inputName));
  if (inputs.size !== manifest.length) throw fail("an input name repeats");
}

/**
 * Parses a manifest in the `bundle.json` format from elsewhere, e.g. the `mimi_state_manifest` of a
 * fixture's golden.json, for a decoder graph that travels without a bundle.
 */
export function parseStateManifest(raw: unknown, source: string): StateEntry[] {
  const parsed = z.array(stateEntrySchema).min(1).safeParse(raw);
  if (!parsed.success) throw new Error(`${source}: not a state manifest (${parsed.error.issues[0]!.message} at ${parsed.error.issues[0]!.path.join(".")})`);
  const manifest = parsed.data.map(toStateEntry);
  checkManifestOrder(manifest, (reason) => new Error(`${source}: ${reason}`));
  return manifest;
}

/**
 * Reads the FlowLM geometry from its manifest: one `cache` f32 [2, 1, positions, heads, headDim] and one
 * `step` int64 [1] per layer (§3.1), keyed by module name, never by position.
 */
export function describeFlowLmManifest(root: string, manifest: readonly StateEntry[]): { layers: number; cachePositions: number; conditioningDim: number } {
  const modules = new Map<string, Set<string>>();
  let cacheShape: readonly number[] | undefined;
  for (const entry of manifest) {
    const keys = modules.get(entry.module) ?? new Set<string>();
    keys.add(entry.key);
    modules.set(entry.module, keys);
    if (entry.key === "cache") {
      if (entry.dtype !== "float32" || entry.shape.length !== 5 || entry.shape[0] !== 2) {
        throw new BundleError(root, `FlowLM state ${entry.inputName} (${entry.module}/cache) is ${entry.dtype} [${entry.shape.join(", ")}], expected float32 [2, 1, T, H, D]`);
      }
      if (cacheShape && cacheShape.join() !== entry.shape.join()) throw new BundleError(root, "FlowLM cache shapes differ between layers");
      cacheShape = entry.shape;
    }
    if (entry.key === "step" && (entry.dtype !== "int64" || entry.shape.join() !== "1")) {
      throw new BundleError(root, `FlowLM state ${entry.inputName} (${entry.module}/step) must be int64 [1]`);
    }
  }
  for (const [module, keys] of modules) {
    if (!keys.has("cache") || !keys.has("step")) throw new BundleError(root, `FlowLM module ${module} lacks a cache or step state`);
  }
  const [, , positions, heads, headDim] = cacheShape!;
  return { layers: modules.size, cachePositions: positions!, conditioningDim: heads! * headDim! };
}
