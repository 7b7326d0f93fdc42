/**
 * Voice upload throughput through the HTTP route (multipart parse, decode, safetensors write with fsync),
 * and restart time: opening a speaker folder that holds N voices.
 *   bun bench/voice-upload.ts [--uploads 40] [--voices 1000]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createApp } from "../src/app.ts";
import { encodeWav } from "../src/audio/wav.ts";
import { loadConfig } from "../src/config.ts";
import { ModelHost } from "../src/engine/host.ts";
import { loadModel } from "../src/models/registry.ts";
import { createLogger, silentLogger } from "../src/log/logger.ts";
import { loadRuntime } from "../src/runtime/serve.ts";
import { FolderVoiceStore } from "../src/voices/folder-store.ts";

const { values } = parseArgs({ options: { uploads: { type: "string", default: "40" }, voices: { type: "string", default: "1000" } } });
const uploads = Number(values.uploads);
const voiceCount = Number(values.voices);
const speakerDir = mkdtempSync(join(tmpdir(), "voxedge-upload-bench-"));

const config = loadConfig({ host: "127.0.0.1", port: "0", "speaker-dir": speakerDir, "max-uploaded-voices": String(voiceCount + uploads) }, {});
const host = ModelHost.load(() => loadModel(config, createLogger("warn")));
await host.loaded;
const runtime = await loadRuntime();
const voices = await FolderVoiceStore.open({ dir: speakerDir, maxVoices: config.maxUploadedVoices, logger: silentLogger });
const { app } = createApp({ config, host, logger: silentLogger, voices, runtime });
const server = runtime.serve(app.fetch, config.host, config.port);

const seconds = 10;
const sampleRateHz = 24000;
const tone = Float32Array.from({ length: seconds * sampleRateHz }, (_, i) => 0.3 * Math.sin((2 * Math.PI * 220 * i) / sampleRateHz));
const wav = encodeWav(tone, sampleRateHz);

async function uploadOne(name: string): Promise<void> {
  const form = new FormData();
  form.append("name", name);
  form.append("consent", "bench");
  form.append("audio_sample", new File([wav as Uint8Array<ArrayBuffer>], `${name}.wav`, { type: "audio/wav" }));
  const response = await fetch(`${server.url}/v1/audio/voices`, { method: "POST", body: form });
  if (response.status !== 200) throw new Error(`upload failed: ${await response.text()}`);
}

console.log(`${uploads} uploads of a ${seconds} s, ${sampleRateHz} Hz wav (${(wav.byteLength / 1e6).toFixed(2)} MB) over HTTP; ${runtime.name}`);
console.log("| concurrency | wall ms | uploads/s | MB/s |");
console.log("|---|---|---|---|");
for (const concurrency of [1, 4]) {
  const start = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < uploads) await uploadOne(`c${concurrency}-${next++}`);
    }),
  );
  const wallMs = performance.now() - start;
  console.log(`| ${concurrency} | ${wallMs.toFixed(0)} | ${((uploads * 1000) / wallMs).toFixed(1)} | ${((uploads * wav.byteLength) / 1e6 / (wallMs / 1000)).toFixed(1)} |`);
}
await server.stop();

// Restart: a folder with voiceCount voices (2 s each), opened as a restarting server would.
const restartDir = mkdtempSync(join(tmpdir(), "voxedge-restart-bench-"));
const filling = await FolderVoiceStore.open({ dir: restartDir, maxVoices: voiceCount, logger: silentLogger });
const clip = tone.subarray(0, 2 * sampleRateHz);
for (let i = 0; i < voiceCount; i++) await filling.saveAudio({ name: `voice-${i}`, consent: "bench", mimeType: "audio/wav", fileSizeBytes: clip.byteLength, samples: clip, sampleRateHz });
const openTimes: number[] = [];
for (let run = 0; run < 5; run++) {
  const start = performance.now();
  const reopened = await FolderVoiceStore.open({ dir: restartDir, maxVoices: voiceCount, logger: silentLogger });
  openTimes.push(performance.now() - start);
  if (reopened.list().length !== voiceCount) throw new Error("restore lost voices");
}
openTimes.sort((a, b) => a - b);
console.log(`\nrestart with ${voiceCount} voices: open ${openTimes[0]!.toFixed(1)} ms min / ${openTimes[2]!.toFixed(1)} ms median of 5`);
rmSync(speakerDir, { recursive: true, force: true });
rmSync(restartDir, { recursive: true, force: true });
await host.close();
