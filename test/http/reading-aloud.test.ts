/**
 * What the model reads of an LLM's answer on each route: markdown read as a person reads it (on the speech
 * route, and on the WebSocket route with its marks cut across input.text messages), the server's --lexicon
 * applied, and --read-markdown false speaking the text as sent.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ToneModel } from "../support/tone-model.ts";
import { startTestServer, type TestServer } from "../support/server.ts";
import { isJson, RecordingSocket } from "../support/ws-client.ts";

const ANSWER = "## Step 2: Install\n\n**Important:** back up your SQL data first.\n\n- Run `npm install`\n- See [the docs](https://example.com/docs)\n\n```sh\nrm -rf build\n```\nDone! 🎉";

const post = (url: string, body: unknown) => fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

describe("with --lexicon and markdown read (the default)", () => {
  let server: TestServer;
  const model = new ToneModel();
  beforeAll(async () => {
    const lexicon = join(mkdtempSync(join(tmpdir(), "voxedge-lexicon-")), "words.tsv");
    writeFileSync(lexicon, "SQL\tsequel\nnpm\tN P M\n");
    server = await startTestServer(model, { flags: { lexicon } });
  });
  afterAll(() => server.stop());

  test("the speech route: headings and items as sentences, marks, link targets and code gone, the lexicon's aliases read", async () => {
    const response = await post(`${server.url}/v1/audio/speech`, { input: ANSWER, response_format: "pcm" });
    expect(response.status).toBe(200);
    await response.arrayBuffer();
    const read = model.jobs.at(-1)!.text.replace(/\s+/g, " ");
    expect(read).toBe("Step two: Install. Important: back up your sequel data first. Run N P M install. See the docs. Code omitted. Done!");
  });

  test("the WebSocket route, the answer in 3-character pieces: the sentences spoken carry no mark", async () => {
    const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/v1/audio/speech/stream`);
    await socket.opened;
    socket.send({ type: "session.config", voice: "low", response_format: "pcm" });
    const before = model.jobs.length;
    for (let at = 0; at < ANSWER.length; at += 3) socket.send({ type: "input.text", text: ANSWER.slice(at, at + 3) });
    socket.send({ type: "input.done" });
    await socket.waitFor((received) => received.some(isJson("session.done")));
    const spoken = model.jobs.slice(before).map((job) => job.text).join(" ").replace(/\s+/g, " ");
    expect(spoken).not.toMatch(/[*`#\[\]]|https|rm -rf|🎉/u);
    expect(spoken).toContain("Step two: Install.");
    expect(spoken).toContain("Important: back up your sequel data first.");
    expect(spoken).toContain("Run N P M install.");
    expect(spoken).toContain("Code omitted.");
    socket.close();
  });
});

describe("with --read-markdown false", () => {
  let server: TestServer;
  const model = new ToneModel();
  beforeAll(async () => {
    server = await startTestServer(model, { flags: { "read-markdown": "false" } });
  });
  afterAll(() => server.stop());

  test("the marks reach the model as sent", async () => {
    const response = await post(`${server.url}/v1/audio/speech`, { input: "**Bold** and `code`", response_format: "pcm", apply_text_normalization: "off" });
    expect(response.status).toBe(200);
    await response.arrayBuffer();
    expect(model.jobs.at(-1)!.text).toBe("**Bold** and `code`");
  });
});
