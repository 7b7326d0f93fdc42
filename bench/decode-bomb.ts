/**
 * Decompression bombs through the real routes: a voice upload (POST /v1/audio/voices) and a speech
 * request's ref_audio data: URL. Each input runs in a child process of its own so that its peak RSS is
 * its own; the longest event-loop stall is what a concurrent /health request would have waited.
 *
 *   bun bench/decode-bomb.ts [--only flac-174k-unknown,...]
 *
 * Peak RSS is getrusage's ru_maxrss (process.resourceUsage().maxRSS) after the request, minus its value
 * once the app is built and every decoder has been loaded by one small valid file.
 */
import { spawnSync } from "node:child_process";
import { parseArgs } from "node:util";
import { constantFlac, ffmpegSilence, OGG_VORBIS, wavWithDeclaredSize, withoutOggGranules } from "../test/support/audio-bombs.ts";
import { testApp } from "../test/support/server.ts";
import { ToneModel } from "../test/support/tone-model.ts";
import { multipartBody } from "../test/support/uploads.ts";

type Route = "upload" | "ref_audio";

interface BenchInput {
  name: string;
  route: Route;
  make(): Uint8Array;
}

/** ~14.9 bytes per CONSTANT frame: 11 700 frames of 65535 samples are the reported 174 kB, 4.8 h of 44.1 kHz audio. */
const REPORTED_BOMB_FRAMES = 11_700;
const reportedBomb = (declaredTotalSamples: number) =>
  constantFlac({ sampleRateHz: 44100, channelCount: 1, blockSize: 65535, frameCount: REPORTED_BOMB_FRAMES, declaredTotalSamples });

const INPUTS: BenchInput[] = [
  { name: "flac-174k-unknown", route: "upload", make: () => reportedBomb(0) },
  { name: "flac-174k-unknown", route: "ref_audio", make: () => reportedBomb(0) },
  { name: "flac-174k-declared", route: "upload", make: () => reportedBomb(REPORTED_BOMB_FRAMES * 65535) },
  { name: "flac-1h-4096-stereo-unknown", route: "upload", make: () => constantFlac({ sampleRateHz: 48000, channelCount: 2, blockSize: 4096, frameCount: Math.ceil((3600 * 48000) / 4096), declaredTotalSamples: 0 }) },
  { name: "wav-streaming-size-9.5MB", route: "upload", make: () => wavWithDeclaredSize(8000, (9.5 * 1024 * 1024) / 16000, "streaming") },
  { name: "wav-declares-2s-holds-9.5MB", route: "upload", make: () => wavWithDeclaredSize(8000, (9.5 * 1024 * 1024) / 16000, 2 * 8000 * 2) },
  { name: "vorbis-1h-silence", route: "upload", make: () => ffmpegSilence(3600, 8000, OGG_VORBIS) },
  { name: "vorbis-1h-silence-no-granules", route: "upload", make: () => withoutOggGranules(ffmpegSilence(3600, 8000, OGG_VORBIS)) },
  { name: "flac-20s-valid (control)", route: "upload", make: () => constantFlac({ sampleRateHz: 44100, channelCount: 1, blockSize: 4096, frameCount: Math.floor((20 * 44100) / 4096), declaredTotalSamples: Math.floor((20 * 44100) / 4096) * 4096 }) },
];

interface Measurement {
  bytes: number;
  wallMs: number;
  peakRssDeltaMb: number;
  longestStallMs: number;
  outcome: string;
}

const { values } = parseArgs({ options: { only: { type: "string" }, child: { type: "string" }, route: { type: "string" } } });

if (values.child !== undefined) {
  const input = INPUTS.find((candidate) => candidate.name === values.child && candidate.route === values.route);
  if (!input) throw new Error(`no input ${values.child} on ${values.route}`);
  console.log(JSON.stringify(await measure(input)));
} else {
  const selected = values.only === undefined ? INPUTS : INPUTS.filter((input) => values.only!.split(",").includes(input.name));
  console.log(`decompression bombs through the routes (${process.versions.bun ? `bun ${process.versions.bun}` : `node ${process.version}`}), one child process per row`);
  console.log("| input | route | bytes | time ms | peak RSS delta MB | longest event-loop stall ms | outcome |");
  console.log("|---|---|---|---|---|---|---|");
  for (const input of selected) {
    const child = spawnSync(process.execPath, [import.meta.path, "--child", input.name, "--route", input.route], { encoding: "utf8", maxBuffer: 1 << 24 });
    const lastLine = child.stdout.trim().split("\n").at(-1) ?? "";
    if (child.status !== 0 || !lastLine.startsWith("{")) {
      console.log(`| ${input.name} | ${input.route} | | | | | child failed (status ${child.status}, signal ${child.signal}): ${child.stderr.trim().split("\n").at(-1) ?? ""} |`);
      continue;
    }
    const result = JSON.parse(lastLine) as Measurement;
    console.log(`| ${input.name} | ${input.route} | ${result.bytes} | ${result.wallMs.toFixed(0)} | ${result.peakRssDeltaMb.toFixed(0)} | ${result.longestStallMs.toFixed(0)} | ${result.outcome} |`);
  }
}

async function measure(input: BenchInput): Promise<Measurement> {
  const bytes = input.make();
  const adapter = new ToneModel({ cloning: true });
  const { app } = await testApp(adapter);
  // Loads every decoder the inputs use, so that wasm instantiation is not counted against the bomb.
  const warmUp = constantFlac({ sampleRateHz: 8000, channelCount: 1, blockSize: 4096, frameCount: 4, declaredTotalSamples: 4 * 4096 });
  await send(app, "upload", warmUp, "warm-up");
  await send(app, "upload", withoutOggGranules(ffmpegSilence(2, 8000, OGG_VORBIS)), "warm-up-ogg");
  const baselineKb = process.resourceUsage().maxRSS;

  let longestStallMs = 0;
  let lastTick = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    longestStallMs = Math.max(longestStallMs, now - lastTick);
    lastTick = now;
  }, 1);
  const start = performance.now();
  const response = await send(app, input.route, bytes, "bomb");
  const wallMs = performance.now() - start;
  clearInterval(ticker);
  longestStallMs = Math.max(longestStallMs, performance.now() - lastTick);
  const peakRssDeltaMb = (process.resourceUsage().maxRSS - baselineKb) / 1024;

  const body = (await response.json()) as { error?: { message: string } };
  const outcome = response.status === 200 ? "200 accepted" : `${response.status} ${body.error?.message ?? ""}`;
  return { bytes: bytes.length, wallMs, peakRssDeltaMb, longestStallMs, outcome };
}

async function send(app: Awaited<ReturnType<typeof testApp>>["app"], route: Route, bytes: Uint8Array, name: string): Promise<Response> {
  if (route === "upload") {
    const { body, contentType } = await multipartBody({ name, consent: "bench", audio_sample: new File([bytes as Uint8Array<ArrayBuffer>], "sample.bin", { type: "application/octet-stream" }) });
    return app.request("/v1/audio/voices", { method: "POST", headers: { "content-type": contentType }, body: body as Uint8Array<ArrayBuffer> });
  }
  const reference = `data:application/octet-stream;base64,${Buffer.from(bytes).toString("base64")}`;
  return app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "bench", response_format: "pcm", ref_audio: reference }) });
}
