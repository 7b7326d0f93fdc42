/**
 * Cost of the persistent voice store on the local disk (every save fsyncs the file and the folder):
 * saving 200 voices of 5 s of 24 kHz audio, re-opening a folder of 1000 such voices (restore reads only
 * the headers), and loading one voice's audio back. The folder is a fresh temp folder, removed afterwards.
 *   bun bench/voice-store.ts [--dir /path/on/the/disk/to/measure]
 *   deno run -A bench/voice-store.ts
 */
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { silentLogger } from "../src/log/logger.ts";
import { FolderVoiceStore } from "../src/voices/folder-store.ts";

const { values } = parseArgs({ options: { dir: { type: "string", default: tmpdir() } } });

const SAMPLE_RATE_HZ = 24000;
const VOICE_SECONDS = 5;
const SAVED_VOICE_COUNT = 200;
const RESTORED_VOICE_COUNT = 1000;
const OPEN_RUNS = 5;
const LOAD_RUNS = 50;
const MEGABYTE_BYTES = 1_000_000;

const samples = Float32Array.from({ length: SAMPLE_RATE_HZ * VOICE_SECONDS }, (_, index) => 0.3 * Math.sin((2 * Math.PI * 220 * index) / SAMPLE_RATE_HZ));
const saveVoice = (store: FolderVoiceStore, index: number) =>
  store.saveAudio({ name: `bench-voice-${index}`, consent: "bench", mimeType: "audio/wav", fileSizeBytes: samples.byteLength + 44, samples, sampleRateHz: SAMPLE_RATE_HZ, refText: "A short reference sentence." });

function summarise(timesMs: number[]) {
  const sorted = [...timesMs].sort((a, b) => a - b);
  return { minMs: sorted[0]!, medianMs: sorted[Math.floor(sorted.length / 2)]! };
}

const dir = await mkdtemp(join(values.dir, "voxedge-voice-store-bench-"));
try {
  const store = await FolderVoiceStore.open({ dir, maxVoices: RESTORED_VOICE_COUNT, logger: silentLogger });

  // Saves are issued all at once, as concurrent uploads would be; the store runs them one by one.
  const saveStartMs = performance.now();
  const saved = await Promise.all(Array.from({ length: SAVED_VOICE_COUNT }, (_, index) => saveVoice(store, index)));
  const saveMs = performance.now() - saveStartMs;
  const fileBytes = (await stat(join(dir, (await readdir(dir))[0]!))).size;

  for (let index = SAVED_VOICE_COUNT; index < RESTORED_VOICE_COUNT; index++) await saveVoice(store, index);
  const openTimesMs: number[] = [];
  for (let run = 0; run < OPEN_RUNS; run++) {
    const openStartMs = performance.now();
    const reopened = await FolderVoiceStore.open({ dir, maxVoices: RESTORED_VOICE_COUNT, logger: silentLogger });
    openTimesMs.push(performance.now() - openStartMs);
    if (reopened.list().length !== RESTORED_VOICE_COUNT) throw new Error(`restored ${reopened.list().length} voices, expected ${RESTORED_VOICE_COUNT}`);
  }

  const loadTimesMs: number[] = [];
  for (let run = 0; run < LOAD_RUNS; run++) {
    const loadStartMs = performance.now();
    const loaded = await store.loadAudio(saved[run % saved.length]!.name);
    loadTimesMs.push(performance.now() - loadStartMs);
    if (loaded?.samples.length !== samples.length) throw new Error("loadAudio returned the wrong voice");
  }

  const open = summarise(openTimesMs);
  const load = summarise(loadTimesMs);
  const row = (label: string, value: string) => console.log(`${label.padEnd(44)}${value}`);
  console.log(`${navigator.userAgent}; ${VOICE_SECONDS} s of ${SAMPLE_RATE_HZ} Hz float32 per voice (${(fileBytes / MEGABYTE_BYTES).toFixed(2)} MB file); folder under ${values.dir}\n`);
  row(`save ${SAVED_VOICE_COUNT} voices (fsync file + folder)`, `${saveMs.toFixed(0)} ms  ${((SAVED_VOICE_COUNT * 1000) / saveMs).toFixed(1)} voices/s  ${((SAVED_VOICE_COUNT * fileBytes) / MEGABYTE_BYTES / (saveMs / 1000)).toFixed(1)} MB/s`);
  row(`open a store of ${RESTORED_VOICE_COUNT} voices (${OPEN_RUNS} runs)`, `min ${open.minMs.toFixed(1)} ms  median ${open.medianMs.toFixed(1)} ms`);
  row(`loadAudio of one voice (${LOAD_RUNS} runs)`, `min ${load.minMs.toFixed(2)} ms  median ${load.medianMs.toFixed(2)} ms`);
} finally {
  await rm(dir, { recursive: true, force: true });
}
