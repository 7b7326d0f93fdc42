import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createClassicModel } from "../../src/models/classic/model.ts";
import { createLogger } from "../../src/log/logger.ts";
import { wyomingExposure } from "../../src/config.ts";
import { startWyomingServer, type WyomingServer } from "../../src/wyoming/server.ts";
import { IDLE_AFTER_ERROR_MS, TEXT_TOO_LONG } from "../../src/wyoming/session.ts";
import { MAX_TEXT_MESSAGE_BYTES } from "../../src/speech/stream-rules.ts";
import { eventually } from "../support/eventually.ts";
import { sampleValue } from "../support/metrics.ts";
import { testApp } from "../support/server.ts";
import { ToneModel, TONE_REQUEST_STATE_BYTES } from "../support/tone-model.ts";
import { eventBytes, WyomingTestClient, type ClientEvent } from "../support/wyoming-client.ts";
import type { SpeechModel } from "../../src/models/contract.ts";
import { PocketModel } from "../../src/models/pocket/model.ts";
import { silentLogger } from "../../src/log/logger.ts";
import { encodeWav } from "../../src/audio/wav.ts";
import { fixtureBundle } from "../models/pocket/bundle-fixture.ts";
import { multipartBody, sine } from "../support/uploads.ts";

interface Served {
  app: Awaited<ReturnType<typeof testApp>>;
  wyoming: WyomingServer;
  logLines: Record<string, unknown>[];
}

interface Timeouts {
  idleTimeoutMs?: number;
  stallTimeoutMs?: number;
}

/** The listener always binds to loopback here; where the server would bind it is config.ts's wyomingExposure (test/config.test.ts). */
async function serve(adapter: SpeechModel, flags: Record<string, string> = {}, { idleTimeoutMs, stallTimeoutMs = 5000 }: Timeouts = {}): Promise<Served> {
  const logLines: Record<string, unknown>[] = [];
  const logger = createLogger("info", (line) => logLines.push(JSON.parse(line)));
  const app = await testApp(adapter, { flags, logger });
  const { uploadedVoices } = wyomingExposure(app.config);
  const wyoming = await startWyomingServer({
    host: "127.0.0.1",
    port: 0,
    service: app.service,
    catalog: app.catalog,
    voices: app.voices,
    logger,
    lifecycle: app.lifecycle,
    version: "9.9.9",
    stallTimeoutMs,
    idleTimeoutMs,
    uploadedVoices,
    maxRunChars: app.config.wsMaxQueuedChars,
  });
  return { app, wyoming, logLines };
}

async function stop({ app, wyoming }: Served): Promise<void> {
  await wyoming.close();
  await app.host.close();
}

const isType = (type: string) => (event: ClientEvent) => event.type === type;

/** Checks one audio group (audio-start, audio-chunks, audio-stop) and returns its pcm16 bytes. */
function audioOfGroup(group: ClientEvent[], rateHz: number): Uint8Array {
  expect(group[0]).toMatchObject({ type: "audio-start", data: { rate: rateHz, width: 2, channels: 1 } });
  expect(group.at(-1)!.type).toBe("audio-stop");
  const chunks = group.slice(1, -1);
  for (const chunk of chunks) {
    expect(chunk).toMatchObject({ type: "audio-chunk", data: { rate: rateHz, width: 2, channels: 1 } });
    expect(chunk.payload!.byteLength % 2).toBe(0);
  }
  return Buffer.concat(chunks.map((chunk) => chunk.payload!));
}

/** The audio groups of a run of events, each from its audio-start to its audio-stop. */
function audioGroups(events: ClientEvent[]): ClientEvent[][] {
  const groups: ClientEvent[][] = [];
  for (const event of events) {
    if (event.type === "audio-start") groups.push([]);
    if (event.type.startsWith("audio-")) groups.at(-1)!.push(event);
  }
  return groups;
}

function rms(pcm: Uint8Array): number {
  const view = new DataView(pcm.buffer, pcm.byteOffset, pcm.byteLength);
  let sum = 0;
  for (let offset = 0; offset < pcm.byteLength; offset += 2) sum += (view.getInt16(offset, true) / 32768) ** 2;
  return Math.sqrt(sum / Math.max(1, pcm.byteLength / 2));
}

describe("with the offline engine", () => {
  let served: Served;
  beforeAll(async () => {
    served = await serve(await createClassicModel());
  });
  afterAll(() => stop(served));

  test("describe → info: one tts program with the model's voices, their language, attribution, version and streaming", async () => {
    const client = await WyomingTestClient.connect(served.wyoming.port);
    client.send("describe");
    const [info] = await client.readUntil(isType("info"));
    client.close();
    const programs = info!.data.tts as Record<string, unknown>[];
    expect(programs).toHaveLength(1);
    const program = programs[0]!;
    expect(program).toMatchObject({ name: "voxedge", installed: true, version: "9.9.9", supports_synthesize_streaming: true, attribution: { name: "voxedge" } });
    expect(typeof program.description).toBe("string");
    const voices = program.voices as Record<string, unknown>[];
    expect(voices.map((voice) => voice.name)).toEqual(["rms", "kal16", "slt", "awb"]);
    for (const voice of voices) {
      // Every field the reference reader requires is present.
      expect(voice).toMatchObject({ installed: true, languages: ["en-US"], attribution: { name: "CMU Flite", url: expect.any(String) } });
      expect(Object.keys(voice).sort()).toEqual(["attribution", "description", "installed", "languages", "name", "speakers", "version"]);
    }
    expect(info!.data).toMatchObject({ asr: [], handle: [], intent: [], wake: [], mic: [], snd: [] });
  });

  test("synthesize: exactly one audio group of pcm16 at 16 kHz, as long as the speech, ending with audio-stop", async () => {
    const client = await WyomingTestClient.connect(served.wyoming.port);
    client.send("synthesize", { text: "The kitchen lights are on. The door is locked.", voice: { name: "slt" } });
    const events = await client.readUntil(isType("audio-stop"));
    const pcm = audioOfGroup(events, 16000);
    const seconds = pcm.byteLength / 2 / 16000;
    // Two short sentences: a couple of seconds of speech, not silence.
    expect(seconds).toBeGreaterThan(1.5);
    expect(seconds).toBeLessThan(8);
    expect(rms(pcm)).toBeGreaterThan(0.01);
    // Nothing more follows the group.
    await Bun.sleep(200);
    expect(client.events).toHaveLength(events.length);
    client.close();
    const line = await eventually("the access log line", () => served.logLines.find((fields) => fields.message === "request" && fields.method === "WYOMING" && fields.route === "synthesize" && fields.status === 200));
    expect(line).toMatchObject({ input_chars: 46, audio_seconds: Number(seconds.toFixed(3)) });
    expect(JSON.stringify(served.logLines)).not.toContain("kitchen");
  });

  test("a voice asked for by language alone speaks with the default voice; an unknown language is an error", async () => {
    const client = await WyomingTestClient.connect(served.wyoming.port);
    client.send("synthesize", { text: "Hello.", voice: { language: "en_US" } });
    audioOfGroup(await client.readUntil(isType("audio-stop")), 16000);
    const seen = client.events.length;
    client.send("synthesize", { text: "Bonjour.", voice: { language: "fr" } });
    const [error] = await client.readUntil(isType("error"), seen);
    expect(error!.data).toMatchObject({ code: "unknown_voice" });
    client.close();
  });

  test("streaming: text split mid-word and mid-sentence is spoken a sentence at a time, the whole-text synthesize once, then synthesize-stopped", async () => {
    const text = "The bed light is off. The kitchen lights are on. Anything else?";
    const client = await WyomingTestClient.connect(served.wyoming.port);
    client.send("synthesize-start", { voice: { name: "rms" } });
    const firstSentenceEnd = text.indexOf(". ") + 2;
    for (let sent = 0; sent < firstSentenceEnd; sent += 7) client.send("synthesize-chunk", { text: text.slice(sent, Math.min(sent + 7, firstSentenceEnd)) });
    // The first sentence is complete: its audio comes while the rest is unsent.
    await client.readUntil(isType("audio-stop"));
    for (let sent = firstSentenceEnd; sent < text.length; sent += 7) client.send("synthesize-chunk", { text: text.slice(sent, sent + 7) });
    // Home Assistant sends the whole text again, for servers that cannot stream.
    client.send("synthesize", { text, voice: { name: "rms" } });
    client.send("synthesize-stop");
    const events = await client.readUntil(isType("synthesize-stopped"));
    expect(events.at(-1)!.type).toBe("synthesize-stopped");
    expect(events.filter((event) => event.type === "error")).toEqual([]);
    const groups = audioGroups(events);
    // One group per sentence, three sentences, spoken once each.
    expect(groups).toHaveLength(3);
    const seconds = groups.map((group) => audioOfGroup(group, 16000).byteLength / 2 / 16000);
    for (const length of seconds) expect(length).toBeGreaterThan(0.4);
    expect(seconds.reduce((sum, length) => sum + length, 0)).toBeLessThan(10);
    await Bun.sleep(200);
    expect(client.events).toHaveLength(events.length);
    client.close();
    const line = await eventually("the run's access log line", () => served.logLines.find((fields) => fields.route === "synthesize-start"));
    expect(line).toMatchObject({ method: "WYOMING", status: 200, input_chars: text.length });
  });

  test("an unknown voice is an error event, and the same connection still answers describe and synthesize", async () => {
    const client = await WyomingTestClient.connect(served.wyoming.port);
    client.send("synthesize", { text: "Hello there.", voice: { name: "no-such-voice" } });
    const [error] = await client.readUntil(isType("error"));
    expect(error!.data).toMatchObject({ code: "unknown_voice", text: expect.stringContaining("no-such-voice") });
    expect(client.events.some((event) => event.type === "audio-start")).toBe(false);
    client.send("describe");
    await client.readUntil(isType("info"));
    const seen = client.events.length;
    client.send("synthesize", { text: "Hello there." });
    audioOfGroup(await client.readUntil(isType("audio-stop"), seen), 16000);
    client.close();
  });

  test("a connection left silent after an error closes within seconds, so a reader waiting for audio-stop learns of the failure", async () => {
    const client = await WyomingTestClient.connect(served.wyoming.port);
    const sentAt = performance.now();
    client.send("synthesize", { text: "Hello there.", voice: { name: "no-such-voice" } });
    await client.readUntil(isType("error"));
    await client.closedByServer(IDLE_AFTER_ERROR_MS + 3000);
    expect(performance.now() - sentAt).toBeGreaterThanOrEqual(IDLE_AFTER_ERROR_MS - 50);
  });

  test("a streaming run with an unknown voice: one error at synthesize-start, no audio, and still synthesize-stopped", async () => {
    const client = await WyomingTestClient.connect(served.wyoming.port);
    client.send("synthesize-start", { voice: { name: "no-such-voice" } });
    for (const text of ["One sentence. ", "Another sentence. ", "A third."]) client.send("synthesize-chunk", { text });
    client.send("synthesize", { text: "One sentence. Another sentence. A third.", voice: { name: "no-such-voice" } });
    client.send("synthesize-stop");
    const events = await client.readUntil(isType("synthesize-stopped"));
    expect(events.map((event) => event.type)).toEqual(["error", "synthesize-stopped"]);
    expect(events[0]!.data).toMatchObject({ code: "unknown_voice" });
    client.close();
    const line = await eventually("the run's log line", () => served.logLines.find((fields) => fields.route === "synthesize-start" && fields.status === 400));
    expect(line).toBeDefined();
  });

  test("events written one byte at a time are read whole", async () => {
    const client = await WyomingTestClient.connect(served.wyoming.port);
    const bytes = Buffer.concat([eventBytes("describe"), eventBytes("synthesize", { text: "Byte by byte, ünïcödé too." }, new Uint8Array([1, 2, 3, 4]))]);
    for (const byte of bytes) await client.writeRaw(Uint8Array.of(byte));
    const events = await client.readUntil(isType("audio-stop"));
    expect(events[0]!.type).toBe("info");
    audioOfGroup(events.slice(1), 16000);
    client.close();
  });

  test("a malformed header gets an error event and the connection closes; the server goes on serving", async () => {
    const client = await WyomingTestClient.connect(served.wyoming.port);
    await client.writeRaw(Buffer.from("this is not json\n"));
    const [error] = await client.readUntil(isType("error"));
    expect(error!.data).toMatchObject({ code: "protocol_error" });
    await client.closedByServer();

    const oversized = await WyomingTestClient.connect(served.wyoming.port);
    await oversized.writeRaw(Buffer.from(`${JSON.stringify({ type: "synthesize", data_length: 1024 ** 3 })}\n`));
    expect((await oversized.readUntil(isType("error")))[0]!.data).toMatchObject({ code: "protocol_error", text: expect.stringContaining("data_length") });
    await oversized.closedByServer();

    const next = await WyomingTestClient.connect(served.wyoming.port);
    next.send("describe");
    await next.readUntil(isType("info"));
    next.close();
  });
});

describe("with a slow engine", () => {
  test("a client that disconnects mid-stream stops its generation and frees the engine's state", async () => {
    const adapter = new ToneModel({ frameDelayMs: 20, framesPerChar: 4 });
    const served = await serve(adapter);
    try {
      const client = await WyomingTestClient.connect(served.wyoming.port);
      client.send("synthesize-start", { voice: { name: "low" } });
      client.send("synthesize-chunk", { text: "A long sentence that takes the slow engine several seconds to speak. And another" });
      await client.readUntil(isType("audio-chunk"));
      const metricsDuring = await (await served.app.app.request("/metrics")).text();
      expect(sampleValue(metricsDuring, 'voxedge_engine_requests{state="running"}')).toBe(1);
      expect(sampleValue(metricsDuring, "voxedge_engine_state_bytes")).toBe(TONE_REQUEST_STATE_BYTES);
      const framesAtClose = adapter.framesProduced;
      client.close();
      const metricsAfter = await eventually("the engine empty again", async () => {
        const text = await (await served.app.app.request("/metrics")).text();
        return sampleValue(text, 'voxedge_engine_requests{state="running"}') === 0 && sampleValue(text, "voxedge_engine_state_bytes") === 0 && text;
      });
      expect(sampleValue(metricsAfter, 'voxedge_engine_requests{state="waiting"}')).toBe(0);
      expect(sampleValue(metricsAfter, 'voxedge_streams_total{mode="wyoming",outcome="aborted"}')).toBe(1);
      // Generation stopped: far fewer frames than the sentence's 4 per character.
      await Bun.sleep(200);
      expect(adapter.framesProduced).toBeLessThan(framesAtClose + 20);
      const line = await eventually("the run's log line", () => served.logLines.find((fields) => fields.route === "synthesize-start"));
      expect(line).toMatchObject({ end: "client_closed" });
    } finally {
      await stop(served);
    }
  });

  test("an idle connection is closed, one whose audio takes longer than the idle timeout is not", async () => {
    const served = await serve(new ToneModel({ frameDelayMs: 20, framesPerChar: 1 }), {}, { idleTimeoutMs: 300 });
    try {
      const idle = await WyomingTestClient.connect(served.wyoming.port);
      const busy = await WyomingTestClient.connect(served.wyoming.port);
      // About 60 frames of 20 ms: well past the idle timeout.
      busy.send("synthesize", { text: "Sixty characters or so, spoken slowly by the tone engine." });
      await idle.closedByServer(5000);
      await busy.readUntil(isType("audio-stop"));
      expect(busy.closed).toBe(false);
      await busy.closedByServer(5000);
    } finally {
      await stop(served);
    }
  });

  test("a request the engine has no room for is an error event with code at_capacity, and the connection stays usable", async () => {
    const served = await serve(new ToneModel({ frameDelayMs: 20, framesPerChar: 4 }), { "max-streams": "1", "max-queue": "0" });
    try {
      const busy = await WyomingTestClient.connect(served.wyoming.port);
      busy.send("synthesize", { text: "This one holds the only place for a while." });
      await busy.readUntil(isType("audio-chunk"));
      const refused = await WyomingTestClient.connect(served.wyoming.port);
      refused.send("synthesize", { text: "No room for this one." });
      const [error] = await refused.readUntil(isType("error"));
      expect(error!.data).toMatchObject({ code: "at_capacity", text: expect.stringContaining("capacity") });
      const line = await eventually("the refusal's log line", () => served.logLines.find((fields) => fields.route === "synthesize" && fields.status === 429));
      expect(line).toBeDefined();
      refused.send("describe");
      await refused.readUntil(isType("info"));
      busy.close();
      refused.close();
    } finally {
      await stop(served);
    }
  });
});

describe("what one connection may hold", () => {
  test("events with large non-text data sent while a sentence is spoken are not read past a small read-ahead; once it is spoken all are answered", async () => {
    const served = await serve(new ToneModel({ frameDelayMs: 20, framesPerChar: 4 }));
    try {
      const client = await WyomingTestClient.connect(served.wyoming.port);
      // About 200 frames of 20 ms: the handler is busy for seconds.
      client.send("synthesize", { text: "A sentence the slow engine takes seconds to speak." });
      await client.readUntil(isType("audio-chunk"));
      const FLOOD_EVENTS = 64;
      const padded = eventBytes("describe", { padding: "x".repeat(1024 * 1024) });
      for (let sent = 0; sent < FLOOD_EVENTS; sent++) client.socket.write(padded);
      await Bun.sleep(1500);
      // The server (and the two kernels' socket buffers between it and the client) took a few MiB of the
      // 64 MiB; the client still holds the rest. Read without a bound, the server took all of it.
      const takenBytes = FLOOD_EVENTS * padded.byteLength - client.socket.writableLength;
      expect(takenBytes).toBeLessThan(24 * 1024 * 1024);
      await client.readUntil(isType("audio-stop"));
      // Reading resumed: every describe is answered, in order, after the audio.
      await eventually("every describe answered", () => client.events.filter((event) => event.type === "info").length === FLOOD_EVENTS, 60_000);
      expect(client.closed).toBe(false);
      client.close();
    } finally {
      await stop(served);
    }
  }, 90_000);

  test("a client that asks and never reads its replies is no longer read, then dropped after the stall timeout", async () => {
    const served = await serve(await createClassicModel(), {}, { stallTimeoutMs: 1000, idleTimeoutMs: 60_000 });
    try {
      const client = await WyomingTestClient.connect(served.wyoming.port);
      client.socket.pause();
      const DESCRIBES = 50_000;
      const describe = eventBytes("describe");
      for (let sent = 0; sent < DESCRIBES; sent++) client.socket.write(describe);
      // Replies fill the socket buffers (a few MiB), then a small unsent mark: the server stops handling
      // and reading, and after the stall timeout drops the connection. Read only once it has said so: read
      // sooner (a fixed wait, on a loaded machine), the replies drain and the connection rightly lives on.
      const stalled = (fields: Record<string, unknown>) => fields.message === "wyoming client stopped reading its replies; closing";
      await eventually("the stall warning", () => served.logLines.find(stalled), 30_000);
      client.socket.resume();
      await client.closedByServer(10_000);
      const answered = client.events.filter((event) => event.type === "info").length;
      // Answered until the replies backed up (socket buffers of a few MiB): thousands, not all fifty thousand (about 60 MB of replies held for a client that reads nothing).
      expect(answered).toBeGreaterThan(0);
      expect(answered).toBeLessThan(DESCRIBES / 2);
      expect(served.logLines.find(stalled)).toMatchObject({ stall_timeout_ms: 1000 });
    } finally {
      await stop(served);
    }
  }, 60_000);

  test("describe answers from one scan of the speaker folder, not one scan per describe", async () => {
    const served = await serve(await createClassicModel());
    try {
      let scans = 0;
      const rescan = served.app.voices.rescan.bind(served.app.voices);
      served.app.voices.rescan = () => {
        scans++;
        return rescan();
      };
      const client = await WyomingTestClient.connect(served.wyoming.port);
      for (let asked = 0; asked < 50; asked++) client.send("describe");
      await eventually("50 infos", () => client.events.filter((event) => event.type === "info").length === 50);
      const [first, last] = [client.events[0]!, client.events.at(-1)!];
      expect(last.data).toEqual(first.data);
      expect(scans).toBeLessThanOrEqual(1);
      client.close();
    } finally {
      await stop(served);
    }
  });
});

describe("text caps (the WebSocket routes' limits)", () => {
  test(`a synthesize-chunk larger than ${MAX_TEXT_MESSAGE_BYTES} bytes is an error event with code ${TEXT_TOO_LONG}; the run speaks nothing more and still ends with synthesize-stopped`, async () => {
    const served = await serve(new ToneModel({ frameDelayMs: 0, framesPerChar: 1 }));
    try {
      const client = await WyomingTestClient.connect(served.wyoming.port);
      client.send("synthesize-start");
      client.send("synthesize-chunk", { text: "Hello there. ".repeat((MAX_TEXT_MESSAGE_BYTES + 1024) / 13) });
      client.send("synthesize-chunk", { text: "More text. And more. " });
      client.send("synthesize-stop");
      const events = await client.readUntil(isType("synthesize-stopped"), 0, 10_000);
      expect(events.map((event) => event.type)).toEqual(["error", "synthesize-stopped"]);
      expect(events[0]!.data).toMatchObject({ code: TEXT_TOO_LONG, text: expect.stringContaining(`${MAX_TEXT_MESSAGE_BYTES} bytes`) });
      // The connection goes on.
      const seen = client.events.length;
      client.send("synthesize", { text: "Short." });
      await client.readUntil(isType("audio-stop"), seen);
      client.close();
      const line = await eventually("the run's log line", () => served.logLines.find((fields) => fields.route === "synthesize-start"));
      expect(line).toMatchObject({ status: 413 });
    } finally {
      await stop(served);
    }
  });

  test("a streaming run's text past --ws-max-queued-chars, and a synthesize past --max-input-chars, are errors with the same code", async () => {
    const served = await serve(new ToneModel({ frameDelayMs: 0, framesPerChar: 1 }), { "ws-max-queued-chars": "5000", "max-input-chars": "4096" });
    try {
      const client = await WyomingTestClient.connect(served.wyoming.port);
      client.send("synthesize-start");
      // Whitespace: nothing to speak, only characters to count.
      for (let chunk = 0; chunk < 6; chunk++) client.send("synthesize-chunk", { text: " ".repeat(1000) });
      client.send("synthesize-stop");
      const events = await client.readUntil(isType("synthesize-stopped"), 0, 10_000);
      expect(events.map((event) => event.type)).toEqual(["error", "synthesize-stopped"]);
      expect(events[0]!.data).toMatchObject({ code: TEXT_TOO_LONG, text: expect.stringContaining("5000 characters") });

      const seen = client.events.length;
      client.send("synthesize", { text: "a ".repeat(2100) });
      const [error] = await client.readUntil(isType("error"), seen, 10_000);
      expect(error!.data).toMatchObject({ code: TEXT_TOO_LONG, text: expect.stringContaining("4096 characters") });
      // Text far past any cap is not even parsed: its data is skipped unread, with the same answer.
      const afterFirst = client.events.length;
      client.send("synthesize", { text: "a ".repeat(1024 * 1024) });
      const [unread] = await client.readUntil(isType("error"), afterFirst, 10_000);
      expect(unread!.data).toMatchObject({ code: TEXT_TOO_LONG, text: expect.stringContaining("4096 characters") });
      client.close();
    } finally {
      await stop(served);
    }
  });
});

describe("with Pocket TTS (the tiny random-weight fixture, which clones)", () => {
  test("an uploaded voice is listed in info with the model's languages, and a synthesize names it", async () => {
    const engine = await PocketModel.load(fixtureBundle(), {}, { logger: silentLogger });
    const served = await serve(engine);
    try {
      const audio = new File([encodeWav(sine(2, 220, 24000), 24000) as Uint8Array<ArrayBuffer>], "grandma.wav", { type: "audio/wav" });
      const { body, contentType } = await multipartBody({ name: "Grandma", consent: "c", audio_sample: audio });
      expect((await served.app.app.request("/v1/audio/voices", { method: "POST", headers: { "content-type": contentType }, body: body as Uint8Array<ArrayBuffer> })).status).toBe(200);

      const client = await WyomingTestClient.connect(served.wyoming.port);
      client.send("describe");
      const [info] = await client.readUntil(isType("info"));
      const voices = (info!.data.tts as { voices: Record<string, unknown>[] }[])[0]!.voices;
      expect(voices.find((voice) => voice.name === "Grandma")).toMatchObject({ languages: [...engine.capabilities.languages], description: "Grandma (uploaded)", attribution: { name: "Kyutai" } });
      expect(voices.length).toBe(engine.capabilities.voices.length + 1);

      const seen = client.events.length;
      client.send("synthesize", { text: "Hi.", voice: { name: "Grandma" } });
      const group = await client.readUntil(isType("audio-stop"), seen);
      expect(audioOfGroup(group, 24000).byteLength).toBeGreaterThan(0);

      // Deleted through the API: the next describe no longer lists it, though info is cached.
      expect((await served.app.app.request("/v1/audio/voices/Grandma", { method: "DELETE" })).status).toBe(200);
      const beforeDescribe = client.events.length;
      client.send("describe");
      const [infoAfter] = await client.readUntil(isType("info"), beforeDescribe);
      expect((infoAfter!.data.tts as { voices: Record<string, unknown>[] }[])[0]!.voices.map((voice) => voice.name)).not.toContain("Grandma");
      client.close();
    } finally {
      // Closing the host closes its model.
      await stop(served);
    }
  }, 60_000);

  /** Uploads a voice named `name` through the HTTP API, with the key `key`. */
  async function upload(served: Served, name: string, key: string): Promise<void> {
    const audio = new File([encodeWav(sine(2, 220, 24000), 24000) as Uint8Array<ArrayBuffer>], "voice.wav", { type: "audio/wav" });
    const { body, contentType } = await multipartBody({ name, consent: "c", audio_sample: audio });
    const response = await served.app.app.request("/v1/audio/voices", { method: "POST", headers: { "content-type": contentType, authorization: `Bearer ${key}` }, body: body as Uint8Array<ArrayBuffer> });
    expect(response.status).toBe(200);
  }

  test("with API keys set, uploaded voices are neither listed nor spoken over Wyoming (not even named in errors) unless --wyoming-uploaded-voices says so", async () => {
    const engine = await PocketModel.load(fixtureBundle(), {}, { logger: silentLogger });
    const served = await serve(engine, { "api-key": "secret-key", "wyoming-port": "0" });
    try {
      await upload(served, "Grandma", "secret-key");
      const client = await WyomingTestClient.connect(served.wyoming.port);
      client.send("describe");
      const [info] = await client.readUntil(isType("info"));
      const names = (info!.data.tts as { voices: Record<string, unknown>[] }[])[0]!.voices.map((voice) => voice.name);
      expect(names).toEqual([...engine.capabilities.voices]);
      let seen = client.events.length;
      client.send("synthesize", { text: "Hi.", voice: { name: "Grandma" } });
      const [error] = await client.readUntil(isType("error"), seen);
      expect(error!.data).toMatchObject({ code: "unknown_voice" });
      expect(String(error!.data.text).match(/grandma/gi)).toHaveLength(1);
      // An upload that takes a built-in voice's name does not take it over here: the model's voice still speaks.
      const builtIn = engine.capabilities.voices[0]!;
      await upload(served, builtIn, "secret-key");
      seen = client.events.length;
      client.send("synthesize", { text: "Hi.", voice: { name: builtIn } });
      audioOfGroup(await client.readUntil(isType("audio-stop"), seen), 24000);
      // The HTTP API still speaks the upload to a caller with the key.
      const spoken = await served.app.app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json", authorization: "Bearer secret-key" }, body: JSON.stringify({ input: "Hi.", voice: "Grandma" }) });
      expect(spoken.status).toBe(200);
      client.close();
    } finally {
      await stop(served);
    }

    // An alias of the upload is as unknown as the upload's own name: a refusal, not a misconfigured table's 500.
    const aliased = await serve(await PocketModel.load(fixtureBundle(), {}, { logger: silentLogger }), { "api-key": "secret-key", "wyoming-port": "0", "voice-aliases": "alloy=grandma" });
    try {
      await upload(aliased, "Grandma", "secret-key");
      const client = await WyomingTestClient.connect(aliased.wyoming.port);
      client.send("synthesize", { text: "Hi.", voice: { name: "alloy" } });
      const [error] = await client.readUntil(isType("error"));
      expect(error!.data).toMatchObject({ code: "unknown_voice" });
      expect(String(error!.data.text)).not.toMatch(/grandma/i);
      client.close();
    } finally {
      await stop(aliased);
    }

    const opted = await serve(await PocketModel.load(fixtureBundle(), {}, { logger: silentLogger }), { "api-key": "secret-key", "wyoming-port": "0", "wyoming-uploaded-voices": "true" });
    try {
      await upload(opted, "Grandma", "secret-key");
      const client = await WyomingTestClient.connect(opted.wyoming.port);
      client.send("describe");
      const [info] = await client.readUntil(isType("info"));
      expect((info!.data.tts as { voices: Record<string, unknown>[] }[])[0]!.voices.map((voice) => voice.name)).toContain("Grandma");
      const seen = client.events.length;
      client.send("synthesize", { text: "Hi.", voice: { name: "Grandma" } });
      audioOfGroup(await client.readUntil(isType("audio-stop"), seen), 24000);
      client.close();
    } finally {
      await stop(opted);
    }
  }, 120_000);
});
