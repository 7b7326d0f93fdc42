import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect, type Socket } from "node:net";
import { randomBytes } from "node:crypto";
import { ToneModel } from "../support/tone-model.ts";
import { startTestServer, type TestServer } from "../support/server.ts";
import { isJson, RecordingSocket, type Received } from "../support/ws-client.ts";
import { createClassicModel } from "../../src/models/classic/model.ts";
import { decodeWithFfmpeg } from "../support/ffmpeg.ts";
import { dominantFrequencyHz } from "../support/spectrum.ts";
import { metricOf } from "../support/metrics.ts";
import { ERRONEOUS_MESSAGE_BURST } from "../../src/speech/stream-rules.ts";

const wsUrl = (server: TestServer) => `${server.url.replace("http", "ws")}/v1/audio/speech/stream`;

function binaryBetween(received: Received[], startIndex: number): Uint8Array[] {
  const frames: Uint8Array[] = [];
  for (let i = startIndex + 1; i < received.length; i++) {
    const entry = received[i]!;
    if (entry.kind === "json") break;
    frames.push(entry.bytes);
  }
  return frames;
}

function int16ToFloat(bytes: Uint8Array): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return Float32Array.from({ length: bytes.byteLength / 2 }, (_, i) => view.getInt16(i * 2, true) / 32768);
}

describe("with the offline engine", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(await createClassicModel());
  });
  afterAll(() => server.stop());

  test("text in 5-character pieces: the first sentence is heard before the last piece is sent", async () => {
    const paragraph = "The first sentence is short. The second sentence follows it closely. A third one ends the paragraph.";
    const socket = new RecordingSocket(wsUrl(server));
    await socket.opened;
    socket.send({ type: "session.config", voice: "rms", stream_audio: true, response_format: "pcm" });
    const firstSentenceEnd = paragraph.indexOf(". ") + 2;
    let sent = 0;
    for (; sent < firstSentenceEnd; sent += 5) socket.send({ type: "input.text", text: paragraph.slice(sent, sent + 5) });
    // The first sentence is complete now; audio for it must arrive while the rest is still unsent.
    await socket.waitFor((received) => received.some((entry) => entry.kind === "binary"));
    const heardBeforeRest = socket.received.length;
    for (; sent < paragraph.length; sent += 5) socket.send({ type: "input.text", text: paragraph.slice(sent, sent + 5) });
    socket.send({ type: "input.done" });
    await socket.waitFor((received) => received.some(isJson("session.done")));

    const events = socket.json();
    expect(events.slice(0, 1)[0]).toMatchObject({ type: "audio.start", utterance_index: 0, sentence_index: 0, sentence_text: "The first sentence is short.", format: "pcm", sample_rate: 24000, channels: 1 });
    expect(socket.received.slice(0, heardBeforeRest).some((entry) => entry.kind === "binary")).toBe(true);
    const starts = events.filter((event) => event.type === "audio.start");
    expect(starts.map((event) => event.sentence_index)).toEqual([0, 1, 2]);
    expect(events.at(-1)).toEqual({ type: "session.done", utterance_index: 0, total_sentences: 3 });
    // Each sentence: start, its binary frames, then done with the byte count of exactly those frames.
    socket.received.forEach((entry, index) => {
      if (entry.kind !== "json" || entry.value.type !== "audio.start") return;
      const frames = binaryBetween(socket.received, index);
      const done = socket.received[index + frames.length + 1] as { kind: "json"; value: any };
      expect(done.value).toMatchObject({ type: "audio.done", sentence_index: entry.value.sentence_index, error: false });
      expect(done.value.total_bytes).toBe(frames.reduce((sum, frame) => sum + frame.byteLength, 0));
      expect(frames.length).toBeGreaterThan(1);
    });
    socket.close();
  });

  test("a sentence's concatenated pcm equals the HTTP pcm for the same text, voice and seed", async () => {
    const sentence = "Equality holds for this exact sentence.";
    const socket = new RecordingSocket(wsUrl(server));
    await socket.opened;
    socket.send({ type: "session.config", voice: "slt", seed: 7, stream_audio: true });
    socket.send({ type: "input.text", text: sentence });
    socket.send({ type: "input.done" });
    await socket.waitFor((received) => received.some(isJson("session.done")));
    const pcm = Buffer.concat(socket.received.filter((entry) => entry.kind === "binary").map((entry) => (entry as { bytes: Uint8Array }).bytes));
    const http = await fetch(`${server.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: sentence, voice: "slt", seed: 7, response_format: "pcm", sample_rate: 16000 }) });
    expect(new Uint8Array(pcm)).toEqual(new Uint8Array(await http.arrayBuffer()));
    socket.close();
  });

  test("stream_audio false: one encoded file per sentence in the requested format", async () => {
    const socket = new RecordingSocket(wsUrl(server));
    await socket.opened;
    socket.send({ type: "session.config", response_format: "mp3", stream_audio: false });
    socket.send({ type: "input.text", text: "One file here. Another file there." });
    socket.send({ type: "input.done" });
    await socket.waitFor((received) => received.some(isJson("session.done")));
    const files = socket.received.filter((entry) => entry.kind === "binary") as { bytes: Uint8Array }[];
    expect(files).toHaveLength(2);
    for (const file of files) expect(decodeWithFfmpeg(file.bytes).codec).toBe("mp3");
    expect(socket.json().filter((event) => event.type === "audio.start").every((event) => event.format === "mp3")).toBe(true);
    socket.close();
  });

  test("word_timestamps on an engine without timings is refused with the reason", async () => {
    const socket = new RecordingSocket(wsUrl(server));
    await socket.opened;
    socket.send({ type: "session.config", word_timestamps: true });
    expect(await socket.waitForClose()).toBe(1008);
    expect(socket.json()[0].message).toContain("word_timestamps are not available");
  });
});

describe("with a tone model", () => {
  test("two utterances on one socket, voice reconfigured between them", async () => {
    const adapter = new ToneModel();
    const server = await startTestServer(adapter);
    try {
      const socket = new RecordingSocket(wsUrl(server));
      await socket.opened;
      socket.send({ type: "session.config", voice: "low", stream_audio: true });
      socket.send({ type: "input.text", text: "First utterance here." });
      socket.send({ type: "input.done" });
      socket.send({ type: "session.config", voice: "high", stream_audio: true });
      socket.send({ type: "input.text", text: "Second utterance now." });
      socket.send({ type: "input.done" });
      await socket.waitFor((received) => received.filter(isJson("session.done")).length === 2);
      const done = socket.json().filter((event) => event.type === "session.done");
      expect(done).toEqual([
        { type: "session.done", utterance_index: 0, total_sentences: 1 },
        { type: "session.done", utterance_index: 1, total_sentences: 1 },
      ]);
      expect(adapter.jobs.map((job) => job.voice)).toEqual(["low", "high"]);
      const starts = socket.received.flatMap((entry, index) => (entry.kind === "json" && entry.value.type === "audio.start" ? [index] : []));
      const pitches = starts.map((index) => dominantFrequencyHz(int16ToFloat(Buffer.concat(binaryBetween(socket.received, index))), 24000));
      expect(Math.abs(pitches[0]! - 220)).toBeLessThan(15);
      expect(Math.abs(pitches[1]! - 440)).toBeLessThan(15);
      socket.close();
    } finally {
      await server.stop();
    }
  });

  test("a failure after audio was sent: error with partial_audio and action, then audio.done with the error", async () => {
    const server = await startTestServer(new ToneModel({ failAfterFrames: 2 }));
    try {
      const socket = new RecordingSocket(wsUrl(server));
      await socket.opened;
      socket.send({ type: "session.config", stream_audio: true });
      socket.send({ type: "input.text", text: "This sentence will break halfway." });
      socket.send({ type: "input.done" });
      await socket.waitFor((received) => received.some(isJson("session.done")));
      const events = socket.json();
      expect(events.find((event) => event.type === "error")).toMatchObject({ partial_audio: true, action: "discard" });
      expect(events.find((event) => event.type === "audio.done").error).toBeString();
      socket.close();
    } finally {
      await server.stop();
    }
  });

  test("a client that disconnects mid-sentence stops its generation", async () => {
    const adapter = new ToneModel({ frameDelayMs: 20, framesPerChar: 4 });
    const server = await startTestServer(adapter);
    try {
      const socket = new RecordingSocket(wsUrl(server));
      await socket.opened;
      socket.send({ type: "session.config", stream_audio: true });
      socket.send({ type: "input.text", text: "A long sentence that would keep the model busy for several seconds." });
      socket.send({ type: "input.done" });
      await socket.waitFor((received) => received.filter((entry) => entry.kind === "binary").length >= 3);
      socket.close();
      await socket.waitForClose();
      await new Promise((resolve) => setTimeout(resolve, 150));
      const atClose = adapter.framesProduced;
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(adapter.framesProduced - atClose).toBeLessThanOrEqual(1);
      expect(atClose).toBeLessThan(30);
    } finally {
      await server.stop();
    }
  });

  test("a client that stops reading pauses its generation: server memory stays bounded", async () => {
    // ~4096 chars × 4 frames × 3840 bytes ≈ 63 MB of pcm if nothing held generation back.
    const adapter = new ToneModel({ framesPerChar: 4 });
    const server = await startTestServer(adapter);
    const socket = await upgradedSocket(server);
    try {
      // From here on the client never reads: the kernel buffers fill, then the server's own queue.
      socket.pause();
      for (const message of [{ type: "session.config", stream_audio: true }, { type: "input.text", text: "word ".repeat(800) }, { type: "input.done" }]) socket.write(maskedTextFrame(JSON.stringify(message)));
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const afterPause = adapter.framesProduced;
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect(adapter.framesProduced - afterPause).toBeLessThanOrEqual(2);
      // Produced at most the high-water mark plus what the loopback socket buffers hold (a few MB).
      expect(afterPause * 3840).toBeLessThan(16 * 1024 * 1024);
      expect(afterPause).toBeLessThan(16000);
    } finally {
      socket.destroy();
      await server.stop();
    }
  });
});

describe("protocol errors", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(new ToneModel(), { flags: { "ws-config-timeout": "0.3", "ws-idle-timeout": "0.5" } });
  });
  afterAll(() => server.stop());

  const cases: [string, (socket: RecordingSocket) => void, number, string][] = [
    ["text before config", (socket) => socket.send({ type: "input.text", text: "hi" }), 1008, "session.config"],
    ["unknown config field", (socket) => socket.send({ type: "session.config", colour: 1 }), 1008, "colour"],
    ["bad voice in config", (socket) => socket.send({ type: "session.config", voice: "ghost" }), 1008, "ghost"],
    ["binary message", (socket) => socket.sendRaw(new Uint8Array([1, 2, 3])), 1008, "binary"],
    [
      "input.text over 128 KiB",
      (socket) => {
        socket.send({ type: "session.config" });
        socket.send({ type: "input.text", text: "a".repeat(129 * 1024) });
      },
      1009,
      "128",
    ],
    [
      "unbounded text with split_granularity none",
      (socket) => {
        socket.send({ type: "session.config", split_granularity: "none" });
        for (let i = 0; i < 5; i++) socket.send({ type: "input.text", text: "word ".repeat(200) });
      },
      1009,
      "input.done",
    ],
  ];
  for (const [label, act, code, message] of cases) {
    test(`${label} → error, close ${code}`, async () => {
      const socket = new RecordingSocket(wsUrl(server));
      await socket.opened;
      act(socket);
      expect(await socket.waitForClose()).toBe(code);
      expect(socket.json().at(-1)).toMatchObject({ type: "error" });
      expect(socket.json().at(-1).message).toContain(message);
    });
  }

  for (const [label, config, param] of [["speed 1.5", { speed: 1.5 }, "speed"]] as const) {
    test(`stream_audio with ${label} is refused as on HTTP: error, close 1008, no audio`, async () => {
      const socket = new RecordingSocket(wsUrl(server));
      await socket.opened;
      socket.send({ type: "session.config", stream_audio: true, ...config });
      socket.send({ type: "input.text", text: "Hello there. " });
      expect(await socket.waitForClose()).toBe(1008);
      expect(socket.json()).toHaveLength(1);
      expect(socket.json()[0]).toMatchObject({ type: "error" });
      expect(socket.json()[0].message).toContain(param);
      expect(socket.json()[0].message).toContain("stream_audio");
      expect(socket.received.some((entry) => entry.kind === "binary")).toBe(false);
    });
  }

  test("a later session.config that turns on stream_audio with speed is refused too; speed and mp3 without stream_audio are served", async () => {
    const socket = new RecordingSocket(wsUrl(server));
    await socket.opened;
    socket.send({ type: "session.config", stream_audio: false, speed: 1.5, response_format: "mp3" });
    socket.send({ type: "input.text", text: "Hello there. " });
    socket.send({ type: "input.done" });
    await socket.waitFor((received) => received.some(isJson("session.done")));
    expect(socket.json()[0]).toMatchObject({ type: "audio.start", format: "mp3" });
    socket.send({ type: "session.config", stream_audio: true, speed: 1.5 });
    expect(await socket.waitForClose()).toBe(1008);
    expect(socket.json().at(-1).message).toContain("speed");
  });

  for (const [label, raw, mentions] of [
    ["not JSON", "{nope", "JSON"],
    ["of an unknown type", JSON.stringify({ type: "input.shout", text: "hi" }), "input.shout"],
    ["with no type", JSON.stringify({ text: "hi" }), "type"],
  ] as const) {
    test(`a message ${label} gets a non-fatal error, and the session goes on (as vLLM-Omni)`, async () => {
      const socket = new RecordingSocket(wsUrl(server));
      await socket.opened;
      socket.send({ type: "session.config", stream_audio: true, response_format: "pcm" });
      socket.sendRaw(raw);
      socket.send({ type: "input.text", text: "Still here. " });
      socket.send({ type: "input.done" });
      await socket.waitFor((received) => received.some(isJson("session.done")));
      const errors = socket.json().filter((message) => message.type === "error");
      expect(errors).toHaveLength(1);
      expect(errors[0].message).toContain(mentions);
      expect(socket.json().find((message) => message.type === "audio.done")).toMatchObject({ error: false, finish_reason: "stop" });
      expect(socket.closeCode).toBeUndefined();
      socket.close();
    });
  }

  test("a flood of messages of an unknown type: each skipped with an error until the budget is spent, then close 1008", async () => {
    const socket = new RecordingSocket(wsUrl(server));
    await socket.opened;
    socket.send({ type: "session.config", stream_audio: true, response_format: "pcm" });
    for (let i = 0; i < 5000; i++) socket.send({ type: "nope" });
    expect(await socket.waitForClose()).toBe(1008);
    expect(socket.closeReason).toContain("too many erroneous messages");
    // The burst, what refilled while the test ran, and the closing error.
    expect(socket.json().length).toBeLessThanOrEqual(ERRONEOUS_MESSAGE_BURST + 3);
  });

  test("a message over 4 MiB is closed with 1009", async () => {
    const socket = new RecordingSocket(wsUrl(server));
    await socket.opened;
    socket.sendRaw(JSON.stringify({ type: "session.config", instructions: "x".repeat(4 * 1024 * 1024 + 10) }));
    expect(await socket.waitForClose()).toBe(1009);
  });

  test("no session.config before the deadline → close 1008", async () => {
    const socket = new RecordingSocket(wsUrl(server));
    await socket.opened;
    expect(await socket.waitForClose()).toBe(1008);
  });

  test("an idle socket is told, then closed; session.close closes cleanly", async () => {
    const idle = new RecordingSocket(wsUrl(server));
    await idle.opened;
    idle.send({ type: "session.config" });
    expect(await idle.waitForClose()).toBe(1000);
    expect(idle.closeReason).toContain("idle");
    expect(idle.json().at(-1)).toMatchObject({ type: "error" });
    expect(idle.json().at(-1).message).toContain("idle timeout");

    const polite = new RecordingSocket(wsUrl(server));
    await polite.opened;
    polite.send({ type: "session.config" });
    polite.send({ type: "session.close" });
    expect(await polite.waitForClose()).toBe(1000);
  });
});

describe("queue caps, session.close and stalled readers", () => {
  const audioDone = (socket: RecordingSocket) => socket.json().filter((event) => event.type === "audio.done" && event.error === false);

  test("100 messages of 128 KiB of 'Hi. ': error and close 1008 within the first, the model asked for at most one sentence; a 50-sentence session beside it is served in full", async () => {
    const adapter = new ToneModel();
    const server = await startTestServer(adapter);
    try {
      const legitimate = new RecordingSocket(wsUrl(server));
      await legitimate.opened;
      legitimate.send({ type: "session.config", stream_audio: true, voice: "high" });
      legitimate.send({ type: "input.text", text: Array.from({ length: 50 }, (_, index) => `This is sentence number ${index + 1}.`).join(" ") });
      legitimate.send({ type: "input.done" });

      const flood = new RecordingSocket(wsUrl(server));
      await flood.opened;
      flood.send({ type: "session.config", stream_audio: true });
      const message = JSON.stringify({ type: "input.text", text: "Hi. ".repeat(Math.floor((128 * 1024 - 30) / 4)) });
      expect(Buffer.byteLength(message)).toBeLessThanOrEqual(128 * 1024);
      for (let i = 0; i < 100; i++) flood.sendRaw(message);
      expect(await flood.waitForClose()).toBe(1008);
      expect(flood.json()).toEqual([{ type: "error", message: expect.stringContaining("too much text is waiting to be spoken") }]);

      await legitimate.waitFor((received) => received.some(isJson("session.done")));
      expect(audioDone(legitimate)).toHaveLength(50);
      expect(legitimate.json().at(-1)).toEqual({ type: "session.done", utterance_index: 0, total_sentences: 50 });
      expect(legitimate.json().some((event) => event.type === "error")).toBe(false);
      // 50 legitimate sentences, and of the 3.2 million flooded ones at most the one in progress when the cap tripped.
      expect(adapter.jobs.filter((job) => job.voice === "low").length).toBeLessThanOrEqual(1);
      legitimate.close();
    } finally {
      await server.stop();
    }
  });

  test("--ws-max-queued-segments 5: 1 being spoken + 5 waiting is served, 1 + 6 is refused with 1008", async () => {
    const server = await startTestServer(new ToneModel(), { flags: { "ws-max-queued-segments": "5" } });
    try {
      const sentences = (count: number) => ["One.", "Two.", "Three.", "Four.", "Five.", "Six.", "Seven."].slice(0, count).join(" ") + " ";
      const atCap = new RecordingSocket(wsUrl(server));
      await atCap.opened;
      atCap.send({ type: "session.config", stream_audio: true });
      atCap.send({ type: "input.text", text: sentences(6) });
      atCap.send({ type: "input.done" });
      await atCap.waitFor((received) => received.some(isJson("session.done")));
      expect(audioDone(atCap)).toHaveLength(6);
      atCap.close();

      const overCap = new RecordingSocket(wsUrl(server));
      await overCap.opened;
      overCap.send({ type: "session.config", stream_audio: true });
      overCap.send({ type: "input.text", text: sentences(7) });
      expect(await overCap.waitForClose()).toBe(1008);
      expect(overCap.json().at(-1)).toMatchObject({ type: "error", message: expect.stringContaining("at most 5 segments") });
    } finally {
      await server.stop();
    }
  });

  test("--ws-max-queued-chars 4096: exactly 4096 characters waiting (segments and the unfinished tail) is served, 4097 is refused", async () => {
    const server = await startTestServer(new ToneModel(), { flags: { "ws-max-queued-chars": "4096" } });
    try {
      // The first of 17 sentences of 250 characters is being spoken: 16 × 250 wait, plus the unfinished tail.
      const sentences = Array.from({ length: 17 }, (_, index) => `${String.fromCharCode(65 + index)}${"x".repeat(248)}.`).join(" ");
      const tail = (length: number) => `Tail${" word".repeat(30)}`.slice(0, length);
      const atCap = new RecordingSocket(wsUrl(server));
      await atCap.opened;
      atCap.send({ type: "session.config", stream_audio: true });
      atCap.send({ type: "input.text", text: `${sentences} ${tail(96)}` });
      atCap.send({ type: "input.done" });
      await atCap.waitFor((received) => received.some(isJson("session.done")));
      expect(audioDone(atCap)).toHaveLength(18);
      atCap.close();

      const overCap = new RecordingSocket(wsUrl(server));
      await overCap.opened;
      overCap.send({ type: "session.config", stream_audio: true });
      overCap.send({ type: "input.text", text: `${sentences} ${tail(97)}` });
      expect(await overCap.waitForClose()).toBe(1008);
      expect(overCap.json().at(-1).message).toContain("4096 characters");
    } finally {
      await server.stop();
    }
  });

  test("session.close right after input.done: every sentence's audio and the session.done arrive before close 1000; what follows is ignored", async () => {
    const adapter = new ToneModel({ frameDelayMs: 2 });
    const server = await startTestServer(adapter);
    try {
      const socket = new RecordingSocket(wsUrl(server));
      await socket.opened;
      socket.send({ type: "session.config", stream_audio: true });
      socket.send({ type: "input.text", text: "The first one. The second one. The third one. The fourth one" });
      socket.send({ type: "input.done" });
      socket.send({ type: "input.text", text: "Never flushed, never spoken" });
      socket.send({ type: "session.close" });
      socket.send({ type: "input.text", text: "After the close. " });
      socket.send({ type: "input.done" });
      expect(await socket.waitForClose()).toBe(1000);
      const events = socket.json();
      expect(events.filter((event) => event.type === "audio.start").map((event) => event.sentence_text)).toEqual(["The first one.", "The second one.", "The third one.", "The fourth one"]);
      expect(events.at(-1)).toEqual({ type: "session.done", utterance_index: 0, total_sentences: 4 });
      // Each sentence: start, its binary frames, then done with the byte count of exactly those frames.
      socket.received.forEach((entry, index) => {
        if (entry.kind !== "json" || entry.value.type !== "audio.start") return;
        const frames = binaryBetween(socket.received, index);
        expect(frames.length).toBeGreaterThan(0);
        const done = socket.received[index + frames.length + 1] as { kind: "json"; value: any };
        expect(done.value).toMatchObject({ type: "audio.done", sentence_index: entry.value.sentence_index, error: false, total_bytes: frames.reduce((sum, frame) => sum + frame.byteLength, 0) });
      });
      expect(adapter.jobs.map((job) => job.text)).toEqual(["The first one.", "The second one.", "The third one.", "The fourth one"]);
    } finally {
      await server.stop();
    }
  });

  test("a client that reads nothing for --stream-stall-timeout: its generation is aborted and the socket closed with 1008", async () => {
    const adapter = new ToneModel({ framesPerChar: 4 });
    const server = await startTestServer(adapter, { flags: { "stream-stall-timeout": "0.5" } });
    const socket = await upgradedSocket(server);
    try {
      socket.pause();
      for (const message of [{ type: "session.config", stream_audio: true }, { type: "input.text", text: "word ".repeat(800) }, { type: "input.done" }]) socket.write(maskedTextFrame(JSON.stringify(message)));
      const deadline = Date.now() + 15_000;
      while (!adapter.jobs.at(-1)?.signal.aborted && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(adapter.jobs.at(-1)?.signal.aborted).toBe(true);

      // Reading again drains what was sent before the close: the stream ends with a close frame carrying 1008.
      const received: Buffer[] = [];
      socket.on("data", (chunk: Buffer) => received.push(chunk));
      const ended = new Promise((resolve) => socket.once("close", resolve));
      socket.resume();
      await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, 10_000))]);
      expect(lastFrameCloseCode(Buffer.concat(received))).toBe(1008);
    } finally {
      socket.destroy();
      await server.stop();
    }
  });
});

describe("backpressure", () => {
  test("a sentence whose client stops reading is paused in the engine (state kept, no turns) and resumes to the end when it reads again", async () => {
    // One 300-character sentence × 10 frames: 4 minutes of pcm, far more than the socket buffers hold.
    const adapter = new ToneModel({ framesPerChar: 10 });
    const server = await startTestServer(adapter);
    const gauge = (series: string) => metricOf(server.url, series);
    const socket = await upgradedSocket(server);
    try {
      socket.pause();
      for (const message of [{ type: "session.config", stream_audio: true, response_format: "pcm" }, { type: "input.text", text: "word ".repeat(60).trim() + "." }, { type: "input.done" }]) socket.write(maskedTextFrame(JSON.stringify(message)));
      const deadline = Date.now() + 15_000;
      while ((await gauge('voxedge_engine_requests{state="paused"}')) !== 1 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(await gauge('voxedge_engine_requests{state="paused"}')).toBe(1);
      const framesWhilePaused = adapter.framesProduced;
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(adapter.framesProduced).toBe(framesWhilePaused);
      expect(framesWhilePaused).toBeLessThan(3000);
      expect(await gauge("voxedge_engine_state_bytes")).toBeGreaterThan(0);

      socket.on("data", () => {});
      socket.resume();
      const endBy = Date.now() + 60_000;
      while ((adapter.framesProduced < 3000 || (await gauge('voxedge_engine_requests{state="running"}')) > 0) && Date.now() < endBy) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(adapter.framesProduced).toBe(3000);
      expect(await gauge("voxedge_engine_state_bytes")).toBe(0);
      expect(await gauge('voxedge_engine_requests{state="paused"}')).toBe(0);
    } finally {
      socket.destroy();
      await server.stop();
    }
  });
});

/** A bare TCP socket upgraded to a WebSocket on the stream route, for clients that must control their reads. */
async function upgradedSocket(server: TestServer): Promise<Socket> {
  const port = Number(new URL(server.url).port);
  const socket = connect(port, "127.0.0.1");
  await new Promise((resolve) => socket.once("connect", resolve));
  socket.write(`GET /v1/audio/speech/stream HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString("base64")}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
  await new Promise((resolve) => socket.once("data", resolve));
  return socket;
}

/** The status code of the close frame that ends a server → client byte stream (unmasked frames), if it ends in one. */
function lastFrameCloseCode(stream: Buffer): number | undefined {
  let closeCode: number | undefined;
  for (let offset = 0; offset + 2 <= stream.length; ) {
    const opcode = stream[offset]! & 0x0f;
    let length = stream[offset + 1]! & 0x7f;
    let headerLength = 2;
    if (length === 126) [length, headerLength] = [stream.readUInt16BE(offset + 2), 4];
    else if (length === 127) [length, headerLength] = [Number(stream.readBigUInt64BE(offset + 2)), 10];
    closeCode = opcode === 0x8 && length >= 2 ? stream.readUInt16BE(offset + headerLength) : undefined;
    offset += headerLength + length;
  }
  return closeCode;
}

/** One client → server text frame (clients must mask, RFC 6455 §5.3). */
function maskedTextFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = randomBytes(4);
  const length = payload.length;
  const header = length < 126 ? Buffer.from([0x81, 0x80 | length]) : length < 65536 ? Buffer.from([0x81, 0x80 | 126, length >> 8, length & 0xff]) : (() => {
    const big = Buffer.alloc(10);
    big[0] = 0x81;
    big[1] = 0x80 | 127;
    big.writeBigUInt64BE(BigInt(length), 2);
    return big;
  })();
  const masked = Buffer.from(payload.map((byte, i) => byte ^ mask[i % 4]!));
  return Buffer.concat([header, mask, masked]);
}
