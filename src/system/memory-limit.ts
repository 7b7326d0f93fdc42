/**
 * The memory this process may use, as its container says: the cgroup's limit (v2 `memory.max`, or v1
 * `memory.limit_in_bytes`), undefined when there is none (`max`, or v1's "no limit", a value near 2^63).
 * Containers (Docker `--memory`, Kubernetes limits, Deno Deploy-style hosts) set it; the kernel kills a process
 * that passes it, so the server plans within it.
 */
import { readFileSync } from "node:fs";

/** v1 reports "no limit" as the largest page-aligned value; anything this large is no limit at all. */
const NO_LIMIT_ABOVE_BYTES = 2 ** 60;

export function containerMemoryLimitBytes(readText: (path: string) => string = (path) => readFileSync(path, "utf-8")): number | undefined {
  // This process's own cgroup first (/proc/self/cgroup: "0::/path" on v2, "N:memory:/path" on v1), then the
  // root of the hierarchy, which is the container's own where the runtime mounts a cgroup namespace.
  let ownV2 = "";
  let ownV1 = "";
  try {
    for (const line of readText("/proc/self/cgroup").split("\n")) {
      const [, controllers, path] = line.split(":");
      if (controllers === "" && path) ownV2 = path;
      if (controllers?.split(",").includes("memory") && path) ownV1 = path;
    }
  } catch {
    // No /proc (not Linux): only the root files below, which will be missing too.
  }
  const candidates = [
    ...(ownV2 && ownV2 !== "/" ? [`/sys/fs/cgroup${ownV2}/memory.max`] : []),
    "/sys/fs/cgroup/memory.max",
    ...(ownV1 && ownV1 !== "/" ? [`/sys/fs/cgroup/memory${ownV1}/memory.limit_in_bytes`] : []),
    "/sys/fs/cgroup/memory/memory.limit_in_bytes",
  ];
  for (const path of candidates) {
    let text: string;
    try {
      text = readText(path).trim();
    } catch {
      continue;
    }
    if (text === "max") return undefined;
    const bytes = Number(text);
    if (Number.isFinite(bytes) && bytes > 0) return bytes < NO_LIMIT_ABOVE_BYTES ? bytes : undefined;
  }
  return undefined;
}

/** Resident memory of this process now (Linux /proc; elsewhere the runtime's own figure). */
export function residentBytes(): number {
  try {
    const match = readFileSync("/proc/self/statm", "utf-8").split(" ");
    return Number(match[1]) * 4096;
  } catch {
    return process.memoryUsage().rss;
  }
}
