import { expect, test } from "bun:test";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeWithFfmpeg } from "../support/ffmpeg.ts";
import { isJson, RecordingSocket } from "../support/ws-client.ts";
import { REPO_ROOT } from "../support/repo.ts";

const ROOT = REPO_ROOT;
const BUN = join(ROOT, "node_modules", ".bin", "bun");
const DENO = join(ROOT, "node_modules", ".bin", "deno");

test("--help prints every option with its environment variable", () => {
  const result = spawnSync(BUN, ["run", "voxedge", "--help"], { cwd: ROOT });
  expect(result.status).toBe(0);
  const out = result.stdout.toString();
  expect(out).toContain("say");
  expect(out).toContain("--port");
  expect(out).toContain("VOXEDGE_PORT");
});

test("bad flags exit 2 with a message", () => {
  const result = spawnSync(BUN, ["run", "voxedge", "serve", "--port", "nope"], { cwd: ROOT });
  expect(result.status).toBe(2);
  expect(result.stderr.toString()).toContain("--port");
});

test("a speaker folder that cannot be created stops the server at start with a message naming it", () => {
  const scratch = mkdtempSync(join(tmpdir(), "voxedge-speaker-dir-"));
  writeFileSync(join(scratch, "file"), "");
  const speakerDir = join(scratch, "file", "speakers");
  const result = spawnSync(BUN, ["run", "voxedge", "serve", "--port", "0", "--host", "127.0.0.1", "--speaker-dir", speakerDir], { cwd: ROOT, timeout: 60_000 });
  expect(result.status).toBe(1);
  const stderr = result.stderr.toString();
  expect(stderr).toContain(`voice store folder ${speakerDir} cannot be used`);
  expect(stderr).toContain("ENOTDIR");
  expect(stderr).not.toContain("store.ts:");
});

test("say takes any int64 seed as written, and refuses one past the range", () => {
  const out = join(mkdtempSync(join(tmpdir(), "voxedge-say-")), "seeded.wav");
  const largest = spawnSync(BUN, ["run", "voxedge", "say", "Seeded.", "-o", out, "--seed", "9223372036854775807"], { cwd: ROOT });
  expect(largest.status).toBe(0);
  const past = spawnSync(BUN, ["run", "voxedge", "say", "Seeded.", "-o", out, "--seed", "9223372036854775808"], { cwd: ROOT });
  expect(past.status).not.toBe(0);
  expect(past.stderr.toString()).toContain("seed must be an integer from -2^63 to 2^63 - 1");
});

test("say writes an audio file in the format its name asks for", () => {
  const out = join(mkdtempSync(join(tmpdir(), "voxedge-say-")), "hello.mp3");
  const result = spawnSync(BUN, ["run", "voxedge", "say", "Hello from the command line.", "-o", out], { cwd: ROOT });
  expect(result.status).toBe(0);
  const decoded = decodeWithFfmpeg(readFileSync(out));
  expect(decoded.codec).toBe("mp3");
  expect(decoded.samples.length / decoded.sampleRateHz).toBeGreaterThan(0.8);
});

/** Starts `command`, waits for /health to be 200, makes one speech request (and runs `alsoCheck`), stops it. */
async function serveAndSpeak(command: string, args: string[], port: number, alsoCheck?: (base: string) => Promise<void>): Promise<{ status: number; bytes: Uint8Array; log: string }> {
  // Its rewritten graphs go to a scratch folder: the fixture's copies are new files each run, which would pile
  // up in the user's graph cache.
  const graphCacheDir = mkdtempSync(join(tmpdir(), "voxedge-graph-cache-"));
  const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, VOXEDGE_LOG_LEVEL: "info", VOXEDGE_GRAPH_CACHE_DIR: graphCacheDir } });
  let log = "";
  child.stderr.on("data", (chunk) => (log += chunk));
  child.stdout.on("data", (chunk) => (log += chunk));
  try {
    const base = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`server exited early: ${log}`);
      const health = await fetch(`${base}/health`).catch(() => undefined);
      if (health?.status === 200) break;
      if (Date.now() > deadline) throw new Error(`server did not become healthy: ${log}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const response = await fetch(`${base}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "Served from a child process." }) });
    await alsoCheck?.(base);
    return { status: response.status, bytes: new Uint8Array(await response.arrayBuffer()), log };
  } finally {
    child.kill("SIGTERM");
    await new Promise((resolve) => child.once("exit", resolve));
  }
}

test("bun run voxedge serve --port --host serves speech and logs the classic fallback", async () => {
  const port = 18000 + Math.floor(Math.random() * 1000);
  const { status, bytes, log } = await serveAndSpeak(BUN, ["run", "voxedge", "serve", "--port", String(port), "--host", "127.0.0.1"], port);
  expect(status).toBe(200);
  expect(new TextDecoder().decode(bytes.slice(0, 4))).toBe("RIFF");
  expect(log).toContain("offline classic fallback");
  expect(log).toContain('"port":' + port);
}, 90_000);

test("deno task serve serves speech and the WebSocket route (Deno smoke test)", async () => {
  const port = 19000 + Math.floor(Math.random() * 1000);
  const speakOverWebSocket = async (base: string) => {
    const socket = new RecordingSocket(`${base.replace("http", "ws")}/v1/audio/speech/stream`);
    await socket.opened;
    socket.send({ type: "session.config", stream_audio: true });
    socket.send({ type: "input.text", text: "Deno streams this sentence. " });
    socket.send({ type: "input.done" });
    await socket.waitFor((received) => received.some(isJson("session.done")));
    expect(socket.received.filter((entry) => entry.kind === "binary").length).toBeGreaterThan(1);
    socket.close();
  };
  const { status, bytes } = await serveAndSpeak(DENO, ["task", "serve", "--port", String(port), "--host", "127.0.0.1"], port, speakOverWebSocket);
  expect(status).toBe(200);
  expect(new TextDecoder().decode(bytes.slice(0, 4))).toBe("RIFF");
  expect(decodeWithFfmpeg(bytes).samples.length).toBeGreaterThan(10000);
}, 120_000);

const FIXTURES = join(ROOT, "..", "shared", "fixtures");

test("conformance is green on both golden fixtures and prints one JSON report", () => {
  for (const fixture of ["pocket-tiny", "mimi-full"]) {
    const result = spawnSync(BUN, ["src/main.ts", "conformance", join(FIXTURES, fixture)], { cwd: ROOT, maxBuffer: 1 << 24 });
    expect(result.status).toBe(0);
    const report = JSON.parse(result.stdout.toString());
    expect(report).toMatchObject({ fixture, decoder: "onnx", pass: true });
    expect(report.cases.length).toBeGreaterThan(0);
    expect(report.cases.every((entry: { pass: boolean }) => entry.pass)).toBe(true);
  }
  const stages = new Set(JSON.parse(spawnSync(BUN, ["src/main.ts", "conformance", join(FIXTURES, "pocket-tiny")], { cwd: ROOT, maxBuffer: 1 << 24 }).stdout.toString()).cases.map((entry: { stage: string }) => entry.stage));
  expect([...stages].sort()).toEqual(["decoder", "encoder", "end_to_end", "flow_head", "flow_lm", "text_conditioner", "tokenizer"]);
}, 180_000);

test("conformance --batch N: every golden stream passes inside model calls of N streams, its numbers the same for every N", () => {
  const conditioningOf = (report: { cases: Array<{ case: string; relRms: number | null; detail?: string }> }) =>
    report.cases.filter((entry) => entry.case.startsWith("flow_lm.") && entry.case.endsWith(".conditioning")).map((entry) => [entry.relRms, entry.detail]);
  const runs: Record<string, unknown[]> = {};
  for (const [fixture, batch, provider] of [["pocket-tiny", 1, "onnxruntime-node"], ["pocket-tiny", 8, "onnxruntime-node"], ["pocket-tiny", 3, "onnxruntime-web"], ["mimi-full", 8, "auto"]] as const) {
    const result = spawnSync(BUN, ["src/main.ts", "conformance", join(FIXTURES, fixture), "--batch", String(batch), "--provider", provider], { cwd: ROOT, maxBuffer: 1 << 24 });
    const report = JSON.parse(result.stdout.toString());
    const failed = report.cases.filter((entry: { pass: boolean }) => !entry.pass).map((entry: { case: string; detail?: string }) => `${entry.case}: ${entry.detail}`);
    expect({ fixture, batch, provider, failed }).toEqual({ fixture, batch, provider, failed: [] });
    expect(result.status).toBe(0);
    expect(report).toMatchObject({ fixture, batch, pass: true });
    if (fixture === "pocket-tiny" && provider === "onnxruntime-node") runs[batch] = conditioningOf(report).map(([relRms]) => relRms);
    if (fixture === "pocket-tiny") expect(conditioningOf(report).map(([, detail]) => detail)).toEqual(conditioningOf(report).map(() => `in calls of ${batch} streams`));
    if (fixture === "mimi-full") expect(report.cases.some((entry: { detail?: string }) => entry.detail?.includes(`between the decodes of ${batch - 1} other streams`))).toBe(true);
  }
  // A golden stream's rows do not depend on its companions: the same error against golden at every N.
  expect(runs[1]!.length).toBeGreaterThan(0);
  expect(runs[8]).toEqual(runs[1]!);
  for (const bad of ["0", "2.5", "many"]) {
    const refused = spawnSync(BUN, ["src/main.ts", "conformance", join(FIXTURES, "pocket-tiny"), "--batch", bad], { cwd: ROOT });
    expect(refused.status).toBe(2);
    expect(refused.stderr.toString()).toContain("--batch must be an integer");
  }
}, 300_000);

test("serve --model <bundle> serves Pocket TTS and says so", async () => {
  const { fixtureBundle } = await import("../models/pocket/bundle-fixture.ts");
  const port = 21000 + Math.floor(Math.random() * 1000);
  const { status, bytes, log } = await serveAndSpeak(BUN, ["src/main.ts", "serve", "--port", String(port), "--host", "127.0.0.1", "--model", fixtureBundle()], port, async (base) => {
    const models = (await (await fetch(`${base}/v1/models`)).json()) as any;
    expect(models.data[0]).toMatchObject({ id: "pocket-tts", engine: "neural" });
  });
  expect(status).toBe(200);
  expect(new TextDecoder().decode(bytes.slice(0, 4))).toBe("RIFF");
  expect(log).toContain("model ready: neural model");
}, 120_000);

test("deno task serve --model <bundle> serves Pocket TTS, decoding in worker threads (Deno)", async () => {
  const { fixtureBundle } = await import("../models/pocket/bundle-fixture.ts");
  const port = 22000 + Math.floor(Math.random() * 1000);
  const { status, bytes } = await serveAndSpeak(DENO, ["task", "serve", "--port", String(port), "--host", "127.0.0.1", "--model", fixtureBundle(), "--decoder-workers", "2"], port, async (base) => {
    const models = (await (await fetch(`${base}/v1/models`)).json()) as { data: { id: string; description: string }[] };
    expect(models.data[0]!.id).toBe("pocket-tts");
    expect(models.data[0]!.description).toContain("FlowLM steps batched across streams");
    expect(models.data[0]!.description).toContain("Mimi decoder in 2 worker threads");
  });
  expect(status).toBe(200);
  expect(decodeWithFfmpeg(bytes).samples.length).toBeGreaterThan(1920);
}, 120_000);
