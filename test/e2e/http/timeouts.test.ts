/**
 * The HTTP edge against slow, stalled and vanishing clients, on a real port: bodies that never finish (408),
 * clients that hang up mid-body or before their audio is ready (499, neither a bad request nor a server
 * fault), streams nobody reads (aborted after --stream-stall-timeout), and the API key check.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { AudioChunk, SynthesisJob } from "../../../src/models/contract.ts";
import { createLogger } from "../../../src/log/logger.ts";
import { RawHttpConnection, requestHead, serverEndEstablished } from "../../support/raw-http.ts";
import { startTestServer, type TestServer } from "../../support/server.ts";
import { ToneModel } from "../../support/tone-model.ts";
import { eventually } from "../../support/eventually.ts";
import { encodeWav } from "../../../src/audio/wav.ts";
import { sine } from "../../support/uploads.ts";
import { scrapeMetrics } from "../../support/metrics.ts";


const sleep = (ms: number) => Bun.sleep(ms);

async function metricsText(server: TestServer): Promise<string> {
  return scrapeMetrics(server.url);
}

/** Every label set of `name` counted for `route`, e.g. { "499": 1 } for voxedge_http_requests_total. */
function requestCountsByStatus(metrics: string, route: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const match of metrics.matchAll(/^voxedge_http_requests_total\{route="([^"]*)",method="[A-Z]+",status="(\d+)"\} (\d+)$/gm)) {
    if (match[1] === route) counts[match[2]!] = Number(match[3]);
  }
  return counts;
}

function expectApiErrorShape(body: string, status: number): { message: string } {
  const parsed = JSON.parse(body);
  expect(Object.keys(parsed)).toEqual(["error"]);
  expect(Object.keys(parsed.error).sort()).toEqual(["code", "message", "param", "type"]);
  expect(parsed.error.code).toBe(status);
  expect(typeof parsed.error.message).toBe("string");
  return parsed.error;
}

interface BodyRoute {
  path: string;
  contentType: string;
  /** The first bytes of a body that would be valid if it were ever finished. */
  opening: string;
}

const BOUNDARY = "voxedgeboundary";
const BODY_ROUTES: BodyRoute[] = [
  { path: "/v1/audio/speech", contentType: "application/json", opening: '{"input":"hello there, ' },
  { path: "/v1/audio/speech/batch", contentType: "application/json", opening: '{"items":[{"input":"hello ' },
  { path: "/v1/audio/voices", contentType: `multipart/form-data; boundary=${BOUNDARY}`, opening: `--${BOUNDARY}\r\nContent-Disposition: form-data; name="name"\r\n\r\n` },
];
const DECLARED_BYTES = 1000;

describe("request bodies that do not arrive in time", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(new ToneModel({ cloning: true }), { flags: { "body-timeout": "1" } });
  });
  afterAll(() => server.stop());

  // Each case waits out the body timeout on its own connection: they wait together.
  for (const route of BODY_ROUTES) {
    test.concurrent(`POST ${route.path}: a body that stalls after 10 bytes gets a 408 and the server serves on`, async () => {
      const connection = await RawHttpConnection.open(server.url);
      try {
        connection.write(requestHead("POST", route.path, { "Content-Type": route.contentType, "Content-Length": DECLARED_BYTES }));
        connection.write(route.opening.slice(0, 10));
        const response = await connection.response();
        expect(response.status).toBe(408);
        expect(expectApiErrorShape(response.body, 408).message).toContain("did not arrive within 1 s");
        // The rest of the body may still come, where it would read as the next request: the 408 ends the connection.
        expect(response.headers.connection).toBe("close");
        const closedWithin5s = await Promise.race([connection.closed.then(() => true), sleep(5000).then(() => false)]);
        expect(closedWithin5s).toBe(true);
      } finally {
        connection.destroy();
      }
      const health = await fetch(`${server.url}/health`);
      expect(health.status).toBe(200);
    });

    test.concurrent(`POST ${route.path}: a body trickling one byte every 200 ms is cut the same way`, async () => {
      const connection = await RawHttpConnection.open(server.url);
      connection.write(requestHead("POST", route.path, { "Content-Type": route.contentType, "Content-Length": DECLARED_BYTES }));
      const fullBody = route.opening.padEnd(DECLARED_BYTES, " ");
      let sentBytes = 0;
      const trickle = setInterval(() => connection.write(fullBody[sentBytes++]!), 200);
      try {
        const response = await connection.response();
        expect(response.status).toBe(408);
        expectApiErrorShape(response.body, 408);
      } finally {
        clearInterval(trickle);
        connection.destroy();
      }
      const models = await fetch(`${server.url}/v1/models`);
      expect(models.status).toBe(200);
    });
  }
});

describe("a client that hangs up mid-body", () => {
  for (const route of BODY_ROUTES) {
    test(`POST ${route.path}: counted as 499 (not a server fault) and nothing logged as an error`, async () => {
      const logged: { level: string; message: string }[] = [];
      const logger = createLogger("debug", (line) => logged.push(JSON.parse(line)));
      const server = await startTestServer(new ToneModel({ cloning: true }), { logger });
      try {
        const connection = await RawHttpConnection.open(server.url);
        connection.write(requestHead("POST", route.path, { "Content-Type": route.contentType, "Content-Length": DECLARED_BYTES }));
        connection.write(route.opening.padEnd(DECLARED_BYTES / 2, "a"));
        // Let the handler start reading before the hang-up.
        await sleep(200);
        connection.destroy();
        const counts = await eventually("the request to be counted", async () => {
          const counts = requestCountsByStatus(await metricsText(server), route.path);
          return Object.keys(counts).length > 0 ? counts : undefined;
        });
        expect(counts).toEqual({ "499": 1 });
        expect(logged.filter((entry) => entry.level === "error")).toEqual([]);
      } finally {
        await server.stop();
      }
    });
  }
});

/** A cloning tone model whose voice encodes take `delayMs`: a request waits in its voice preparation that long. */
function slowEncodingAdapter(delayMs: number): ToneModel & { encodesStarted: number } {
  const adapter = Object.assign(new ToneModel({ cloning: true }), { encodesStarted: 0 });
  const encode = adapter.encodeVoice!;
  adapter.encodeVoice = async (reference, signal) => {
    adapter.encodesStarted++;
    await sleep(delayMs);
    return encode(reference, signal);
  };
  return adapter;
}

describe("a client that hangs up before its audio is sent", () => {
  const clip = `data:audio/wav;base64,${Buffer.from(encodeWav(sine(1.5, 300), 16000)).toString("base64")}`;
  const CASES = [
    {
      name: "a file, mid-render",
      // 4 frames of 20 ms a character: the whole file would take about 15 s to render.
      adapter: () => Object.assign(new ToneModel({ frameDelayMs: 20, framesPerChar: 4 }), { encodesStarted: 0 }),
      body: { input: "a long sentence that would take a while to speak, and then some more of it", response_format: "wav" },
      underWay: (adapter: ToneModel & { encodesStarted: number }) => adapter.framesProduced >= 3,
    },
    {
      name: "a raw stream, while its reference voice is encoded",
      adapter: () => slowEncodingAdapter(1000),
      body: { input: "a stream that never starts", stream_format: "audio", response_format: "pcm", ref_audio: clip },
      underWay: (adapter: ToneModel & { encodesStarted: number }) => adapter.encodesStarted > 0,
    },
  ];
  for (const { name, adapter: makeAdapter, body, underWay } of CASES) {
    test(`${name}: 499 in the access log and the metrics, nothing logged as an error, the generation never runs on`, async () => {
      const logged: Record<string, any>[] = [];
      const logger = createLogger("debug", (line) => logged.push(JSON.parse(line)));
      const adapter = makeAdapter();
      const server = await startTestServer(adapter, { logger });
      try {
        const connection = await RawHttpConnection.open(server.url);
        const json = JSON.stringify(body);
        connection.write(requestHead("POST", "/v1/audio/speech", { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(json) }) + json);
        await eventually("the request to be under way", async () => (underWay(adapter) ? true : undefined));
        connection.destroy();

        const line = await eventually("the access log line", async () => logged.find((entry) => entry.message === "request"));
        expect(line).toMatchObject({ route: "/v1/audio/speech", method: "POST", status: 499 });
        expect(line.end).toBeUndefined();
        expect(requestCountsByStatus(await metricsText(server), "/v1/audio/speech")).toEqual({ "499": 1 });
        expect(logged.filter((entry) => entry.level === "error")).toEqual([]);
        // Nothing more is made for a client that is gone.
        const framesAtEnd = adapter.framesProduced;
        await sleep(300);
        expect(adapter.framesProduced).toBe(framesAtEnd);
        expect(framesAtEnd).toBeLessThan(20);
      } finally {
        await server.stop();
      }
    });
  }
});

/** Audio as fast as it is pulled, with no end: only an abort (or the consumer letting go) stops it. */
class EndlessToneModel extends ToneModel {
  signalAborted = false;
  generationEnded = false;

  override async *synthesize(job: SynthesisJob): AsyncGenerator<AudioChunk, void, undefined> {
    const rate = this.capabilities.nativeSampleRateHz;
    const samples = new Float32Array(rate / 12.5).fill(0.25);
    try {
      while (!job.signal.aborted) {
        this.framesProduced++;
        yield { samples, sampleRateHz: rate, frameCount: 1 };
      }
    } finally {
      this.signalAborted = job.signal.aborted;
      this.generationEnded = true;
    }
  }
}

/**
 * The server sees a client's reads only when the kernel's send buffer drains by a third (about 1.5 MB on
 * loopback), so a "steady" reader must take that much per stall timeout to look alive; the one below takes
 * about 2.5 MB/s against a 2 s timeout.
 */
const STALL_TIMEOUT_SECONDS = 2;
/** Long enough that the frame cap of its length (10 s + 1 s a character) is never reached while the reader reads. */
const ENDLESS_INPUT = "a sentence that goes on and on. ".repeat(20);
const STREAM_REQUESTS = [
  { mode: "audio_stream", body: { input: ENDLESS_INPUT, stream_format: "audio" } },
  { mode: "sse", body: { input: ENDLESS_INPUT, stream: true } },
];

describe("streams the client stops reading", () => {
  // Seconds of slow reading and waiting, each on a server of its own: they run together.
  for (const { mode, body } of STREAM_REQUESTS) {
    test.concurrent(`${mode}: a slow but steady reader is never cut; once it reads nothing, the generation is aborted`, async () => {
      const adapter = new EndlessToneModel();
      const server = await startTestServer(adapter, { flags: { "stream-stall-timeout": String(STALL_TIMEOUT_SECONDS) } });
      const connection = await RawHttpConnection.open(server.url);
      try {
        const json = JSON.stringify(body);
        connection.write(requestHead("POST", "/v1/audio/speech", { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(json) }) + json);
        let receivedBytes = 0;
        connection.socket.on("data", (chunk: Buffer) => {
          receivedBytes += chunk.byteLength;
          // One chunk per wake-up: the socket is resumed below, a little at a time.
          connection.socket.pause();
        });
        // One read every 200 ms for three stall timeouts: slow, but it is progress.
        for (let wakeUp = 0; wakeUp < (3 * STALL_TIMEOUT_SECONDS * 1000) / 200; wakeUp++) {
          await sleep(200);
          connection.socket.resume();
        }
        await sleep(50);
        connection.socket.pause();
        expect(receivedBytes).toBeGreaterThan(0);
        expect(adapter.generationEnded).toBe(false);
        expect(await metricsText(server)).not.toContain(`voxedge_streams_total{mode="${mode}",outcome="aborted"}`);

        // Now the client reads nothing at all, yet stays connected.
        await eventually("the generation to stop", async () => (adapter.generationEnded ? true : undefined));
        expect(adapter.signalAborted).toBe(true);
        const framesAtAbort = adapter.framesProduced;
        await eventually("the stream to be counted as aborted", async () =>
          (await metricsText(server)).includes(`voxedge_streams_total{mode="${mode}",outcome="aborted"} 1`) ? true : undefined,
        );
        await sleep(300);
        expect(adapter.framesProduced).toBe(framesAtAbort);
        // Its socket, full of unsent audio, is closed too, not left for the client to hold for good.
        const serverPort = Number(new URL(server.url).port);
        await eventually("the server to close its end of the connection", async () => (serverEndEstablished(serverPort, connection.socket.localPort!) ? undefined : true), 15_000);
      } finally {
        connection.destroy();
        await server.stop();
      }
    }, 60_000);
  }
});

describe("the API key", () => {
  const KEY = "sk-test-0123456789";
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(new ToneModel(), { flags: { "api-key": KEY } });
  });
  afterAll(() => server.stop());

  for (const scheme of ["bearer", "BEARER", "bEaReR"]) {
    test(`"${scheme} <key>" is accepted (the scheme name is case-insensitive)`, async () => {
      const response = await fetch(`${server.url}/v1/models`, { headers: { Authorization: `${scheme} ${KEY}` } });
      expect(response.status).toBe(200);
      expect((await response.json()).object).toBe("list");
    });
  }

  const REFUSED: [string, Record<string, string>][] = [
    ["a wrong key", { Authorization: `Bearer ${KEY}x` }],
    ["a key that is a prefix of the right one", { Authorization: `Bearer ${KEY.slice(0, -1)}` }],
    ["another scheme", { Authorization: `Basic ${KEY}` }],
    ["no Authorization header", {}],
  ];
  for (const [name, headers] of REFUSED) {
    test(`${name} → 401 naming the Bearer scheme, in the API's error shape`, async () => {
      const response = await fetch(`${server.url}/v1/models`, { headers });
      expect(response.status).toBe(401);
      expect(response.headers.get("www-authenticate")).toMatch(/^Bearer\b/);
      const error = expectApiErrorShape(await response.text(), 401);
      expect(error.message).toContain("API key");
    });
  }
});
