import { describe, expect, test } from "bun:test";
import { createProgressRenderer, formatBytes } from "../../src/cli/progress.ts";
import type { PullProgress } from "../../src/weights/download.ts";

describe("createProgressRenderer", () => {
  const event = (overrides: Partial<PullProgress>): PullProgress => ({
    bundle: "b",
    file: "a.onnx",
    fileIndex: 0,
    fileCount: 2,
    state: "downloading",
    fileBytes: 0,
    fileTotalBytes: 1_000_000,
    bytes: 0,
    totalBytes: 2_000_000,
    ...overrides,
  });

  test("on a TTY redraws one line and ends it after the last file", () => {
    const writes: string[] = [];
    const render = createProgressRenderer({ isTTY: true, columns: 200, write: (text) => writes.push(text) });
    render(event({ fileBytes: 500_000, bytes: 500_000 }));
    render(event({ fileBytes: 500_000, bytes: 500_000 }));
    render(event({ state: "verified", fileBytes: 1_000_000, bytes: 1_000_000 }));
    render(event({ file: "b.onnx", fileIndex: 1, state: "verified", fileBytes: 1_000_000, bytes: 2_000_000 }));
    expect(writes).toHaveLength(4);
    expect(writes.slice(0, 3).every((text) => text.startsWith("\r") && !text.includes("\n"))).toBe(true);
    expect(writes[0]).toContain(" 25.0% 500.0 kB / 2.0 MB  a.onnx (1/2)");
    expect(writes.at(-1)).toBe("\n");
  });

  test("elsewhere writes one line per finished file", () => {
    const writes: string[] = [];
    const render = createProgressRenderer({ isTTY: false, write: (text) => writes.push(text) });
    render(event({ fileBytes: 500_000, bytes: 500_000 }));
    render(event({ state: "verified", fileBytes: 1_000_000, bytes: 1_000_000 }));
    render(event({ file: "b.onnx", fileIndex: 1, state: "cached", fileBytes: 1_000_000, bytes: 2_000_000 }));
    expect(writes).toEqual(["[1/2] a.onnx 1.0 MB downloaded, verified\n", "[2/2] b.onnx 1.0 MB already present, verified\n"]);
  });

  test("formats sizes in decimal units", () => {
    expect([formatBytes(999), formatBytes(24_381), formatBytes(76_341_079), formatBytes(1_200_000_000)]).toEqual(["999 B", "24.4 kB", "76.3 MB", "1.20 GB"]);
  });
});
