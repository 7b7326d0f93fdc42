/**
 * CMU Flite as a reusable program: one compiled module and one linear memory for the life of the process,
 * a fresh instance per sentence, files kept in memory.
 *
 * Flite is a WASI *command* (`_start` runs main once; a second `_start` on the same instance reads freed
 * state and traps), so each sentence needs fresh instance state. What must not be made per sentence:
 * - host files: node:wasi opens a real descriptor for every preopened folder and never closes it, one
 *   leaked descriptor per sentence until the process hits its limit. Here the WASI layer is
 *   @bjorn3/browser_wasi_shim over an in-memory folder: no descriptors, no temp files.
 * - linear memory: JavaScriptCore backs each wasm memory with a large "fast memory" reservation; with a new
 *   memory per sentence (beside the audio decoders' instances) it runs out and falls back to bounds-checked
 *   memory for good, about 10× slower. So the module is rewritten at load to *import* its memory, and every
 *   instance gets the same one, zeroed first: data segments are re-applied by instantiation, and zero is
 *   what a fresh memory holds, so each run starts exactly as in a new process (same bytes out).
 * - a memory that grows by copying: JavaScriptCore gives at most 8 memories of a process (every thread's
 *   together) a fast-memory reservation. Any other non-shared memory is a plain allocation, and each
 *   `memory.grow` reallocates and copies all of it; Flite's malloc grows a few pages at a time, so a long
 *   sentence in such a process made hundreds of copies of up to 100 MB (300 digits: over a minute instead of
 *   a second, and a worker that `terminate()` could not stop meanwhile). So the memory is *shared*, with a
 *   maximum: a shared memory reserves its maximum when made and grows in place, whichever kind it got.
 */
import { ConsoleStdout, File, OpenFile, PreopenDirectory, WASI } from "@bjorn3/browser_wasi_shim";
import { concatBytes } from "../../lib/concat.ts";

const OUTPUT_NAME = "out.wav";
const WASM_HEADER_BYTES = 8;
const IMPORT_SECTION = 2;
const MEMORY_SECTION = 5;
const IMPORT_KIND_MEMORY = 0x02;
/** Limits flags (WebAssembly binary format §5.3.8): bit 0 a maximum follows the minimum, bit 1 shared. */
const LIMITS_HAS_MAXIMUM = 0x01;
const LIMITS_SHARED = 0x02;
/**
 * The most linear memory one sentence may take, in 64 KiB pages (1 GiB), reserved (not committed) up front.
 * A segment of at most 300 characters measured 81 MB (digits) to 119 MB (years read out).
 */
export const MAX_MEMORY_PAGES = 16384;

export interface FliteOutput {
  /** The WAV file Flite wrote. */
  wav: Uint8Array;
  /** What Flite printed (stdout and stderr), for error messages. */
  log: string;
}

function readUnsignedLeb128(bytes: Uint8Array, offset: number): [value: number, next: number] {
  let value = 0;
  let shift = 0;
  for (;;) {
    const byte = bytes[offset++];
    if (byte === undefined) throw new Error("flite.wasm: truncated LEB128 number");
    value += (byte & 0x7f) * 2 ** shift;
    if ((byte & 0x80) === 0) return [value, offset];
    shift += 7;
  }
}

function unsignedLeb128(value: number): number[] {
  const out: number[] = [];
  do {
    let byte = value & 0x7f;
    value = Math.floor(value / 128);
    if (value > 0) byte |= 0x80;
    out.push(byte);
  } while (value > 0);
  return out;
}

const encodedName = (name: string) => {
  const bytes = new TextEncoder().encode(name);
  return [...unsignedLeb128(bytes.length), ...bytes];
};

/**
 * The same module, but with its one defined memory turned into an import `env.memory` of the same minimum,
 * shared, with a maximum of MAX_MEMORY_PAGES (or the module's own, if smaller) (WebAssembly binary format
 * §5.5: the import section gains a memory import, the memory section goes; the memory index space still
 * holds exactly one memory, so no index changes). Returns the rewritten bytes and the memory's limits in
 * 64 KiB pages.
 */
export function withImportedMemory(wasm: Uint8Array): { bytes: Uint8Array; initialPages: number; maximumPages: number } {
  if (wasm.length < WASM_HEADER_BYTES || wasm[0] !== 0x00 || wasm[1] !== 0x61 || wasm[2] !== 0x73 || wasm[3] !== 0x6d) {
    throw new Error("flite.wasm is not a WebAssembly module");
  }
  const sections: { id: number; body: Uint8Array }[] = [];
  for (let offset = WASM_HEADER_BYTES; offset < wasm.length; ) {
    const id = wasm[offset]!;
    const [size, bodyStart] = readUnsignedLeb128(wasm, offset + 1);
    sections.push({ id, body: wasm.subarray(bodyStart, bodyStart + size) });
    offset = bodyStart + size;
  }
  const memory = sections.find((section) => section.id === MEMORY_SECTION);
  const imports = sections.find((section) => section.id === IMPORT_SECTION);
  if (!memory || !imports) throw new Error("flite.wasm: expected an import section and a defined memory");
  const [memoryCount, limitsStart] = readUnsignedLeb128(memory.body, 0);
  if (memoryCount !== 1) throw new Error(`flite.wasm: expected one memory, found ${memoryCount}`);
  const limitsFlags = memory.body[limitsStart]!;
  const [initialPages, afterInitial] = readUnsignedLeb128(memory.body, limitsStart + 1);
  const declaredMaximum = limitsFlags & LIMITS_HAS_MAXIMUM ? readUnsignedLeb128(memory.body, afterInitial)[0] : Infinity;
  const maximumPages = Math.max(initialPages, Math.min(declaredMaximum, MAX_MEMORY_PAGES));
  const [importCount, entriesStart] = readUnsignedLeb128(imports.body, 0);
  const importBody = Uint8Array.from([
    ...unsignedLeb128(importCount + 1),
    ...imports.body.subarray(entriesStart),
    ...encodedName("env"),
    ...encodedName("memory"),
    IMPORT_KIND_MEMORY,
    LIMITS_HAS_MAXIMUM | LIMITS_SHARED,
    ...unsignedLeb128(initialPages),
    ...unsignedLeb128(maximumPages),
  ]);
  const parts: Uint8Array[] = [wasm.subarray(0, WASM_HEADER_BYTES)];
  for (const section of sections) {
    if (section.id === MEMORY_SECTION) continue;
    const body = section.id === IMPORT_SECTION ? importBody : section.body;
    parts.push(Uint8Array.from([section.id, ...unsignedLeb128(body.length)]), body);
  }
  return { bytes: concatBytes(parts), initialPages, maximumPages };
}

export class FliteProgram {
  private constructor(
    private readonly module: WebAssembly.Module,
    private readonly memory: WebAssembly.Memory,
  ) {}

  /** Compiles flite.wasm (about 21 MB) once. */
  static async compile(wasm: Uint8Array): Promise<FliteProgram> {
    const { bytes, initialPages, maximumPages } = withImportedMemory(wasm);
    const module = await WebAssembly.compile(bytes as Uint8Array<ArrayBuffer>);
    return new FliteProgram(module, new WebAssembly.Memory({ initial: initialPages, maximum: maximumPages, shared: true }));
  }

  /** Bytes of linear memory in use: it grows to the largest sentence's need and stays there. */
  get memoryBytes(): number {
    return this.memory.buffer.byteLength;
  }

  /** Runs `flite ARGS… -o out.wav` to completion; throws if Flite exits non-zero or writes nothing. */
  run(args: readonly string[]): FliteOutput {
    const folder = new PreopenDirectory(".", new Map());
    let log = "";
    const print = ConsoleStdout.lineBuffered((line) => {
      // Flite's warnings are short; a runaway one must not grow without bound.
      if (log.length < 4096) log += `${line}\n`;
    });
    const wasi = new WASI(["flite", ...args, "-o", OUTPUT_NAME], [], [new OpenFile(new File([])), print, print, folder], { debug: false });
    new Uint8Array(this.memory.buffer).fill(0);
    const instance = new WebAssembly.Instance(this.module, {
      env: { memory: this.memory },
      wasi_snapshot_preview1: wasi.wasiImport,
    } as WebAssembly.Imports);
    const code = wasi.start(instance as unknown as Parameters<WASI["start"]>[0]);
    if (code !== 0) throw new Error(`flite exited with code ${code}${log ? `: ${log.trim()}` : ""}`);
    const output = folder.dir.contents.get(OUTPUT_NAME);
    if (!(output instanceof File)) throw new Error(`flite wrote no audio${log ? `: ${log.trim()}` : ""}`);
    return { wav: output.data, log };
  }
}
