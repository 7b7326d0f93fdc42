/**
 * The engine seen from the wire: admission (429 with Retry-After, the WebSocket's error, batch items that
 * wait), finish reasons in every done event, the engine gauges, pause and resume behind a slow reader, and a
 * soak of clients that leave at random which must leave no state behind.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { RawHttpConnection, requestHead } from "../../support/raw-http.ts";
import { startTestServer, type TestServer } from "../../support/server.ts";
import { parseSse } from "../../support/sse.ts";
import { TONE_REQUEST_STATE_BYTES, ToneModel } from "../../support/tone-model.ts";
import { RecordingSocket } from "../../support/ws-client.ts";
import { eventually } from "../../support/eventually.ts";
import { seededRandom } from "../../gpu/support.ts";
import { metricOf, sampleValue, scrapeMetrics } from "../../support/metrics.ts";


/** The value of one sample line of /metrics (0 when absent). */
async function metric(server: TestServer, series: string): Promise<number> {
  return metricOf(server.url, series);
}

async function engineGauges(server: TestServer): Promise<number[]> {
  return Promise.all([
    metric(server, 'voxedge_engine_requests{state="waiting"}'),
    metric(server, 'voxedge_engine_requests{state="running"}'),
    metric(server, 'voxedge_engine_requests{state="paused"}'),
    metric(server, "voxedge_engine_state_bytes"),
  ]);
}

function post(server: TestServer, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(`${server.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal });
}

describe("admission: --max-streams 1 --max-queue 0", () => {
  const adapter = new ToneModel({ frameDelayMs: 5, framesPerChar: 4 });
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(adapter, { flags: { "max-streams": "1", "max-queue": "0" } });
  });
  afterAll(() => server.stop());

  test("a request past the limits is a 429 in the OpenAI error shape with Retry-After, before any audio, on every HTTP mode; the running one is unharmed", async () => {
    const controller = new AbortController();
    const running = await post(server, { input: "a long running request", stream_format: "audio", response_format: "pcm" }, controller.signal);
    expect(running.status).toBe(200);
    const reader = running.body!.getReader();
    expect((await reader.read()).value!.byteLength).toBeGreaterThan(0);
    expect(await engineGauges(server)).toEqual([0, 1, 0, TONE_REQUEST_STATE_BYTES]);
    // One running on its one place: full.
    expect(await metric(server, "voxedge_engine_load")).toBe(1);

    for (const mode of [{}, { stream: true }, { stream_format: "audio" }]) {
      const refused = await post(server, { input: "hello", ...mode });
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(refused.headers.get("content-type")).toStartWith("application/json");
      const body = (await refused.json()) as any;
      expect(body.error).toMatchObject({ type: "RateLimitError", param: null, code: 429 });
      expect(body.error.message).toContain("at capacity");
    }
    expect(await metric(server, "voxedge_engine_rejections_total")).toBe(3);

    // The WebSocket refuses the sentence with an error message and an audio.done that carries it.
    const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/v1/audio/speech/stream`);
    await socket.opened;
    socket.send({ type: "session.config", response_format: "pcm" });
    socket.send({ type: "input.text", text: "Hello there." });
    socket.send({ type: "input.done" });
    await socket.waitFor((received) => received.some((message) => message.kind === "json" && message.value.type === "audio.done"));
    const messages = socket.json();
    expect(messages.find((message) => message.type === "error")).toMatchObject({ code: 429 });
    expect(messages.find((message) => message.type === "error").retry_after).toBeGreaterThanOrEqual(1);
    expect(messages.find((message) => message.type === "audio.done")).toMatchObject({ finish_reason: "error", total_bytes: 0 });
    socket.close();

    controller.abort();
    await reader.cancel().catch(() => {});
    expect(await eventually("the engine to empty", async () => ((await engineGauges(server)).every((value) => value === 0) ? true : undefined))).toBe(true);
  });

  test("batch items are never refused: they wait for the running place in turn", async () => {
    const response = await fetch(`${server.url}/v1/audio/speech/batch`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ items: [{ input: "one" }, { input: "two" }, { input: "three" }, { input: "four" }] }),
    });
    const body = (await response.json()) as any;
    expect(body).toMatchObject({ total: 4, succeeded: 4, failed: 0 });
    expect(body.results.map((result: any) => result.finish_reason)).toEqual(["stop", "stop", "stop", "stop"]);
  });
});

describe("overload: --max-streams 1 --max-queue-wait 1", () => {
  // 20 ms a frame, 4 frames a character: a 150-character text runs 12 s; its text predicts ~10 s of speech.
  const adapter = new ToneModel({ frameDelayMs: 20, framesPerChar: 4 });
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(adapter, { flags: { "max-streams": "1", "max-queue-wait": "1" } });
  });
  afterAll(() => server.stop());

  const LONG = "This sentence is long enough to hold the one running place for many seconds, far longer than a second of waiting. ".repeat(2).slice(0, 150);

  test("with no place expected within the queue wait, every protocol refuses at once in its own shape, Retry-After the expected wait; nothing queues", async () => {
    const controller = new AbortController();
    const running = await post(server, { input: LONG, stream_format: "audio", response_format: "pcm" }, controller.signal);
    expect(running.status).toBe(200);
    const reader = running.body!.getReader();
    expect((await reader.read()).value!.byteLength).toBeGreaterThan(0);
    expect(await metric(server, "voxedge_engine_capacity_streams")).toBe(1);
    expect(await metric(server, "voxedge_engine_load")).toBe(1);
    expect(await metric(server, "voxedge_engine_expected_wait_seconds")).toBeGreaterThan(1);

    const refused = await post(server, { input: "hello", stream_format: "audio" });
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(1);
    const body = (await refused.json()) as any;
    expect(body.error).toMatchObject({ type: "RateLimitError", code: 429 });
    expect(body.error.message).toContain("--max-queue-wait 1 s");
    // Refused before the request is read: a body that is not even JSON gets the same answer.
    const unread = await fetch(`${server.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: "{not json" });
    expect(unread.status).toBe(429);
    await unread.body?.cancel();

    const eleven = await fetch(`${server.url}/elevenlabs/v1/text-to-speech/low/stream?output_format=pcm_24000`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ text: "hello" }) });
    expect(eleven.status).toBe(429);
    expect(Number(eleven.headers.get("retry-after"))).toBeGreaterThan(1);
    expect(((await eleven.json()) as any).detail).toMatchObject({ status: "too_many_concurrent_requests" });

    // The native socket: the error with code 429 and retry_after, the sentence's audio.done, then close 1013.
    const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/v1/audio/speech/stream`);
    await socket.opened;
    socket.send({ type: "session.config", response_format: "pcm" });
    socket.send({ type: "input.text", text: "Hello there. And more." });
    socket.send({ type: "input.done" });
    expect(await socket.waitForClose()).toBe(1013);
    expect(socket.closeReason).toMatch(/^server at capacity; retry after \d+ s$/);
    const error = socket.json().find((message) => message.type === "error");
    expect(error).toMatchObject({ code: 429 });
    expect(error.retry_after).toBeGreaterThan(1);
    expect(socket.json().find((message) => message.type === "audio.done")).toMatchObject({ finish_reason: "error", total_bytes: 0 });

    // ElevenLabs' socket: its error shape, then 1013.
    const elevenSocket = new RecordingSocket(`${server.url.replace("http", "ws")}/elevenlabs/v1/text-to-speech/low/stream-input?output_format=pcm_24000`);
    await elevenSocket.opened;
    elevenSocket.send({ text: " " });
    elevenSocket.send({ text: "Hello there. " });
    elevenSocket.send({ text: "" });
    expect(await elevenSocket.waitForClose()).toBe(1013);
    expect(elevenSocket.json().find((message) => message.error !== undefined)).toMatchObject({ error: "too_many_concurrent_requests", code: 429 });

    expect(await metric(server, 'voxedge_engine_requests{state="waiting"}')).toBe(0);
    expect(await metric(server, "voxedge_engine_rejections_total")).toBe(5);
    controller.abort();
    await reader.cancel().catch(() => {});
    expect(await eventually("the engine to empty", async () => ((await engineGauges(server)).every((value) => value === 0) ? true : undefined))).toBe(true);
  });

  test("a place expected within the queue wait is waited for: the request is answered once it has it", async () => {
    // Two characters: about 8 frames by its text, 8 in fact (160 ms).
    const first = await post(server, { input: "hi", stream_format: "audio", response_format: "pcm" });
    expect(first.status).toBe(200);
    const second = await post(server, { input: "ok", stream_format: "audio", response_format: "pcm" });
    expect(second.status).toBe(200);
    expect((await second.arrayBuffer()).byteLength).toBeGreaterThan(0);
    expect((await first.arrayBuffer()).byteLength).toBeGreaterThan(0);
  });
});

describe("finish reasons", () => {
  const adapter = new ToneModel();
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(adapter);
  });
  afterAll(() => server.stop());

  test("stop and length reach the SSE done event, the file's X-Finish-Reason, the batch item, the WebSocket's audio.done and the metrics", async () => {
    const finished = parseSse(await (await post(server, { input: "hello there", stream: true })).text()).at(-1)!;
    expect(finished.data).toMatchObject({ type: "speech.audio.done", finish_reason: "stop" });
    const capped = parseSse(await (await post(server, { input: "hello there", stream: true, max_new_tokens: 2 })).text());
    expect(capped.at(-1)!.data).toMatchObject({ finish_reason: "length", usage: { output_tokens: 2 } });
    expect(capped.filter((event) => event.event === "speech.audio.delta").length).toBe(2);

    expect((await post(server, { input: "hello there" })).headers.get("x-finish-reason")).toBe("stop");
    expect((await post(server, { input: "hello there", max_new_tokens: 1 })).headers.get("x-finish-reason")).toBe("length");

    const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/v1/audio/speech/stream`);
    await socket.opened;
    socket.send({ type: "session.config", response_format: "pcm", stream_audio: true, max_new_tokens: 1 });
    socket.send({ type: "input.text", text: "Hello there. " });
    socket.send({ type: "input.done" });
    await socket.waitFor((received) => received.some((message) => message.kind === "json" && message.value.type === "session.done"));
    expect(socket.json().find((message) => message.type === "audio.done")).toMatchObject({ error: false, finish_reason: "length" });
    socket.close();

    expect(await metric(server, 'voxedge_engine_finished_total{finish_reason="stop"}')).toBeGreaterThanOrEqual(2);
    expect(await metric(server, 'voxedge_engine_finished_total{finish_reason="length"}')).toBeGreaterThanOrEqual(3);
    const metrics = await scrapeMetrics(server.url);
    expect(metrics).toContain('voxedge_engine_batch_size_count{stage="step"}');
    expect(sampleValue(metrics, 'voxedge_engine_model_calls_total{stage="step"}')).toBeGreaterThan(0);
    expect(metrics).toContain('voxedge_engine_tick_seconds_count{stage="step"}');
  });
});

describe("backpressure", () => {
  test("a raw stream whose client stops reading is paused, keeps its state, and resumes to the end when the client reads again", async () => {
    // 300 characters × 10 frames: 4 minutes of 24 kHz pcm (11.5 MB), far more than the sockets' buffers hold.
    const adapter = new ToneModel({ framesPerChar: 10 });
    const server = await startTestServer(adapter);
    const connection = await RawHttpConnection.open(server.url);
    try {
      const json = JSON.stringify({ input: "a".repeat(300), stream_format: "audio", response_format: "pcm" });
      let receivedBytes = 0;
      connection.socket.on("data", (chunk: Buffer) => {
        receivedBytes += chunk.byteLength;
      });
      connection.socket.pause();
      connection.write(requestHead("POST", "/v1/audio/speech", { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(json) }) + json);
      await eventually("the stream to pause", async () => ((await metric(server, 'voxedge_engine_requests{state="paused"}')) === 1 ? true : undefined));
      const framesWhilePaused = adapter.framesProduced;
      await Bun.sleep(300);
      // Paused: no turns, state kept.
      expect(adapter.framesProduced).toBe(framesWhilePaused);
      expect(framesWhilePaused).toBeLessThan(3000);
      expect(await metric(server, "voxedge_engine_state_bytes")).toBe(TONE_REQUEST_STATE_BYTES);

      connection.socket.resume();
      const response = await connection.response(60_000);
      expect(response.status).toBe(200);
      expect(adapter.framesProduced).toBe(3000);
      expect(receivedBytes).toBeGreaterThan(3000 * 1920 * 2);
      expect(await eventually("the engine to empty", async () => ((await engineGauges(server)).every((value) => value === 0) ? true : undefined))).toBe(true);
    } finally {
      connection.destroy();
      await server.stop();
    }
  });
});

describe("soak", () => {
  test("200 requests on every route, a third of whose clients leave at a random moment, leave no request and no state behind", async () => {
    const adapter = new ToneModel({ frameDelayMs: 1, framesPerChar: 1 });
    // A deep queue that nobody is refused from: the soak is of requests that wait, run and leave.
    const server = await startTestServer(adapter, { flags: { "max-streams": "6", "max-queue": "400", "max-queue-wait": "600" } });
    try {
      const random = seededRandom(12345);
      let completed = 0;
      let left = 0;
      const one = async () => {
        const leave = random() < 0.33;
        const leaveAfterMs = Math.floor(random() * 60);
        const kind = Math.floor(random() * 4);
        const input = "x".repeat(10 + Math.floor(random() * 40));
        if (kind === 3) {
          const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/v1/audio/speech/stream`);
          await socket.opened;
          socket.send({ type: "session.config", response_format: "pcm", stream_audio: true });
          socket.send({ type: "input.text", text: `${input}.` });
          socket.send({ type: "input.done" });
          if (leave) {
            await Bun.sleep(leaveAfterMs);
            left++;
          } else {
            await socket.waitFor((received) => received.some((message) => message.kind === "json" && message.value.type === "session.done"));
            completed++;
          }
          socket.close();
          return;
        }
        const controller = new AbortController();
        const body = kind === 0 ? { input } : kind === 1 ? { input, stream: true } : { input, stream_format: "audio", response_format: "pcm" };
        if (leave) setTimeout(() => controller.abort(), leaveAfterMs);
        try {
          const response = await post(server, body, controller.signal);
          await response.arrayBuffer();
          if (controller.signal.aborted) left++;
          else {
            expect(response.status).toBe(200);
            completed++;
          }
        } catch {
          left++;
        }
      };
      const queue = Array.from({ length: 200 }, () => one);
      await Promise.all(Array.from({ length: 16 }, async () => {
        for (let task = queue.shift(); task; task = queue.shift()) await task();
      }));
      expect(completed + left).toBe(200);
      expect(left).toBeGreaterThan(20);
      expect(await eventually("every gauge back at 0", async () => ((await engineGauges(server)).every((value) => value === 0) ? true : undefined))).toBe(true);
      expect(adapter.runner.heldRequests).toBe(0);
    } finally {
      await server.stop();
    }
  }, 120_000);
});
