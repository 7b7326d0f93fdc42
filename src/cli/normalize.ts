/**
 * `voxedge normalize`: text normalization as a filter. Each input line is normalized on its own and written
 * as soon as it is read, so the command works in a pipe whose other end is still writing.
 */
import { createInterface } from "node:readline";
import { once } from "node:events";
import type { Readable, Writable } from "node:stream";
import { normalizeText } from "../text/normalize/index.ts";

/** Normalizes `input` line by line into `output`, one line out per line in (an empty line stays empty). */
export async function normalizeLines(input: Readable, output: Writable, language: string): Promise<void> {
  const lines = createInterface({ input, crlfDelay: Infinity });
  for await (const line of lines) {
    // Waiting for a full output to drain keeps a slow reader from growing our buffer with the whole input.
    if (!output.write(`${normalizeText(line, { language })}\n`)) await once(output, "drain");
  }
}
