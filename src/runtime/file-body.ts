/**
 * A byte range of a file as a response body, in the form this runtime sends best:
 * - under Bun, a lazy Blob of the file (`Bun.file(path).slice`). Bun sends it with its Content-Length, reading
 *   the file as it goes. A streamed body would go out chunked, without a Content-Length: Bun 1.4.5 drops
 *   the one a handler sets (oven-sh/bun#10507).
 * - elsewhere (Deno), a stream read a chunk at a time, whose Content-Length the handler sets and Deno keeps.
 *   node:fs's openAsBlob is not used there: Deno's reads the whole file into memory.
 */
import { open, type FileHandle } from "node:fs/promises";

const READ_CHUNK_BYTES = 256 * 1024;

export function fileRangeBody(path: string, start: number, byteCount: number): Blob | ReadableStream<Uint8Array> {
  const bun = (globalThis as { Bun?: { file(path: string): Blob } }).Bun;
  if (bun) return bun.file(path).slice(start, start + byteCount);
  return fileRangeStream(path, start, byteCount);
}

/**
 * `byteCount` bytes of the file from `start`, read a chunk at a time as the client takes them. The file is
 * opened on the first read, not before: a body nobody reads (a dropped Response) holds no handle, which
 * Bun would otherwise close at garbage collection and report as an error.
 */
export function fileRangeStream(path: string, start: number, byteCount: number): ReadableStream<Uint8Array> {
  const end = start + byteCount;
  let position = start;
  let handle: FileHandle | undefined;
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await handle?.close();
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const wanted = Math.min(READ_CHUNK_BYTES, end - position);
          if (wanted > 0) {
            handle ??= await open(path, "r");
            const chunk = new Uint8Array(wanted);
            const { bytesRead } = await handle.read(chunk, 0, wanted, position);
            if (bytesRead === 0) throw new Error(`the file ended ${end - position} bytes early (changed while it was served)`);
            position += bytesRead;
            controller.enqueue(bytesRead === wanted ? chunk : chunk.subarray(0, bytesRead));
          }
          if (position === end) {
            await close();
            controller.close();
          }
        } catch (error) {
          await close();
          controller.error(error);
        }
      },
      // The client left: release the handle now rather than when the stream is collected.
      cancel: close,
    },
    // No read ahead: nothing is read (or opened) until the runtime asks for the next chunk.
    { highWaterMark: 0 },
  );
}
