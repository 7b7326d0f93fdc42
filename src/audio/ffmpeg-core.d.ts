// @ffmpeg/core ships no types. These are the parts of its emscripten module that src/audio/codecs/aac.ts
// uses: the factory, emscripten's in-memory FS, and the helpers its own JS wrapper adds.
declare module "@ffmpeg/core" {
  export interface FfmpegCore {
    FS: {
      writeFile(path: string, data: Uint8Array): void;
      readFile(path: string): Uint8Array;
      unlink(path: string): void;
    };
    /** Runs the ffmpeg CLI's main() with these arguments; returns its exit code. */
    exec(...args: string[]): number;
    /** Clears the exit code and timeout that exec() leaves behind, so the next run starts clean. */
    reset(): void;
    setLogger(logger: (entry: { type: "stdout" | "stderr"; message: string }) => void): void;
  }

  /**
   * With `instantiateWasm` the loader hands its imports to that hook instead of fetching and compiling
   * ffmpeg-core.wasm; the hook instantiates and passes the instance to `receiveInstance`.
   */
  export default function createFFmpegCore(options: {
    instantiateWasm(imports: WebAssembly.Imports, receiveInstance: (instance: WebAssembly.Instance, module: WebAssembly.Module) => void): object;
  }): Promise<FfmpegCore>;
}
