import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { configHelp, ConfigError, defaultDecoderWorkers, describeConfig, isLoopbackHost, loadConfig, parseCommandLine, wyomingExposure } from "../src/config.ts";
import { containerMemoryLimitBytes } from "../src/system/memory-limit.ts";

test("flags override environment, environment overrides defaults", () => {
  expect(loadConfig({}, {}).port).toBe(8000);
  expect(loadConfig({}, { VOXEDGE_PORT: "9000" }).port).toBe(9000);
  expect(loadConfig({ port: "9100" }, { VOXEDGE_PORT: "9000" }).port).toBe(9100);
  expect(loadConfig({}, { SPEAKER_MAX_UPLOADED: "5" }).maxUploadedVoices).toBe(5);
  expect(loadConfig({}, { VOXEDGE_ALLOWED_MEDIA_DOMAINS: "a.example, b.example" }).allowedMediaDomains).toEqual(["a.example", "b.example"]);
});

test("bad values name the option", () => {
  expect(() => loadConfig({ port: "http" }, {})).toThrow(ConfigError);
  expect(() => loadConfig({ port: "http" }, {})).toThrow("--port");
  expect(() => loadConfig({}, { VOXEDGE_DEVICE: "tpu" })).toThrow("VOXEDGE_DEVICE");
});

test("--voice-aliases: any name or id to a voice, case-insensitive; a malformed table names the option and the entry", () => {
  expect(loadConfig({}, {}).voiceAliases).toEqual({});
  expect(loadConfig({}, { VOXEDGE_VOICE_ALIASES: " Alloy = RMS ,nova=slt," }).voiceAliases).toEqual({ alloy: "rms", nova: "slt" });
  expect(() => loadConfig({ "voice-aliases": "alloy" }, {})).toThrow("--voice-aliases: 'alloy' is not alias=voice");
  expect(() => loadConfig({ "voice-aliases": "alloy=" }, {})).toThrow("'alloy=' is not alias=voice");
  expect(() => loadConfig({ "voice-aliases": "alloy=a=b" }, {})).toThrow("is not alias=voice");
  expect(loadConfig({}, { VOXEDGE_VOICE_ALIASES: "Rachel=rms,21m00Tcm4TlvDq8ikWAM=slt,Narrator=slt,__proto__=rms" }).voiceAliases).toEqual({ rachel: "rms", "21m00tcm4tlvdq8ikwam": "slt", narrator: "slt", ["__proto__"]: "rms" });
  expect(() => loadConfig({}, { VOXEDGE_VOICE_ALIASES: "default=rms" })).toThrow("VOXEDGE_VOICE_ALIASES: 'default' is the model's default voice");
  expect(() => loadConfig({ "voice-aliases": "alloy=rms,ALLOY=slt" }, {})).toThrow("'alloy' is mapped twice");
});

test("secrets are masked in the logged config and help lists every option", () => {
  const shown = describeConfig(loadConfig({ "api-key": "hunter2" }, {}));
  expect(shown.apiKeys).toEqual(["***"]);
  expect(JSON.stringify(shown)).not.toContain("hunter2");
  const help = configHelp();
  for (const flag of ["--host", "--port", "--engine", "--device", "--speaker-dir", "--allowed-local-media-path", "--allowed-media-domains", "--log-level", "SPEAKER_SAMPLES_DIR"]) {
    expect(help).toContain(flag);
  }
});

test("API keys: --api-key repeated, a comma list in VOXEDGE_API_KEY, and --api-key-file (one per line, # comments), joined", () => {
  const dir = mkdtempSync(join(tmpdir(), "voxedge-config-"));
  const file = join(dir, "keys");
  writeFileSync(file, "# ops team\nsk-file-1\n\n  sk-file-2 \n# sk-commented-out\n");
  const { values } = parseCommandLine(["serve", "--api-key", "sk-a", "--api-key", "sk-b", "--api-key-file", file]);
  expect(loadConfig(values, {}).apiKeys).toEqual(["sk-a", "sk-b", "sk-file-1", "sk-file-2"]);
  expect(loadConfig({}, { VOXEDGE_API_KEY: "sk-x, sk-y", VOXEDGE_API_KEY_FILE: file }).apiKeys).toEqual(["sk-x", "sk-y", "sk-file-1", "sk-file-2"]);
  // Flags win over the environment, as for every option.
  expect(loadConfig(parseCommandLine(["--api-key", "sk-a"]).values, { VOXEDGE_API_KEY: "sk-x" }).apiKeys).toEqual(["sk-a"]);
  expect(loadConfig({}, {}).apiKeys).toEqual([]);
  // A key that did not arrive (an empty variable) stops the start rather than serving without auth.
  expect(() => loadConfig({}, { VOXEDGE_API_KEY: "" })).toThrow("VOXEDGE_API_KEY: holds no key");
  expect(() => loadConfig({ "api-key": " , " }, {})).toThrow("--api-key: holds no key");
  expect(() => loadConfig({ "api-key-file": join(dir, "missing") }, {})).toThrow("--api-key-file: cannot read");
  writeFileSync(file, "# nothing but comments\n");
  expect(() => loadConfig({}, { VOXEDGE_API_KEY_FILE: file })).toThrow("VOXEDGE_API_KEY_FILE");
});

test("Wyoming: off by default; --wyoming-port or its variable turns it on; --wyoming-zeroconf needs the port", () => {
  const parse = (argv: string[], env: Record<string, string> = {}) => loadConfig(parseCommandLine(argv).values, env);
  expect(parse([])).toMatchObject({ wyomingPort: undefined, wyomingZeroconf: false });
  expect(parse(["--wyoming-port", "10200", "--wyoming-zeroconf"])).toMatchObject({ wyomingPort: 10200, wyomingZeroconf: true });
  expect(parse([], { VOXEDGE_WYOMING_PORT: "10300", VOXEDGE_WYOMING_ZEROCONF: "true" })).toMatchObject({ wyomingPort: 10300, wyomingZeroconf: true });
  expect(() => parse(["--wyoming-port", "70000"])).toThrow("--wyoming-port");
  expect(() => parse(["--wyoming-zeroconf"])).toThrow(ConfigError);
  expect(() => parse(["--wyoming-zeroconf"])).toThrow("--wyoming-port");
});

test("Wyoming's address and uploads: as --host without API keys; with keys loopback and no uploads unless an option says otherwise", () => {
  const exposureOf = (argv: string[], env: Record<string, string> = {}) => wyomingExposure(loadConfig(parseCommandLine(["--wyoming-port", "10200", ...argv]).values, env));
  // No keys: the HTTP API is open too, so nothing changes.
  expect(exposureOf([])).toEqual({ host: "0.0.0.0", uploadedVoices: true, unauthenticatedBeyondLoopback: false });
  expect(exposureOf(["--host", "192.168.1.5"])).toEqual({ host: "192.168.1.5", uploadedVoices: true, unauthenticatedBeyondLoopback: false });
  // Keys: Wyoming would bypass them, so loopback, whatever --host says, and uploads off.
  expect(exposureOf(["--api-key", "k1"])).toEqual({ host: "127.0.0.1", uploadedVoices: false, unauthenticatedBeyondLoopback: false });
  expect(exposureOf(["--host", "0.0.0.0"], { VOXEDGE_API_KEY: "k1" })).toEqual({ host: "127.0.0.1", uploadedVoices: false, unauthenticatedBeyondLoopback: false });
  // An explicit address beyond loopback is honoured and flagged for the start-up warning; uploads stay off.
  expect(exposureOf(["--api-key", "k1", "--wyoming-host", "0.0.0.0"])).toEqual({ host: "0.0.0.0", uploadedVoices: false, unauthenticatedBeyondLoopback: true });
  expect(exposureOf(["--api-key", "k1"], { VOXEDGE_WYOMING_HOST: "::", VOXEDGE_WYOMING_UPLOADED_VOICES: "true" })).toEqual({ host: "::", uploadedVoices: true, unauthenticatedBeyondLoopback: true });
  expect(exposureOf(["--api-key", "k1", "--wyoming-host", "::1", "--wyoming-uploaded-voices"])).toEqual({ host: "::1", uploadedVoices: true, unauthenticatedBeyondLoopback: false });
  // Uploads can be kept off an open server too.
  expect(exposureOf(["--wyoming-uploaded-voices=false"]).uploadedVoices).toBe(false);
  for (const host of ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LOCALHOST", "::ffff:127.0.0.1"]) expect(isLoopbackHost(host)).toBe(true);
  for (const host of ["0.0.0.0", "::", "192.168.1.5", "10.0.0.1", "128.0.0.1", "127.0.0.1.example.com", "example.com", "::ffff:10.0.0.1"]) expect(isLoopbackHost(host)).toBe(false);
  // Options of a listener that is off are a mistake worth stopping for.
  expect(() => loadConfig(parseCommandLine(["--wyoming-host", "127.0.0.1"]).values, {})).toThrow("--wyoming-port");
  expect(() => loadConfig(parseCommandLine(["--wyoming-uploaded-voices"]).values, {})).toThrow("--wyoming-port");
});

test("switches: --public-listings alone is true, followed by false it is off; --cors false still reads its value", () => {
  const parse = (argv: string[]) => loadConfig(parseCommandLine(argv).values, {});
  expect(parse([]).publicListings).toBe(false);
  expect(parse(["--public-listings"]).publicListings).toBe(true);
  expect(parse(["--public-listings", "--port", "9000"])).toMatchObject({ publicListings: true, port: 9000 });
  expect(parse(["--public-listings", "false"]).publicListings).toBe(false);
  expect(parse(["--public-listings=false"]).publicListings).toBe(false);
  expect(parse(["--cors", "false"]).cors).toBe(false);
  expect(parse(["--protect-health", "--protect-metrics"])).toMatchObject({ protectHealth: true, protectMetrics: true });
  expect(loadConfig({}, { VOXEDGE_PUBLIC_LISTINGS: "1" }).publicListings).toBe(true);
  expect(parse(["--shutdown-grace", "7.5"]).shutdownGraceSeconds).toBe(7.5);
  expect(loadConfig({}, {}).shutdownGraceSeconds).toBe(25);
  expect(() => parse(["--shutdown-grace", "-1"])).toThrow("--shutdown-grace");
  const help = configHelp();
  for (const flag of ["--api-key", "--api-key-file", "--public-listings", "--protect-health", "--protect-metrics", "--shutdown-grace", "VOXEDGE_SHUTDOWN_GRACE"]) expect(help).toContain(flag);
});

describe("--memory-budget and the container's limit", () => {
  test("sizes with units, none, and a clear error", () => {
    expect(loadConfig({ "memory-budget": "900MiB" }, {}).memoryBudget).toBe(900 * 1024 ** 2);
    expect(loadConfig({}, { VOXEDGE_MEMORY_BUDGET: "1GiB" }).memoryBudget).toBe(1024 ** 3);
    expect(loadConfig({ "memory-budget": "none" }, {}).memoryBudget).toBeNull();
    expect(() => loadConfig({ "memory-budget": "lots" }, {})).toThrow("--memory-budget");
  });

  test("the cgroup limit is read from v2 or v1, and 'max' or v1's huge value is no limit", () => {
    const files = (entries: Record<string, string>) => (path: string) => {
      if (!(path in entries)) throw new Error("ENOENT");
      return entries[path]!;
    };
    expect(containerMemoryLimitBytes(files({ "/sys/fs/cgroup/memory.max": "1073741824\n" }))).toBe(1024 ** 3);
    expect(containerMemoryLimitBytes(files({ "/sys/fs/cgroup/memory.max": "max\n" }))).toBeUndefined();
    expect(containerMemoryLimitBytes(files({ "/sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912" }))).toBe(512 * 1024 ** 2);
    expect(containerMemoryLimitBytes(files({ "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712" }))).toBeUndefined();
    expect(containerMemoryLimitBytes(files({}))).toBeUndefined();
  });

  test("one decoder worker by default in a container of 2 GiB or less", () => {
    expect(defaultDecoderWorkers(1024 ** 3)).toBe(1);
    expect(defaultDecoderWorkers(undefined)).toBeGreaterThanOrEqual(1);
  });
});

test("the limit of this process's own cgroup wins over the hierarchy's root (v1 and v2 without a cgroup namespace)", () => {
  const files: Record<string, string> = {
    "/proc/self/cgroup": "9:name=systemd:/\n4:memory:/bench-1\n0::/\n",
    "/sys/fs/cgroup/memory/bench-1/memory.limit_in_bytes": "1073741824",
    "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712",
  };
  const read = (path: string) => {
    if (!(path in files)) throw new Error("ENOENT");
    return files[path]!;
  };
  expect(containerMemoryLimitBytes(read)).toBe(1024 ** 3);
  files["/proc/self/cgroup"] = "0::/ctr\n";
  files["/sys/fs/cgroup/ctr/memory.max"] = "536870912\n";
  expect(containerMemoryLimitBytes(read)).toBe(512 * 1024 ** 2);
});
