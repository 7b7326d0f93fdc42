/**
 * Long-form text: --max-input-chars may be raised to 100 000. A long input streams as the model speaks it,
 * sentence by sentence, and a client that leaves stops it; the cap is one setting, applied alike to a
 * request, a batch item and the WebSocket's unsegmented text.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ConfigError, loadConfig } from "../../../src/config.ts";
import { ClassicModel, createClassicModel } from "../../../src/models/classic/model.ts";
import { GeneratorRunner } from "../../../src/models/generator-runner.ts";
import type { AudioChunk, SpeechModel, SynthesisJob } from "../../../src/models/contract.ts";
import { startTestServer, type TestServer } from "../../support/server.ts";
import { ToneModel } from "../../support/tone-model.ts";
import { RecordingSocket } from "../../support/ws-client.ts";

const SENTENCES = [
  "The quick brown fox jumps over the lazy dog.",
  "Please call Stella and ask her to bring these things with her from the store.",
  "It was a bright cold day in April, and the clocks were striking thirteen.",
];
const CYCLE = `${SENTENCES.join(" ")} `;

function longText(chars: number): string {
  return CYCLE.repeat(Math.ceil(chars / CYCLE.length)).slice(0, chars).trim();
}

/** Wraps a model and counts the frames it produced; `ended` settles when a generation stops for any reason. */
class CountingModel implements SpeechModel {
  framesProduced = 0;
  readonly runner = new GeneratorRunner((job) => this.steps(job), { stepsPerTick: 2 });
  ended: Promise<{ aborted: boolean }> = new Promise(() => {});
  readonly capabilities: SpeechModel["capabilities"];
  readonly paramsSchema: SpeechModel["paramsSchema"];

  constructor(private readonly inner: ClassicModel) {
    this.capabilities = inner.capabilities;
    this.paramsSchema = inner.paramsSchema;
  }

  countInputTokens(text: string): number {
    return this.inner.countInputTokens(text);
  }

  async *steps(job: SynthesisJob): AsyncGenerator<AudioChunk[], void, undefined> {
    let settle!: (outcome: { aborted: boolean }) => void;
    this.ended = new Promise((resolve) => (settle = resolve));
    try {
      for await (const frames of this.inner.sentenceSteps(job)) {
        for (const chunk of frames) this.framesProduced += chunk.frameCount;
        yield frames;
      }
    } finally {
      settle({ aborted: job.signal.aborted });
    }
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/** Fails the test with `what` instead of hanging when `promise` never settles. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms))]);
}

test("--max-input-chars takes up to 100000; the default stays OpenAI's 4096", () => {
  expect(loadConfig({}, {}).maxInputChars).toBe(4096);
  expect(loadConfig({ "max-input-chars": "100000" }, {}).maxInputChars).toBe(100_000);
  expect(() => loadConfig({ "max-input-chars": "100001" }, {})).toThrow(ConfigError);
  // A WebSocket session must be able to queue one full input.
  expect(() => loadConfig({ "max-input-chars": "50000", "ws-max-queued-chars": "40000" }, {})).toThrow("--ws-max-queued-chars: 40000 is less than --max-input-chars (50000)");
});

describe("a 60 000-character input on the offline classic engine, --max-input-chars 100000", () => {
  let model: CountingModel;
  let server: TestServer;
  beforeAll(async () => {
    model = new CountingModel(await createClassicModel());
    server = await startTestServer(model, { flags: { "max-input-chars": "100000" } });
  });
  afterAll(async () => {
    await server.stop();
    await model.close();
  });

  const speak = (body: Record<string, unknown>, signal?: AbortSignal) =>
    fetch(`${server.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal });

  test("raw stream: the first audio arrives while most of the text is still unspoken, and leaving stops the generation", async () => {
    // What the whole text would make, from one cycle of its sentences spoken in full.
    const cycle = await speak({ input: CYCLE.trim(), response_format: "pcm" });
    expect(cycle.status).toBe(200);
    await cycle.arrayBuffer();
    const wholeTextFrames = Number(cycle.headers.get("x-output-tokens")) * Math.floor(60_000 / CYCLE.length);

    const input = longText(60_000);
    expect(input.length).toBeGreaterThan(59_900);
    const client = new AbortController();
    const framesBefore = model.framesProduced;
    const response = await speak({ input, stream_format: "audio", response_format: "pcm" }, client.signal);
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    expect(first.value!.byteLength).toBeGreaterThan(0);
    const framesAtFirstAudio = model.framesProduced - framesBefore;
    expect(framesAtFirstAudio).toBeLessThan(wholeTextFrames / 20);

    client.abort();
    await reader.cancel().catch(() => {});
    const outcome = await within(model.ended, 30_000, "the generation stopping after the client left");
    expect(outcome.aborted).toBe(true);
    // The stream only ran ahead of the client by what socket buffers hold: nowhere near the whole text.
    expect(model.framesProduced - framesBefore).toBeLessThan(wholeTextFrames / 20);
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  });

  test("WebSocket, split_granularity none: a 10 000-character unsegmented text is accepted and streamed; closing stops it", async () => {
    const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/v1/audio/speech/stream`);
    await socket.opened;
    socket.send({ type: "session.config", split_granularity: "none", stream_audio: true, response_format: "pcm" });
    socket.send({ type: "input.text", text: longText(10_000) });
    socket.send({ type: "input.done" });
    await socket.waitFor((received) => received.some((entry) => entry.kind === "binary"), 30_000);
    expect(socket.json()[0]).toMatchObject({ type: "audio.start", sentence_index: 0 });
    socket.close();
    expect((await within(model.ended, 30_000, "the generation stopping after the socket closed")).aborted).toBe(true);
  });
});

describe("one input cap for every route", () => {
  let raised: TestServer;
  let lowered: TestServer;
  beforeAll(async () => {
    raised = await startTestServer(new ToneModel(), { flags: { "max-input-chars": "100000" } });
    lowered = await startTestServer(new ToneModel(), { flags: { "max-input-chars": "100" } });
  });
  afterAll(async () => {
    await raised.stop();
    await lowered.stop();
  });

  const post = (server: TestServer, path: string, body: unknown) =>
    fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  test("past 4096 characters a raised cap serves streams, a file or batch item is refused as unbounded, and a lowered cap is named", async () => {
    const input = longText(5000);
    const streamed = await post(raised, "/v1/audio/speech", { input, max_new_tokens: 2, response_format: "pcm", stream_format: "audio" });
    expect(streamed.status).toBe(200);
    await streamed.arrayBuffer();
    // A file holds the whole utterance in memory until it is encoded: long-form text must stream.
    const file = await post(raised, "/v1/audio/speech", { input, max_new_tokens: 2, response_format: "pcm" });
    expect(file.status).toBe(400);
    expect((await file.json()).error).toMatchObject({ param: "input" });
    const batch = await (await post(raised, "/v1/audio/speech/batch", { max_new_tokens: 2, response_format: "pcm", items: [{ input: "Short." }, { input }] })).json();
    expect(batch.results.map((result: any) => result.status)).toEqual(["success", "error"]);
    expect(batch.results[1].error).toContain("must be streamed");

    const refused = await post(lowered, "/v1/audio/speech", { input: longText(101), stream_format: "audio" });
    expect(refused.status).toBe(400);
    expect((await refused.json()).error).toMatchObject({ param: "input", message: "input must be at most 100 characters (got 101)" });
    const refusedItem = await (await post(lowered, "/v1/audio/speech/batch", { items: [{ input: "Short." }, { input: longText(101) }] })).json();
    expect(refusedItem.results.map((result: any) => result.status)).toEqual(["success", "error"]);
    expect(refusedItem.results[1].error).toContain("at most 100 characters");
  });

  test("the WebSocket holds unsegmented text to the same cap", async () => {
    const socket = new RecordingSocket(`${lowered.url.replace("http", "ws")}/v1/audio/speech/stream`);
    await socket.opened;
    socket.send({ type: "session.config", split_granularity: "none" });
    socket.send({ type: "input.text", text: "word ".repeat(30) });
    expect(await socket.waitForClose()).toBe(1009);
    expect(socket.json().at(-1)).toMatchObject({ type: "error" });
    expect(socket.json().at(-1).message).toContain("more than 100 characters");
  });
});
