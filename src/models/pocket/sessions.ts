/** The onnxruntime sessions of a Pocket TTS bundle: one per graph, FlowLM's with its KV-cache writes on our side. */
import { collectGarbage } from "../../runtime/detect.ts";
import { readFile } from "node:fs/promises";
import type { PocketBundle, StateEntry } from "./bundle/pocket-bundle.ts";
import { loadOnnxRuntime, type CpuProvider, type OnnxProviderOptions, type OnnxRuntime, type OnnxSession } from "../../onnx/runtime.ts";
import { rewriteCacheWrites, type CacheWritePlan, type RewriteOptions } from "../../onnx/cache-writes.ts";
import { quantizeRowsSeparately } from "../../onnx/row-quantization.ts";
import { onnxGraphWeights } from "../../onnx/proto.ts";
import { GraphCache, type PreparedGraph } from "../../onnx/graph-cache.ts";
import { buildBatchedFlowLmStep } from "./batched/flow-lm-graph.ts";
import { flowLmWeightsFromGraph } from "./batched/flow-lm-weights.ts";
import type { BatchedStepSession, FlowLmSlotsConfig } from "./stages/flow-lm-slots.ts";
import { openMimiDecoderSession, type MimiRing } from "./stages/mimi-decoder.ts";

import { FLOW_LM_POSITIONS_AXIS } from "./stages/state.ts";

/** One session per graph of a bundle; shared by all requests (sessions hold no per-request state). */
export interface PocketSessions {
  /** The package every session below was made by. */
  provider: CpuProvider;
  executionProvider: "cpu" | "webgpu";
  textConditioner: OnnxSession;
  voiceEncoder: OnnxSession | null;
  flowLmMain: OnnxSession;
  /** How flow_lm_main's cache outputs are rebuilt on our side (cache-writes.ts); empty: fetched whole. */
  flowLmCacheWrites: CacheWritePlan[];
  /** flow_lm_main's inputs declared with a symbolic positions axis (cache-writes.ts). */
  flowLmWindowedInputs: string[];
  /**
   * FlowLM's AR step over many streams (batched/flow-lm-graph.ts), built from flow_lm_main's own weights;
   * the published graph still runs prefills. Checked against it before use (stages/flow-lm-slots.ts).
   */
  flowLmBatched: BatchedStepSession;
  flowLmFlow: OnnxSession;
  /**
   * The flow head for several rows in one call: the int8 graph with its activations quantized per row
   * (onnx/row-quantization.ts), or the fp32 graph itself, whose rows never mixed. The flow head checks
   * that rows come out as they do alone before it batches (stages/flow-head.ts).
   */
  flowLmFlowRows: OnnxSession;
  /** Null once released: the Pocket model's decoder workers hold their own (model.ts). */
  mimiDecoder: OnnxSession | null;
  /** The Mimi decoder states the session keeps: the bundle's, less those it only hands back, its KV rings resized. */
  mimiDecoderStates: StateEntry[];
  /** The Mimi decoder's KV ring (stages/mimi-decoder.ts): resized, or the export's and why. */
  mimiDecoderRing: MimiRing;
}

export async function openPocketSessions(bundle: PocketBundle, options: OnnxProviderOptions = {}, graphCache = new GraphCache(undefined)): Promise<PocketSessions> {
  const runtime = await loadOnnxRuntime(options);
  const { graphs } = bundle;
  // One session at a time, each graph's bytes (read, rewritten, built) dropped and collected before the next:
  // made all at once, every graph's copies were alive together, and the load peaked at 1.29 GiB against
  // 0.41 GiB once they were collected (real-size int8 bundle). FlowLM's two rewrites go first, before any
  // session: on a start with no graph cache yet they are the load's largest transients (flow_lm_main read,
  // parsed and written again, twice), best made with nothing else resident (real-size int8, 1 GiB cgroup, cold-start peak 807 → 654 MiB).
  const flowLmGraph = await prepareCacheWritingGraph(graphs.flowLmMain.path, bundle.flowLmStateManifest, { positionsAxis: FLOW_LM_POSITIONS_AXIS }, graphCache);
  collectGarbage();
  const batchedGraph = await prepareBatchedStepGraph(bundle, graphCache);
  collectGarbage();
  const flowLm = await createPreparedCacheWritingSession(runtime, flowLmGraph);
  collectGarbage();
  const flowLmBatched = await createBatchedStepSession(runtime, batchedGraph);
  collectGarbage();
  const [flowLmFlow, flowLmFlowRows] = await createFlowHeadSessions(runtime, graphs.flowLmFlow.path, graphCache);
  collectGarbage();
  const textConditioner = await runtime.createSession(graphs.textConditioner.path);
  const voiceEncoder = graphs.voiceEncoder ? await runtime.createSession(graphs.voiceEncoder.path) : null;
  // Not the cache-write rewrite for the Mimi decoder: its ring writes replace a whole K/V plane per call, so
  // fetching the writes instead of the caches would save nothing.
  const mimi = await openMimiDecoderSession(runtime, graphs.mimiDecoder.path, bundle.mimiStateManifest, { latentDim: bundle.dims.latentDim, samplesPerFrame: bundle.dims.samplesPerFrame });
  collectGarbage();
  return {
    provider: runtime.provider,
    executionProvider: runtime.executionProvider,
    textConditioner,
    voiceEncoder,
    flowLmMain: flowLm.session,
    flowLmCacheWrites: flowLm.cacheWrites,
    flowLmWindowedInputs: flowLm.windowed,
    flowLmBatched,
    flowLmFlow,
    flowLmFlowRows,
    mimiDecoder: mimi.session,
    mimiDecoderStates: mimi.manifest,
    mimiDecoderRing: mimi.ring,
  };
}


type BatchedStepGraph = { graph: PreparedGraph<object | null>; config: FlowLmSlotsConfig } | { reason: string };

/** The batched FlowLM step's graph, built from the bundle's flow_lm_main weights, or why it cannot be. */
async function prepareBatchedStepGraph(bundle: PocketBundle, graphCache: GraphCache): Promise<BatchedStepGraph> {
  const caches = bundle.flowLmStateManifest.filter((entry) => entry.key === "cache" && entry.shape.length === 5);
  if (caches.length === 0) return { reason: "the FlowLM manifest has no KV caches" };
  const [, , , heads, headDim] = caches[0]!.shape as [number, number, number, number, number];
  const config = { layers: caches.length, heads, headDim, latentDim: bundle.dims.latentDim, cachePositions: bundle.dims.flowLmCachePositions };
  const path = bundle.graphs.flowLmMain.path;
  let reason: string | undefined;
  const graph = await graphCache.prepare(path, `batched-step-${config.layers}x${config.cachePositions}`, async () => {
    const read = flowLmWeightsFromGraph(onnxGraphWeights(new Uint8Array(await readFile(path)), path), config);
    if ("reason" in read) {
      reason = read.reason;
      return null;
    }
    return { model: buildBatchedFlowLmStep(read.weights), meta: {} };
  });
  // "Unchanged" here means the weights could not be read for a batched step: the published graph runs alone.
  if (graph.meta === null) return { reason: reason ?? "the FlowLM graph's weights do not fit the batched step" };
  return { graph, config };
}

/** The batched step's session, or why the runtime cannot run it. */
async function createBatchedStepSession(runtime: OnnxRuntime, prepared: BatchedStepGraph): Promise<BatchedStepSession> {
  if ("reason" in prepared) return { session: null, reason: prepared.reason };
  try {
    return { session: await runtime.createSession(prepared.graph.path, prepared.graph.model), config: prepared.config };
  } catch (error) {
    return { session: null, reason: `the runtime cannot run the batched step graph: ${(error as Error).message}` };
  }
}

/** The published flow head, and the one for many rows (per-row quantization where the graph quantizes). */
async function createFlowHeadSessions(runtime: OnnxRuntime, path: string, graphCache: GraphCache): Promise<[OnnxSession, OnnxSession]> {
  const rowQuantized = await graphCache.prepare(path, "row-quantized", async () => {
    const rewritten = quantizeRowsSeparately(new Uint8Array(await readFile(path)));
    return rewritten && { model: rewritten.model, meta: {} };
  });
  const published = await runtime.createSession(path);
  if (rowQuantized.meta === null) return [published, published];
  // A runtime that cannot run the rewrite (its Scan) keeps the flow head one row per call.
  const rows = await runtime.createSession(rowQuantized.path, rowQuantized.model).catch(() => published);
  return [published, rows];
}

type CacheWritingGraph = PreparedGraph<{ plans: CacheWritePlan[]; windowed: string[] } | null>;

/** A stateful graph with its float KV cache writes rewritten (cache-writes.ts), or the graph itself. */
async function prepareCacheWritingGraph(path: string, manifest: readonly StateEntry[], options: RewriteOptions, graphCache: GraphCache): Promise<CacheWritingGraph> {
  // Only float caches: the rewritten outputs are declared float, and the small int64 counters cost nothing to fetch.
  const states = manifest.filter((entry) => entry.dtype === "float32" && entry.key === "cache");
  return graphCache.prepare(path, `cache-writes-${options.positionsAxis ?? "fixed"}`, async () => {
    const rewritten = rewriteCacheWrites(new Uint8Array(await readFile(path)), states, options);
    return rewritten && { model: rewritten.model, meta: { plans: rewritten.plans, windowed: rewritten.windowed } };
  });
}

async function createPreparedCacheWritingSession(runtime: OnnxRuntime, graph: CacheWritingGraph): Promise<{ session: OnnxSession; cacheWrites: CacheWritePlan[]; windowed: string[] }> {
  return { session: await runtime.createSession(graph.path, graph.model), cacheWrites: graph.meta?.plans ?? [], windowed: graph.meta?.windowed ?? [] };
}

/**
 * A session of a stateful graph whose float KV caches are rebuilt on our side when the graph writes them
 * with ScatterND (cache-writes.ts); other graphs load unchanged.
 */
export async function createCacheWritingSession(
  runtime: OnnxRuntime,
  path: string,
  manifest: readonly StateEntry[],
  options: RewriteOptions = {},
  graphCache = new GraphCache(undefined),
): Promise<{ session: OnnxSession; cacheWrites: CacheWritePlan[]; windowed: string[] }> {
  return createPreparedCacheWritingSession(runtime, await prepareCacheWritingGraph(path, manifest, options, graphCache));
}

export async function closePocketSessions(sessions: PocketSessions): Promise<void> {
  const { textConditioner, voiceEncoder, flowLmMain, flowLmBatched, flowLmFlow, flowLmFlowRows, mimiDecoder } = sessions;
  const distinct = new Set([textConditioner, voiceEncoder, flowLmMain, flowLmBatched.session, flowLmFlow, flowLmFlowRows, mimiDecoder]);
  await Promise.all([...distinct].map((session) => session?.release()));
}
