/** The `models pull` progress display of the command line. */
import type { PullProgress } from "../weights/download.ts";

export interface ProgressOutput {
  write(text: string): unknown;
  isTTY?: boolean;
  /** Terminal width; a TTY line is cut to fit. */
  columns?: number;
}

const BAR_CELLS = 24;

/**
 * A progress callback for the CLI. On a TTY: one line redrawn in place (only when its text changes), ended by a
 * newline after the last file. Elsewhere (logs, CI): one line per file once it is verified or found cached.
 */
export function createProgressRenderer(output: ProgressOutput): (progress: PullProgress) => void {
  let shownLine = "";
  return (progress) => {
    const finished = progress.state === "verified" || progress.state === "cached";
    const position = `${progress.fileIndex + 1}/${progress.fileCount}`;
    if (!output.isTTY) {
      if (!finished) return;
      const outcome = progress.state === "cached" ? "already present, verified" : "downloaded, verified";
      output.write(`[${position}] ${progress.file} ${formatBytes(progress.fileTotalBytes)} ${outcome}\n`);
      return;
    }
    const fraction = progress.totalBytes === 0 ? 1 : progress.bytes / progress.totalBytes;
    const filled = Math.round(fraction * BAR_CELLS);
    const bar = `[${"#".repeat(filled)}${".".repeat(BAR_CELLS - filled)}]`;
    const percent = `${(fraction * 100).toFixed(1)}%`.padStart(6);
    const action = progress.state === "verifying" ? "verifying " : "";
    let line = `${bar} ${percent} ${formatBytes(progress.bytes)} / ${formatBytes(progress.totalBytes)}  ${action}${progress.file} (${position})`;
    if (output.columns !== undefined && line.length > output.columns - 1) line = line.slice(0, Math.max(0, output.columns - 1));
    if (line !== shownLine) {
      output.write(`\r\x1b[K${line}`);
      shownLine = line;
    }
    if (finished && progress.fileIndex === progress.fileCount - 1) output.write("\n");
  };
}

/** Decimal units, as the hub shows sizes. */
export function formatBytes(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  if (bytes < 1e6) return `${(bytes / 1e3).toFixed(1)} kB`;
  if (bytes < 1e9) return `${(bytes / 1e6).toFixed(1)} MB`;
  return `${(bytes / 1e9).toFixed(2)} GB`;
}
