/**
 * GET /v1/models/{model}/files and /v1/models/{model}/files/{name}: the served model's files (a Pocket
 * bundle), for pages that run the same pipeline themselves. The listing is what is on disk now; a file is
 * served only by a name the listing has, so no request text is ever joined into a path.
 *
 * The files are 100+ MB, so they are streamed from a file handle (node:fs/promises, which Bun and Deno both
 * have), never read whole. Browsers keep them in their HTTP cache and revalidate (`Cache-Control: no-cache`
 * + ETag → 304); a broken download resumes with a single byte range (RFC 9110 §14).
 */
import { readdir, realpath, stat } from "node:fs/promises";
import { join, sep } from "node:path";
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import type { Context, Hono } from "hono";
import { z } from "zod";
import { ApiError, echoed } from "../api/errors.ts";
import { fileRangeBody } from "../runtime/file-body.ts";
import type { SpeechService } from "../speech/service.ts";
import { bearer, binary, errorResponses, errorSchema, json } from "./route-docs.ts";

/** What a pulled bundle's complete.json says of one of its files. */
export interface PulledFile {
  sizeBytes: number;
  sha256: string;
  /** Where the hub serves it (resolve URL at the pulled revision). */
  hubUrl: string;
}

/** The files a folder's complete.json lists, by name; empty for a folder that was not pulled (or not completely). */
export type PulledFilesReader = (directory: string) => Promise<ReadonlyMap<string, PulledFile>>;

export interface ModelFileRouteDeps {
  service: Pick<SpeechService, "model">;
  /** Refuses (404) a model name the server does not answer to. */
  checkModel: (model: string) => void;
  /** Injected by the composition root: routes do not read the weights layer's manifests themselves. */
  pulledFiles: PulledFilesReader;
}

/** One file as the listing shows it; `path` (its real path on disk) never leaves the server. */
export interface LentFile {
  name: string;
  path: string;
  sizeBytes: number;
  modifiedAtMs: number;
  etag: string;
  hubUrl?: string;
  sha256?: string;
}

/** Folders below the bundle's own that are listed (voices live in `voices/`). */
const MAX_FOLDER_DEPTH = 3;
/** What `models pull` names a file still arriving. */
const PART_SUFFIX = ".part";

const FILE_HEADERS = {
  "Content-Type": "application/octet-stream",
  "Accept-Ranges": "bytes",
  // Cached, but revalidated with the ETag each time: a re-pulled bundle is seen at once.
  "Cache-Control": "no-cache",
  // The playground is cross-origin isolated (isolation.ts); its own files are all it needs to load.
  "Cross-Origin-Resource-Policy": "same-origin",
} as const;

/** One entry of the listing. */
const modelFileSchema = z.object({
  name: z.string().describe("path under the model's folder, '/'-separated (voices/alba.safetensors)"),
  size: z.number().int(),
  etag: z.string().describe("the quoted sha256 for a pulled bundle's files, else a weak validator of size and mtime"),
  url: z.string().describe("where this server serves it: /v1/models/{model}/files/{name}"),
  hub_url: z.string().optional().describe("pulled bundles: the hub's URL of the file at the pulled revision"),
  sha256: z.string().optional().describe("pulled bundles: the sha256 verified when it was pulled"),
});

export function describeModelFileRoutes(registry: OpenAPIRegistry): void {
  const modelFilesNotFound = { 404: { description: "unknown model or file, or a model with no files to lend (the offline engine)", ...json(errorSchema) } };
  registry.registerPath({
    method: "get",
    path: "/v1/models/{model}/files",
    summary: "The served model's files (its Pocket TTS bundle), for pages that run the model themselves",
    security: bearer,
    request: { params: z.object({ model: z.string().describe("any name the served model answers to") }) },
    responses: { 200: { description: "the files, sorted by name", ...json(z.object({ object: z.literal("list"), model: z.string(), data: z.array(modelFileSchema) })) }, ...errorResponses(401, 503), ...modelFilesNotFound },
  });
  const fileHeader = (description: string) => ({ schema: { type: "string" as const }, description });
  const fileHeaders = { ETag: fileHeader("as in the listing"), "Last-Modified": fileHeader("the file's mtime"), "Content-Length": fileHeader("bytes in this answer"), "Accept-Ranges": fileHeader("bytes"), "Cache-Control": fileHeader("no-cache: revalidate with If-None-Match") };
  registry.registerPath({
    method: "get",
    path: "/v1/models/{model}/files/{name}",
    summary: "One file of the listing, streamed; If-None-Match revalidates (304), a single byte range resumes (206); HEAD answers the headers",
    security: bearer,
    request: {
      params: z.object({ model: z.string(), name: z.string().describe("a name from the listing, its '/' kept (voices/alba.safetensors)") }),
      headers: z.object({
        Range: z.string().optional().describe("bytes=a-b, bytes=a- or bytes=-n; a multi-range or malformed one is ignored (200)"),
        "If-None-Match": z.string().optional().describe("ETags (weak comparison) or *"),
        "If-Range": z.string().optional().describe("the strong ETag the range was taken from; else the whole file is sent"),
      }),
    },
    responses: {
      200: { description: "the whole file", headers: fileHeaders, content: { "application/octet-stream": { schema: binary } } },
      206: { description: "the range asked for", headers: { ...fileHeaders, "Content-Range": fileHeader("bytes a-b/size") }, content: { "application/octet-stream": { schema: binary } } },
      304: { description: "If-None-Match matched: the cached copy is current" },
      ...errorResponses(401, 416, 503),
      ...modelFilesNotFound,
    },
  });
}

export function registerModelFileRoutes(app: Hono, { service, checkModel, pulledFiles }: ModelFileRouteDeps): void {
  const filesOf = async (model: string): Promise<LentFile[]> => {
    checkModel(model);
    const served = service.model();
    if (served.filesDirectory === undefined) {
      const why = served.capabilities.kind === "classic-fallback" ? ": the offline engine runs only on the server" : "";
      throw new ApiError(404, `The model '${echoed(model)}' has no files to lend${why}`, "model");
    }
    return listFiles(served.filesDirectory, await pulledFiles(served.filesDirectory));
  };

  app.get("/v1/models/:model/files", async (c) => {
    const model = c.req.param("model");
    const files = await filesOf(model);
    return c.json({ object: "list", model, data: listingEntries(files, `/v1/models/${encodeURIComponent(model)}/files/`) });
  });

  app.get("/v1/models/:model/files/:name{.+}", async (c) => {
    const model = c.req.param("model");
    const name = c.req.param("name");
    const file = (await filesOf(model)).find((listed) => listed.name === name);
    if (!file) throw new ApiError(404, `The model '${echoed(model)}' has no file '${echoed(name)}'`, "name");
    return serveFile(c, file);
  });
}

/** The listing's entries, each file's URL under `base` (which ends with "/"). */
export function listingEntries(files: readonly LentFile[], base: string): z.infer<typeof modelFileSchema>[] {
  return files.map((file) => ({
    name: file.name,
    size: file.sizeBytes,
    etag: file.etag,
    url: base + file.name.split("/").map(encodeURIComponent).join("/"),
    ...(file.hubUrl === undefined ? {} : { hub_url: file.hubUrl, sha256: file.sha256 }),
  }));
}

/** One listed file's bytes: 304 on its ETag, a single byte range, HEAD, streamed in either runtime. */
export function serveFile(c: Context, file: LentFile): Response {
  const validators = { ETag: file.etag, "Cache-Control": FILE_HEADERS["Cache-Control"], "Cross-Origin-Resource-Policy": FILE_HEADERS["Cross-Origin-Resource-Policy"] };
  if (noneMatch(c.req.header("If-None-Match"), file.etag)) return c.body(null, 304, validators);

  const ifRange = c.req.header("If-Range");
  // RFC 9110 §13.1.5: If-Range needs a strong match (a weak ETag or a date never matches), else the whole file.
  const rangeHeader = ifRange === undefined || (ifRange.trim() === file.etag && !file.etag.startsWith("W/")) ? c.req.header("Range") : undefined;
  const range = rangeHeader === undefined ? undefined : parseByteRange(rangeHeader, file.sizeBytes);
  if (range === "unsatisfiable") {
    const body = { error: { message: `Range '${echoed(rangeHeader ?? "")}' is outside the file's ${file.sizeBytes} bytes`, type: "BadRequestError", param: "Range", code: 416 } };
    return c.json(body, 416, { "Content-Range": `bytes */${file.sizeBytes}`, ...validators });
  }

  const { start, end } = range ?? { start: 0, end: file.sizeBytes - 1 };
  const byteCount = end - start + 1;
  // Sent as set under Deno; under Bun the body is a lazy Blob of the file (runtime/file-body.ts), which Bun
  // sends with its own Content-Length (a streamed body would go out chunked, without one).
  const headers: Record<string, string> = { ...FILE_HEADERS, ETag: file.etag, "Last-Modified": new Date(file.modifiedAtMs).toUTCString(), "Content-Length": String(byteCount) };
  if (range) headers["Content-Range"] = `bytes ${start}-${end}/${file.sizeBytes}`;
  const status = range ? 206 : 200;
  // Hono answers HEAD by running this GET handler and dropping whatever body it returns: make none.
  if (c.req.method === "HEAD") return c.body(null, status, headers);
  return new Response(fileRangeBody(file.path, start, byteCount), { status, headers });
}

/** Every regular file under `directory` (sub-folders to MAX_FOLDER_DEPTH), by "/"-separated name, sorted. */
export async function listFiles(directory: string, pulled: ReadonlyMap<string, PulledFile> = new Map()): Promise<LentFile[]> {
  const root = await realpath(directory);
  const files: LentFile[] = [];
  await collectFiles(root, root, "", 0, pulled, files);
  return files.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

async function collectFiles(root: string, folder: string, prefix: string, depth: number, pulled: ReadonlyMap<string, PulledFile>, files: LentFile[]): Promise<void> {
  for (const entry of await readdir(folder, { withFileTypes: true })) {
    if (entry.name.startsWith(".") || entry.name.endsWith(PART_SUFFIX)) continue;
    let path = join(folder, entry.name);
    if (entry.isSymbolicLink()) {
      const target = await realpath(path).catch(() => undefined);
      // A link out of the bundle (or a dangling one) would lend a file nobody chose to lend.
      if (target === undefined || !target.startsWith(root + sep)) continue;
      path = target;
    }
    const stats = await stat(path).catch(() => undefined);
    const name = prefix + entry.name;
    if (stats?.isDirectory() && depth < MAX_FOLDER_DEPTH) await collectFiles(root, path, `${name}/`, depth + 1, pulled, files);
    if (!stats?.isFile()) continue;
    const modifiedAtMs = Math.floor(stats.mtimeMs);
    // complete.json's sha256 names these bytes only while the file still has the size that was verified.
    const verified = pulled.get(name);
    if (verified && verified.sizeBytes === stats.size) {
      files.push({ name, path, sizeBytes: stats.size, modifiedAtMs, etag: `"${verified.sha256}"`, hubUrl: verified.hubUrl, sha256: verified.sha256 });
    } else {
      // A weak validator from size and mtime, as static file servers make.
      files.push({ name, path, sizeBytes: stats.size, modifiedAtMs, etag: `W/"${stats.size.toString(16)}-${modifiedAtMs.toString(16)}"` });
    }
  }
}

/** RFC 9110 §13.1.2: If-None-Match compares weakly, against a list of tags or `*`. */
function noneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  if (header.trim() === "*") return true;
  const opaque = (tag: string) => tag.replace(/^W\//, "");
  return (header.match(/(?:W\/)?"[^"]*"/g) ?? []).some((tag) => opaque(tag) === opaque(etag));
}

/**
 * One byte range (RFC 9110 §14.1.2): `a-b`, `a-` or `-n`, as inclusive offsets clamped to the file. A
 * multi-range or malformed header is undefined, and the whole file is sent (§14.2 lets a server ignore Range).
 */
export function parseByteRange(header: string, sizeBytes: number): { start: number; end: number } | "unsatisfiable" | undefined {
  const match = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!match) return undefined;
  const [, first = "", last = ""] = match;
  if (first === "" && last === "") return undefined;
  if (first === "") {
    const suffixBytes = Number(last);
    return suffixBytes === 0 || sizeBytes === 0 ? "unsatisfiable" : { start: Math.max(0, sizeBytes - suffixBytes), end: sizeBytes - 1 };
  }
  const start = Number(first);
  const end = last === "" ? sizeBytes - 1 : Number(last);
  if (end < start && last !== "") return undefined;
  if (start >= sizeBytes) return "unsatisfiable";
  return { start, end: Math.min(end, sizeBytes - 1) };
}

