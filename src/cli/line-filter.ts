/**
 * The command line as a filter (`voxedge normalize`): each input line is transformed on its own and written as
 * soon as it is read, so a command works in a pipe whose other end is still writing.
 */
import { createInterface } from "node:readline";
import { once } from "node:events";
import type { Readable, Writable } from "node:stream";

/** One line out per line in (an empty line stays one); `transform` never sees the line break. */
export async function filterLines(input: Readable, output: Writable, transform: (line: string) => string, options: LineFilterOptions = {}): Promise<void> {
  const lines = createInterface({ input, crlfDelay: Infinity });
  const newline = options.newline === false ? "" : "\n";
  for await (const line of lines) {
    // Waiting for a full output to drain keeps a slow reader from growing our buffer with the whole input.
    if (!output.write(`${transform(line)}${newline}`)) await once(output, "drain");
  }
  const rest = options.finish?.();
  if (rest) output.write(rest);
}

export interface LineFilterOptions {
  /** false: the transform writes its own line ends (it may hold a line back, or make several of one). */
  newline?: boolean;
  /** What is written after the last line. */
  finish?: () => string;
}
