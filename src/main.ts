#!/usr/bin/env bun
/** voxedge CLI: `serve` (default), `say "text" -o out.wav`, `normalize`, `models pull` and `conformance`. */
import process from "node:process";
import { writeFile } from "node:fs/promises";
import { extname } from "node:path";
import { ConfigError, configHelp, describeConfig, loadConfig, parseCommandLine, type Config } from "./config.ts";
import { createServices } from "./services.ts";
import { wholeAudio } from "./speech/service.ts";
import { onStopSignal, openVoiceStore, startServingProcess } from "./server.ts";
import { engineOptionsOf, ModelHost } from "./engine/host.ts";
import { loadModel } from "./models/registry.ts";
import { createLogger } from "./log/logger.ts";
import { loadRuntime } from "./runtime/serve.ts";
import { RESPONSE_FORMATS, speechRequestSchema } from "./api/speech.ts";
import { fromZodError } from "./api/errors.ts";
import { asApiError } from "./speech/errors.ts";
import { VoiceStoreFolderError } from "./voices/folder-store.ts";
import { VoiceStoreBucketError } from "./voices/s3-store.ts";
import { openVoiceStoreAt } from "./voices/open-store.ts";
import { loadVoiceBody } from "./voices/store.ts";
import { isS3Url, parseS3Url, S3Bucket, S3ConfigError, s3SettingsFromEnv } from "./storage/s3.ts";
import { createProgressRenderer } from "./cli/progress.ts";
import { filterLines } from "./cli/line-filter.ts";
import { normalizeText } from "./text/normalize/index.ts";
import { MarkdownReader, readMarkdown } from "./text/markdown.ts";
import { isSsmlDocument, readSsml, splitAtBreaks, SsmlError } from "./text/ssml.ts";
import { markdownReadingOf } from "./speech/markdown-reading.ts";
import { loadLexicon } from "./speech/lexicon-file.ts";
import { LexiconError, type Lexicon } from "./text/lexicon.ts";
import { pullBundle, PullError } from "./weights/download.ts";
import { CatalogError, type Precision } from "./weights/catalog.ts";

const USAGE = `Usage:
  voxedge [serve] [options]                         serve the speech API
  voxedge say "text" -o out.wav [--voice V] [--format wav|pcm|mp3|flac|opus|aac] [--speed S] [--seed N]
  voxedge normalize [--language en] [--lexicon FILE] [--ssml]
                                                    read lines on stdin, print what the model reads: markdown
                                                    read, the lexicon's aliases, written forms ("$19.99",
                                                    "03/04/2026") as they are said; --ssml: the whole input as
                                                    SSML or text with breaks, pauses shown
  voxedge models pull [name] [--language L] [--precision int8|fp32] [--from s3://BUCKET/PREFIX]
                                                    download a Pocket TTS bundle into the model cache
                                                    (--from: from an S3 mirror of a model cache, not the hub)
  voxedge voices copy --from <folder|s3://BUCKET/PREFIX> --to <folder|s3://BUCKET/PREFIX>
                                                    copy uploaded voices between stores, created_at and
                                                    consent kept (a vLLM-Omni speaker folder reads as is)
  voxedge conformance <fixture-dir> [--decoder onnx|wgsl] [--batch N] [--provider auto|onnxruntime-node|onnxruntime-web|webgpu] [--browser]
                                                    run every golden case of a Pocket TTS fixture; prints JSON;
                                                    --batch N: each golden stream inside model calls of N streams;
                                                    --provider webgpu: the language-model graphs on the WebGPU EP;
                                                    --browser: inside headless Chromium, through the page's engine
  voxedge --help`;

async function main(argv: string[]): Promise<number> {
  let parsed: ReturnType<typeof parseCommandLine>;
  try {
    parsed = parseCommandLine(argv);
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(`${USAGE}\n\n${configHelp()}`);
    return 0;
  }
  let config: Config;
  try {
    config = loadConfig(values, process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      return 2;
    }
    throw error;
  }
  const [command = "serve", ...rest] = positionals;
  try {
    if (command === "serve") return await runServe(config);
    if (command === "say") return await runSay(config, rest.join(" "), values);
  } catch (error) {
    const startError = startErrorMessage(error);
    if (startError === undefined) throw error;
    console.error(startError);
    return 1;
  }
  if (command === "normalize") return values.ssml ? runNormalizeSsml(config, values.language) : runNormalize(config, values.language);
  if (command === "models" && rest[0] === "pull") return runPull(config, rest[1], values);
  if (command === "voices" && rest[0] === "copy") return runVoicesCopy(config, values);
  // `--device gpu` (any adapter, software included) puts the language model on the WebGPU EP, as it does for serve.
  if (command === "conformance") return runConformanceCommand(rest[0], values.decoder, values.batch, values.provider ?? (config.device === "gpu" ? "webgpu" : "auto"), values.browser === "true");
  console.error(`unknown command '${command}'\n\n${USAGE}`);
  return 2;
}

async function runServe(config: Config): Promise<number> {
  // Read before anything starts, so a lexicon that cannot be used stops the start at once.
  if (config.lexicon) loadLexicon(config.lexicon);
  const logger = createLogger(config.logLevel);
  const runtime = await loadRuntime();
  logger.info("starting voxedge", { runtime: runtime.name, config: describeConfig(config) });
  const serving = await startServingProcess(config, logger, runtime);
  const server = runtime.serve(serving.fetch, config.host, config.port, { keepAliveTimeoutSeconds: config.keepAliveTimeoutSeconds, writeStallTimeoutSeconds: config.streamStallTimeoutSeconds });
  logger.info("listening", { url: server.url });
  await onStopSignal(process, logger, (hurry) => serving.shutDown(() => server.stop(), hurry));
  // Everything is closed; a handle some library left open must not keep a stopped server from exiting 0.
  setTimeout(() => process.exit(0), 2000).unref();
  return 0;
}

async function runSay(config: Config, text: string, values: ReturnType<typeof parseCommandLine>["values"]): Promise<number> {
  if (!values.output) {
    console.error(`say needs -o <file>\n\n${USAGE}`);
    return 2;
  }
  const formatFromName = extname(values.output).slice(1).toLowerCase();
  const format = values.format ?? ((RESPONSE_FORMATS as readonly string[]).includes(formatFromName) ? formatFromName : "wav");
  const parsed = speechRequestSchema.safeParse({
    input: text,
    voice: values.voice,
    response_format: format,
    speed: values.speed === undefined ? undefined : Number(values.speed),
    // An int64 as written: Number would round a seed above 2^53 (and 2^63 − 1 up past the int64 range).
    seed: values.seed === undefined ? undefined : /^-?\d+$/.test(values.seed.trim()) ? BigInt(values.seed.trim()) : Number(values.seed),
  });
  const logger = createLogger(config.logLevel);
  const host = ModelHost.load(() => loadModel(config, logger), engineOptionsOf(config));
  const { openai } = createServices({ config, host, logger, voices: await openVoiceStore(config, logger) });
  try {
    if (!parsed.success) throw fromZodError(parsed.error);
    await host.loaded;
    const signal = new AbortController().signal;
    const speech = await openai.start(parsed.data, "speech", signal);
    await writeFile(values.output, await wholeAudio(speech.audio));
    console.error(`wrote ${values.output}: ${(await speech.done).audioSeconds.toFixed(2)} s of ${format}`);
    return 0;
  } catch (error) {
    const refusal = asApiError(error);
    console.error(refusal ? `error: ${refusal.message}` : error);
    return 1;
  } finally {
    await host.close();
  }
}

/** `normalize --ssml`: the whole input read as a speech request's is, its pauses shown where they fall. */
async function runNormalizeSsml(config: Config, language = "en"): Promise<number> {
  let input = "";
  for await (const chunk of process.stdin) input += String(chunk);
  try {
    const lexicon = config.lexicon ? loadLexicon(config.lexicon) : undefined;
    const reading = markdownReadingOf(config);
    const { parts } = isSsmlDocument(input) ? readSsml(input) : { parts: splitAtBreaks(input) };
    const out = parts.map((part) => {
      const read = reading ? readMarkdown(part.text, reading).trim() : part.text.trim();
      const said = normalizeText(lexicon ? lexicon.apply(read) : read, { language });
      return `${said}${part.pauseAfterMs > 0 ? `${said ? " " : ""}<break time="${part.pauseAfterMs}ms"/>` : ""}`;
    });
    console.log(out.filter(Boolean).join(" ").replace(/\s*\n\s*/g, " "));
    return 0;
  } catch (error) {
    if (error instanceof SsmlError || error instanceof LexiconError) {
      console.error(error.message);
      return 1;
    }
    throw error;
  }
}

/** What the model would read: markdown read as the server reads it (one reader over every line, as a code fence spans lines), then normalized. */
async function runNormalize(config: Config, language = "en"): Promise<number> {
  let lexicon: Lexicon | undefined;
  try {
    lexicon = config.lexicon ? loadLexicon(config.lexicon) : undefined;
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    return 1;
  }
  const normalizeLine = (line: string) => normalizeText(lexicon ? lexicon.apply(line) : line, { language });
  const reading = markdownReadingOf(config);
  if (!reading) {
    await filterLines(process.stdin, process.stdout, normalizeLine);
    return 0;
  }
  const reader = new MarkdownReader(reading);
  const normalized = (read: string) => read.split("\n").map(normalizeLine).join("\n");
  await filterLines(process.stdin, process.stdout, (line) => normalized(reader.push(`${line}\n`)), { newline: false, finish: () => normalized(reader.flush()) });
  return 0;
}

const CONFORMANCE_PROVIDERS = ["auto", "onnxruntime-node", "onnxruntime-web", "webgpu"] as const;

async function runConformanceCommand(fixtureDir: string | undefined, decoder = "onnx", batchFlag?: string, provider = "auto", inBrowser = false): Promise<number> {
  if (!fixtureDir) {
    console.error(`conformance needs a fixture folder\n\n${USAGE}`);
    return 2;
  }
  if (decoder !== "onnx" && decoder !== "wgsl") {
    console.error(`--decoder must be onnx or wgsl, not ${decoder}`);
    return 2;
  }
  const batch = batchFlag === undefined ? undefined : Number(batchFlag);
  if (batch !== undefined && (!Number.isInteger(batch) || batch < 1 || batch > 256)) {
    console.error(`--batch must be an integer from 1 to 256, not ${batchFlag}`);
    return 2;
  }
  if (!(CONFORMANCE_PROVIDERS as readonly string[]).includes(provider)) {
    console.error(`--provider must be one of ${CONFORMANCE_PROVIDERS.join(", ")}, not ${provider}`);
    return 2;
  }
  if (inBrowser) return runBrowserConformance(fixtureDir, decoder, batch, provider);
  // Loaded here only: onnxruntime-web is not needed to serve with the offline engine.
  const { runConformance } = await import("./conformance/harness.ts");
  // A software adapter is fine for a correctness check.
  const providerOptions = provider === "webgpu" ? { gpuDevice: (await (await import("./gpu/device.ts")).acquireGpu({ allowSoftware: true })).device } : { provider: provider as "auto" | "onnxruntime-node" | "onnxruntime-web" };
  const report = await runConformance(fixtureDir, decoder, providerOptions, batch);
  console.log(JSON.stringify(report));
  return report.pass ? 0 : 1;
}

/** The golden cases in headless Chromium: onnxruntime-web in the page, on its wasm EP or (`--provider webgpu`) its WebGPU EP. */
async function runBrowserConformance(fixtureDir: string, decoder: "onnx" | "wgsl", batch: number | undefined, provider: string): Promise<number> {
  if (provider === "onnxruntime-node") {
    console.error("--browser runs onnxruntime-web in the page: --provider must be auto, onnxruntime-web or webgpu");
    return 2;
  }
  const { runConformanceInBrowser } = await import("./chromium/conformance.ts");
  let report;
  try {
    report = await runConformanceInBrowser(fixtureDir, { decoder, ep: provider === "webgpu" ? "webgpu" : "wasm", ...(batch !== undefined ? { batch } : {}), onConsole: (line) => console.error(line) });
  } catch (error) {
    console.error(`conformance --browser failed: ${(error as Error).message}`);
    return 1;
  }
  console.log(JSON.stringify(report));
  return report.pass ? 0 : 1;
}

async function runPull(config: Config, name: string | undefined, values: ReturnType<typeof parseCommandLine>["values"]): Promise<number> {
  const abort = new AbortController();
  process.once("SIGINT", () => abort.abort(new Error("interrupted")));
  try {
    const mirror = values.from === undefined ? undefined : mirrorAt(values.from);
    const dir = await pullBundle({
      ...(mirror === undefined ? {} : { mirror }),
      name,
      language: values.language,
      precision: values.precision as Precision | undefined,
      hubUrl: config.hubUrl,
      cacheDir: config.modelCacheDir,
      signal: abort.signal,
      onProgress: createProgressRenderer({ write: (text) => process.stderr.write(text), isTTY: Boolean(process.stderr.isTTY), columns: process.stderr.columns }),
    });
    console.log(dir);
    return 0;
  } catch (error) {
    if (process.stderr.isTTY) process.stderr.write("\n");
    console.error(`models pull failed: ${error instanceof PullError || error instanceof CatalogError || error instanceof S3ConfigError ? error.message : String(error)}`);
    return 1;
  }
}

/** `models pull --from s3://BUCKET/PREFIX`: credentials and endpoint from the same variables as the voice store's. */
function mirrorAt(location: string): { bucket: S3Bucket; prefix: string } {
  if (!isS3Url(location)) throw new S3ConfigError(`--from must be an s3://BUCKET/PREFIX mirror of a model cache, not '${location}'`);
  const { bucket, prefix } = parseS3Url(location);
  return { bucket: new S3Bucket(s3SettingsFromEnv(process.env), bucket), prefix };
}

/** What to tell the operator when the voice store cannot be opened, or undefined for any other error. */
function startErrorMessage(error: unknown): string | undefined {
  if (error instanceof VoiceStoreFolderError) return `${error.message}; set --speaker-dir (SPEAKER_SAMPLES_DIR) to a writable folder`;
  if (error instanceof VoiceStoreBucketError || error instanceof S3ConfigError) return `${error.message} (--voice-store / VOXEDGE_VOICE_STORE)`;
  if (error instanceof LexiconError) return error.message;
  return undefined;
}

/**
 * Every voice of one store into another, `created_at`, consent and metadata kept. A name the target already
 * has at the same or a newer `created_at` is kept as it is, so a copy can be run again; the target's cap is
 * not applied (it limits uploads, not an operator's move).
 */
async function runVoicesCopy(config: Config, values: ReturnType<typeof parseCommandLine>["values"]): Promise<number> {
  if (!values.from || !values.to) {
    console.error(`voices copy needs --from and --to\n\n${USAGE}`);
    return 2;
  }
  // Its answer is the JSON report on stdout; the stores' "opened" lines would only be noise around it.
  const logger = createLogger(config.logLevel === "info" ? "warn" : config.logLevel);
  const open = (location: string) => openVoiceStoreAt(location, { maxVoices: Number.MAX_SAFE_INTEGER, logger, env: process.env });
  try {
    const source = await open(values.from);
    const target = await open(values.to);
    let imported = 0;
    let kept = 0;
    for (const voice of source.list()) {
      const body = await loadVoiceBody(source, voice);
      if (body === undefined) throw new Error(`voice '${voice.name}' could not be read from ${values.from}`);
      if ((await target.importVoice(voice, body)) === "imported") imported++;
      else kept++;
    }
    console.log(JSON.stringify({ from: values.from, to: values.to, copied: imported, already_there: kept }));
    return 0;
  } catch (error) {
    const startError = startErrorMessage(error);
    console.error(`voices copy failed: ${startError ?? (error instanceof Error ? error.message : String(error))}`);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
