/**
 * The two Dockerfiles, checked without Docker (none runs here): each builds on its runtime's official
 * image at the version the lock file pins, installs production dependencies as locked, runs as a non-root
 * user with the model cache and speaker folder on volumes, copies only files that exist, and starts an
 * entry the other tests run (test/deploy.test.ts, test/e2e/runtime/shutdown.test.ts). Their HEALTHCHECK
 * commands are run for real against a server and against a closed port.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ToneModel } from "../../support/tone-model.ts";
import { startTestServer, type TestServer } from "../../support/server.ts";
import { BUN, DENO, REPO_ROOT } from "../../support/server-process.ts";

interface Instruction {
  keyword: string;
  args: string;
}

/** Instructions with their continuation lines joined; comments dropped. */
function instructionsOf(file: string): Instruction[] {
  const text = readFileSync(join(REPO_ROOT, file), "utf8").replace(/\\\n\s*/g, " ");
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line.length > 0 && !line.startsWith("#"))
    .map((line) => {
      const [keyword, ...rest] = line.split(/\s+/);
      return { keyword: keyword!.toUpperCase(), args: rest.join(" ") };
    });
}

const lockedVersion = (name: string) => (JSON.parse(readFileSync(join(REPO_ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, { version: string }> }).packages[`node_modules/${name}`]!.version;

const IMAGES = [
  { file: "Dockerfile", runtime: "bun", image: `oven/bun:${lockedVersion("bun")}-debian`, user: "bun", cmd: ["bun", "src/main.ts", "serve"] },
  { file: "Dockerfile.deno", runtime: "deno", image: `denoland/deno:debian-${lockedVersion("deno")}`, user: "deno", cmd: ["deno", "serve", "-A", "--host", "0.0.0.0", "--port", "8000", "src/deploy.ts"] },
] as const;

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer(new ToneModel());
});
afterAll(() => server.stop());

for (const { file, runtime, image, user, cmd } of IMAGES) {
  describe(file, () => {
    const instructions = instructionsOf(file);
    const all = (keyword: string) => instructions.filter((instruction) => instruction.keyword === keyword).map((instruction) => instruction.args);
    const finalStage = instructions.slice(instructions.findLastIndex((instruction) => instruction.keyword === "FROM"));
    const inFinal = (keyword: string) => finalStage.filter((instruction) => instruction.keyword === keyword).map((instruction) => instruction.args);

    test("the final stage is the runtime's official image at the locked version; dependencies come from npm ci --omit=dev", () => {
      expect(finalStage[0]!.args).toBe(image);
      expect(all("RUN").some((run) => /npm ci --omit=dev\b/.test(run))).toBe(true);
      expect(inFinal("COPY")).toContain("--from=dependencies /app/node_modules ./node_modules");
    });

    test("a non-root user; the model cache and the speaker folder are volumes the configuration points at", () => {
      expect(inFinal("USER")).toEqual([user]);
      const volumes = JSON.parse(inFinal("VOLUME")[0]!) as string[];
      expect(volumes.sort()).toEqual(["/data/models", "/data/speakers"]);
      const env = inFinal("ENV").join(" ");
      expect(env).toContain("VOXEDGE_MODEL_CACHE_DIR=/data/models");
      expect(env).toContain("SPEAKER_SAMPLES_DIR=/data/speakers");
      expect(inFinal("RUN").some((run) => run.includes(`chown -R ${user}:${user} /data`))).toBe(true);
    });

    test("every file it copies exists; it starts a tested entry on SIGTERM-aware terms", () => {
      for (const copy of all("COPY").filter((args) => !args.startsWith("--from"))) {
        const sources = copy.split(/\s+/).slice(0, -1);
        for (const source of sources) expect({ source, exists: existsSync(join(REPO_ROOT, source)) }).toEqual({ source, exists: true });
      }
      expect(JSON.parse(inFinal("CMD")[0]!)).toEqual([...cmd]);
      expect(inFinal("STOPSIGNAL")).toEqual(["SIGTERM"]);
      expect(existsSync(join(REPO_ROOT, cmd.find((arg) => arg.endsWith(".ts"))!))).toBe(true);
    });

    test("its HEALTHCHECK command exits 0 against a live server and 1 against a closed port", async () => {
      const healthcheck = inFinal("HEALTHCHECK")[0]!;
      const command = JSON.parse(healthcheck.slice(healthcheck.indexOf("CMD ") + 4)) as string[];
      expect(command[0]).toBe(runtime);
      const port = new URL(server.url).port;
      // Spawned without blocking: the server it probes runs in this process.
      const run = (targetPort: string) => {
        // The Bun image's check reads VOXEDGE_PORT; the Deno one names deno serve's port 8000.
        const args = command.slice(1).map((arg) => arg.replace("127.0.0.1:8000", `127.0.0.1:${targetPort}`));
        return Bun.spawn([runtime === "bun" ? BUN : DENO, ...args], { env: { ...process.env, VOXEDGE_PORT: targetPort }, stdout: "ignore", stderr: "ignore" }).exited;
      };
      expect(await run(port)).toBe(0);
      expect(await run("1")).toBe(1);
    });
  });
}
