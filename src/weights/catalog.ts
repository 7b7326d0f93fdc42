/**
 * The Pocket TTS ONNX bundles `models pull` knows, pinned to a hub revision (spec: docs/pocket-tts.md
 * §3.3 for the layout and pinned sizes, §5 for licences).
 *
 * Only ungated repositories are listed, so a pull needs no token. Sizes and hashes are pinned where the spec
 * gives them; every other file is verified against the hub's own metadata at pull time (see pull.ts), so a
 * file is never accepted unchecked.
 *
 * Not listed, on purpose:
 * - the KevinAHM January (v1) layout: the spec names its files but no revision, and the same repository now
 *   serves the v2 layout;
 * - the sherpa-onnx bundles: they ship as GitHub release archives, not as files under the hub's `resolve` URLs,
 *   and carry no `tokenizer.model`;
 * - `kyutai/pocket-tts`: gated, and it holds PyTorch weights, not ONNX graphs.
 */
import { posix } from "node:path";

export const DEFAULT_HUB_URL = "https://huggingface.co";

export const PRECISIONS = ["int8", "fp32"] as const;
/**
 * `int8` swaps in the dynamically quantized flow LM and Mimi decoder (about 165 MB instead of about 475 MB);
 * the encoder and text conditioner stay fp32 in both, as in the published int8 file set, since quantizing them
 * barely shrinks them (§3.6).
 */
export type Precision = (typeof PRECISIONS)[number];

export interface CatalogFile {
  /** Path inside the hub repository. Its base name is the file's name in the pulled bundle folder. */
  path: string;
  sizeBytes?: number;
  /** Lower-case hex. */
  sha256?: string;
}

export interface CatalogEntry {
  /** What `models pull [name]` takes. */
  name: string;
  /** Hub repository id, `owner/name`. */
  repo: string;
  /** A commit id, so a pulled bundle never changes under the same cache path. */
  revision: string;
  licence: string;
  description: string;
  defaultLanguage: string;
  defaultPrecision: Precision;
  /** Language id → the file list of each precision offered for it. */
  languages: Readonly<Record<string, Readonly<Partial<Record<Precision, readonly CatalogFile[]>>>>>;
}

/** One fully resolved pull: the entry, language and precision picked, and the exact files. */
export interface ResolvedBundle {
  /** `<entry>-<language>-<precision>`: the bundle's folder name in the cache. */
  id: string;
  catalogName: string;
  repo: string;
  revision: string;
  language: string;
  precision: Precision;
  files: readonly BundleFile[];
}

export interface BundleFile extends CatalogFile {
  /** Name in the bundle folder: the base name of `path` (the layouts have no clashing base names). */
  localName: string;
}

export interface BundleRequest {
  name?: string;
  language?: string;
  precision?: Precision;
}

export class CatalogError extends Error {
  override name = "CatalogError";
}

/** The graphs that have a published `_int8` twin; the encoder and text conditioner do not (§3.2, §3.3). */
const QUANTIZED_GRAPHS = ["flow_lm_main", "flow_lm_flow", "mimi_decoder"] as const;
const FP32_ONLY_GRAPHS = ["mimi_encoder", "text_conditioner"] as const;

/**
 * One KevinAHM v2 folder `onnx/<folder>/` (§3.3): `bundle.json`, `tokenizer.model`, `bos_before_voice.npy`
 * (every v2 model sets insert_bos_before_voice), the five graphs, and the licence that sits in `onnx/`.
 * `pins` maps a repository path to what the spec pins for it.
 */
function kevinAhmV2Folder(folder: string, pins: Readonly<Record<string, Omit<CatalogFile, "path">>> = {}): Record<Precision, CatalogFile[]> {
  const inFolder = (name: string) => `onnx/${folder}/${name}`;
  const pinned = (path: string): CatalogFile => ({ path, ...pins[path] });
  const metadata = ["bundle.json", "tokenizer.model", "bos_before_voice.npy"].map((name) => pinned(inFolder(name)));
  const fp32Only = FP32_ONLY_GRAPHS.map((graph) => pinned(inFolder(`${graph}.onnx`)));
  const licence = pinned("onnx/LICENSE");
  const variant = (suffix: string) => [
    ...metadata,
    ...QUANTIZED_GRAPHS.map((graph) => pinned(inFolder(`${graph}${suffix}.onnx`))),
    ...fp32Only,
    licence,
  ];
  return { int8: variant("_int8"), fp32: variant("") };
}

/** Sizes of the english_2026-04 files at the pinned revision (§3.3; the spec gives no hashes for them). */
const ENGLISH_2026_04_PINS: Record<string, Omit<CatalogFile, "path">> = {
  "onnx/english_2026-04/bundle.json": { sizeBytes: 24_381 },
  "onnx/english_2026-04/bos_before_voice.npy": { sizeBytes: 4_224 },
  "onnx/english_2026-04/tokenizer.model": { sizeBytes: 59_339 },
  "onnx/english_2026-04/flow_lm_main_int8.onnx": { sizeBytes: 76_341_079 },
  "onnx/english_2026-04/flow_lm_flow_int8.onnx": { sizeBytes: 9_962_530 },
  "onnx/english_2026-04/mimi_decoder_int8.onnx": { sizeBytes: 22_684_077 },
  "onnx/english_2026-04/mimi_encoder.onnx": { sizeBytes: 39_768_446 },
  "onnx/english_2026-04/text_conditioner.onnx": { sizeBytes: 16_388_344 },
  "onnx/LICENSE": { sizeBytes: 18_655 },
};

/**
 * The `_24l` folders hold the 24-layer FlowLM (fp32 flow_lm_main about 1.2 GB); French exists only in that size.
 * The language folders other than English come from a model-card copy, not the pinned manifest: whether they
 * exist at this revision is unverified, and a missing one fails the pull with a 404 that names the file.
 */
const KEVINAHM_V2_FOLDERS: Record<string, string> = {
  english: "english_2026-04",
  french_24l: "french_24l",
  german: "german",
  german_24l: "german_24l",
  italian: "italian",
  italian_24l: "italian_24l",
  portuguese: "portuguese",
  portuguese_24l: "portuguese_24l",
  spanish: "spanish",
  spanish_24l: "spanish_24l",
};

export const POCKET_CATALOG: readonly CatalogEntry[] = [
  {
    name: "pocket-tts",
    repo: "KevinAHM/pocket-tts-onnx",
    revision: "58a6d00cf13d239b6748cb0769f35c580a8f606c",
    licence: "CC-BY-4.0 (Kyutai's prohibited uses apply: no voice cloning or impersonation without consent); not gated",
    description: "Kyutai Pocket TTS v2 (100 M parameters, 24 kHz), KevinAHM ONNX export with bundle.json",
    defaultLanguage: "english",
    defaultPrecision: "int8",
    languages: Object.fromEntries(
      Object.entries(KEVINAHM_V2_FOLDERS).map(([language, folder]) => [language, kevinAhmV2Folder(folder, language === "english" ? ENGLISH_2026_04_PINS : {})]),
    ),
  },
];

export const DEFAULT_BUNDLE_NAME = "pocket-tts";

/** Picks the entry, language and precision (defaults from the entry), or throws CatalogError listing the choices. */
export function resolveBundle(request: BundleRequest, catalog: readonly CatalogEntry[] = POCKET_CATALOG): ResolvedBundle {
  const name = request.name ?? catalog[0]?.name ?? DEFAULT_BUNDLE_NAME;
  const entry = catalog.find((candidate) => candidate.name === name);
  if (!entry) throw new CatalogError(`unknown bundle '${name}'; known bundles: ${catalog.map((candidate) => candidate.name).join(", ")}`);
  const language = request.language ?? entry.defaultLanguage;
  const variants = entry.languages[language];
  if (!variants) throw new CatalogError(`bundle '${name}' has no language '${language}'; choose one of: ${Object.keys(entry.languages).join(", ")}`);
  const precision = request.precision ?? entry.defaultPrecision;
  const files = variants[precision];
  if (!files) {
    const offered = PRECISIONS.filter((candidate) => variants[candidate]);
    throw new CatalogError(`bundle '${name}' (${language}) has no ${precision} variant; choose one of: ${offered.join(", ")}`);
  }
  const localNames = new Set<string>();
  const bundleFiles = files.map((file) => {
    const localName = posix.basename(file.path);
    if (localNames.has(localName) || localName === "" || localName === "." || localName === "..") {
      throw new CatalogError(`catalog entry '${name}' (${language}, ${precision}) has an unusable or repeated file name '${localName}'`);
    }
    localNames.add(localName);
    return { ...file, localName };
  });
  return { id: `${entry.name}-${language}-${precision}`, catalogName: entry.name, repo: entry.repo, revision: entry.revision, language, precision, files: bundleFiles };
}

/** `{hub}/{repo}/resolve/{revision}/{path}`, the hub's download URL (each path segment escaped). */
export function resolveUrl(hubUrl: string, repo: string, revision: string, path: string): string {
  const escapedPath = path.split("/").map(encodeURIComponent).join("/");
  return `${hubUrl.replace(/\/+$/, "")}/${repo}/resolve/${encodeURIComponent(revision)}/${escapedPath}`;
}
