/**
 * Graphs we rewrite or build at load time (FlowLM's cache writes, the batched step, the per-row flow head), kept
 * as files so a session loads them as it loads a published graph: onnxruntime reads the file itself, and no
 * copy of the model, nor its protobuf tree, lives in the JS heap beside the sessions. Made once per source file
 * (keyed by its path, size, mtime and this code's format version), then every later start skips the rewrite.
 *
 * A cache folder that cannot be written (a read-only volume) is not an error: the graph is then made in memory,
 * as before, and the session loads from those bytes.
 */
import { createHash } from "node:crypto";
import { mkdir, readFile, stat } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import { writeFileDurably } from "../lib/durable-write.ts";

/** Bumped whenever a rewrite's output changes for the same source: older cache files are then never read. */
const GRAPH_CACHE_FORMAT = 2;

/** A graph ready to load: a file onnxruntime reads, or (with no writable cache) the bytes themselves. */
export type PreparedGraph<Meta> = { path: string; model?: undefined; meta: Meta } | { path: string; model: Uint8Array; meta: Meta };

export class GraphCache {
  constructor(readonly dir: string | undefined) {}

  /**
   * The cached variant `variant` of `source`, made by `make` on a miss. `make` returns the new model and what
   * the caller needs to know about it (`meta`, kept beside it as JSON), or null when the source needs no change:
   * then the source itself is the graph, and that answer is cached too.
   */
  async prepare<Meta>(source: string, variant: string, make: () => Promise<{ model: Uint8Array; meta: Meta } | null>): Promise<PreparedGraph<Meta | null>> {
    // No folder, no key: its hash and stat are not even asked for (a page's file system has neither).
    const key = this.dir ? await this.#key(source, variant) : undefined;
    if (this.dir && key) {
      const modelPath = join(this.dir, `${key}.onnx`);
      const metaPath = join(this.dir, `${key}.json`);
      const cachedMeta = await readFile(metaPath, "utf-8").then((text) => JSON.parse(text) as { unchanged: boolean; meta: Meta; bytes?: number }, () => undefined);
      if (cachedMeta?.unchanged) return { path: source, meta: null };
      // A model file of another size than the meta file says was cut short (see the writes below): made again.
      if (cachedMeta && (await stat(modelPath).then((info) => info.size === cachedMeta.bytes, () => false))) return { path: modelPath, meta: cachedMeta.meta };
      const made = await make();
      try {
        await mkdir(this.dir, { recursive: true });
        // Atomic, not durable: a cache is made again after a crash, and two fsyncs of ~76 MB took ~1 s of a
        // first start (real-size bundle). The meta file goes last and names the model's size.
        if (made) await writeFileDurably(modelPath, made.model, { durable: false });
        await writeFileDurably(metaPath, JSON.stringify(made ? { unchanged: false, meta: made.meta, bytes: made.model.byteLength } : { unchanged: true, meta: null }), { durable: false });
        return made ? { path: modelPath, meta: made.meta } : { path: source, meta: null };
      } catch {
        return made ? { path: source, model: made.model, meta: made.meta } : { path: source, meta: null };
      }
    }
    const made = await make();
    return made ? { path: source, model: made.model, meta: made.meta } : { path: source, meta: null };
  }

  async #key(source: string, variant: string): Promise<string | undefined> {
    const info = await stat(source).catch(() => undefined);
    if (!info) return undefined;
    const identity = createHash("sha256").update(JSON.stringify([resolve(source), info.size, info.mtimeMs, variant, GRAPH_CACHE_FORMAT])).digest("hex").slice(0, 16);
    return `${basename(source, ".onnx")}.${variant}.${identity}`;
  }
}
