/**
 * The Wyoming listener of a real server process: `voxedge serve --wyoming-port` under Bun and
 * VOXEDGE_WYOMING_PORT under `deno serve src/deploy.ts` answer on their port, and SIGTERM lets a streaming
 * run in progress finish, refuses new connections, and exits 0.
 */
import { expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DENO, startBunServer, startServerProcess, type ServerProcess } from "../../support/server-process.ts";
import { eventually } from "../../support/eventually.ts";
import { WyomingTestClient, type ClientEvent } from "../../support/wyoming-client.ts";

const isType = (type: string) => (event: ClientEvent) => event.type === type;

function wyomingPortOf(server: ServerProcess): Promise<number> {
  return eventually("the wyoming listening line", () => server.logLines().find((fields) => fields.message === "wyoming listening")?.port as number | undefined);
}

test("bun: --wyoming-port serves; SIGTERM lets an open streaming run finish, refuses new connections, exits 0", async () => {
  const server = await startBunServer(mkdtempSync(join(tmpdir(), "voxedge-wyoming-")), ["--wyoming-port", "0"]);
  try {
    const port = await wyomingPortOf(server);
    const client = await WyomingTestClient.connect(port);
    client.send("synthesize-start", {});
    client.send("synthesize-chunk", { text: "The first sentence is spoken before the stop. The second one" });
    await client.readUntil(isType("audio-stop"));

    server.child.kill("SIGTERM");
    await eventually("draining", () => server.output().includes("draining"));
    const refused = await WyomingTestClient.connect(port).catch(() => undefined);
    if (refused) await refused.closedByServer(5000);

    client.send("synthesize-chunk", { text: " comes after it." });
    client.send("synthesize-stop");
    const events = await client.readUntil(isType("synthesize-stopped"));
    expect(events.filter(isType("audio-start"))).toHaveLength(2);
    await client.closedByServer(10_000);
    expect(await server.exited).toBe(0);
  } finally {
    server.child.kill("SIGKILL");
  }
}, 60_000);

test("deno serve: VOXEDGE_WYOMING_PORT serves describe and synthesize", async () => {
  const speakerDir = mkdtempSync(join(tmpdir(), "voxedge-wyoming-deno-"));
  const server = await startServerProcess([DENO, "serve", "-A", "--host", "127.0.0.1", "--port", "0", "src/deploy.ts"], { VOXEDGE_ENGINE: "classic", SPEAKER_SAMPLES_DIR: speakerDir, VOXEDGE_HOST: "127.0.0.1", VOXEDGE_WYOMING_PORT: "0" });
  try {
    const client = await WyomingTestClient.connect(await wyomingPortOf(server));
    client.send("describe");
    client.send("synthesize", { text: "Hello from Deno." });
    const events = await client.readUntil(isType("audio-stop"));
    expect(events[0]!.type).toBe("info");
    expect(events.filter(isType("audio-chunk")).length).toBeGreaterThan(0);
    client.close();
  } finally {
    await server.stop();
  }
}, 60_000);
