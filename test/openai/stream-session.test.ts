import { afterEach, describe, expect, test } from "bun:test";
import type { SynthesisJob } from "../../src/models/contract.ts";
import { silentLogger } from "../../src/log/logger.ts";
import { SEND_HIGH_WATER_BYTES } from "../../src/async/drain.ts";
import { SpeechStreamSession, type StreamSessionOptions, type StreamSink } from "../../src/openai/stream-session.ts";
import { CLOSE_NORMAL, CLOSE_POLICY, ERRONEOUS_MESSAGE_BURST } from "../../src/speech/stream-rules.ts";
import { testApp } from "../support/server.ts";
import { ToneModel } from "../support/tone-model.ts";
import { eventually } from "../support/eventually.ts";

type Sent = { kind: "json"; value: any } | { kind: "binary"; byteLength: number };

/**
 * A socket stand-in. `unreadBytes` plays the socket's send buffer. By default the client keeps up (nothing
 * stays unread); with `clientKeepsUp` false every binary message adds to it and only `read` takes from it, so
 * a test decides exactly how fast (or whether) its client reads.
 */
class FakeSink implements StreamSink {
  readonly sent: Sent[] = [];
  closeCode: number | undefined;
  closeReason = "";
  clientKeepsUp = true;
  unreadBytes = 0;
  readonly #closedWaiters: (() => void)[] = [];

  sendJson(message: Record<string, unknown>): void {
    // The route drops sends on a socket that is no longer open; so does this.
    if (this.closeCode === undefined) this.sent.push({ kind: "json", value: message });
  }
  sendBinary(bytes: Uint8Array): void {
    if (this.closeCode !== undefined) return;
    this.sent.push({ kind: "binary", byteLength: bytes.byteLength });
    if (!this.clientKeepsUp) this.unreadBytes += bytes.byteLength;
  }
  bufferedBytes(): number {
    return this.unreadBytes;
  }
  close(code: number, reason: string): void {
    if (this.closeCode !== undefined) return;
    this.closeCode = code;
    this.closeReason = reason;
    for (const wake of this.#closedWaiters.splice(0)) wake();
  }
  read(byteCount: number): void {
    this.unreadBytes = Math.max(0, this.unreadBytes - byteCount);
  }
  json(): any[] {
    return this.sent.flatMap((entry) => (entry.kind === "json" ? [entry.value] : []));
  }
  async waitForClose(timeoutMs = 10_000): Promise<number> {
    if (this.closeCode === undefined) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`the session did not close; sent ${JSON.stringify(this.json().slice(-3))}`)), timeoutMs);
        this.#closedWaiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.closeCode!;
  }
  async waitForJson(type: string, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.json().some((message) => message.type === type)) {
      if (this.closeCode !== undefined) throw new Error(`closed (${this.closeCode} ${this.closeReason}) before ${type}`);
      if (Date.now() > deadline) throw new Error(`no ${type}; sent ${JSON.stringify(this.json().slice(-3))}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
}

/** Holds every synthesis until `release()`: the first segment stays "being spoken", the rest wait in the queue. */
class GatedToneModel extends ToneModel {
  readonly #gate = Promise.withResolvers<void>();
  release(): void {
    this.#gate.resolve();
  }
  override async *synthesize(job: SynthesisJob) {
    const aborted = new Promise<void>((resolve) => job.signal.addEventListener("abort", () => resolve(), { once: true }));
    await Promise.race([this.#gate.promise, aborted]);
    yield* super.synthesize(job);
  }
}


const sessions: SpeechStreamSession[] = [];
afterEach(() => {
  // A session a failing test left running must not keep generating into the next test.
  for (const session of sessions.splice(0)) session.closed();
});

async function openSession(adapter: ToneModel, overrides: Partial<StreamSessionOptions> = {}) {
  const { service, openai } = await testApp(adapter);
  const sink = new FakeSink();
  const session = new SpeechStreamSession(sink, {
    service,
    sentences: openai,
    logger: silentLogger,
    configTimeoutMs: 10_000,
    idleTimeoutMs: 30_000,
    maxQueuedSegments: 1000,
    maxQueuedChars: 1_000_000,
    stallTimeoutMs: 60_000,
    ...overrides,
  });
  sessions.push(session);
  const send = (message: Record<string, unknown>) => session.receive(JSON.stringify(message));
  return { session, sink, send };
}

/** The largest input.text of "Hi. " that fits the 128 KiB message limit: 32 760 one-word sentences. */
const FLOOD_MESSAGE = JSON.stringify({ type: "input.text", text: "Hi. ".repeat(Math.floor((128 * 1024 - 30) / 4)) });

describe("queue caps", () => {
  test("100 messages of 128 KiB of 'Hi. ': error and close 1008, everything queued freed, at most one sentence started", async () => {
    expect(Buffer.byteLength(FLOOD_MESSAGE)).toBeLessThanOrEqual(128 * 1024);
    const adapter = new ToneModel();
    const { session, sink, send } = await openSession(adapter);
    send({ type: "session.config", stream_audio: true });
    // Once the configuration is in force, and one message a turn as a socket delivers them, so none waits in the inbox.
    await Bun.sleep(20);
    for (let i = 0; i < 100 && sink.closeCode === undefined; i++) {
      session.receive(FLOOD_MESSAGE);
      await Bun.sleep(0);
    }
    expect(await sink.waitForClose()).toBe(CLOSE_POLICY);
    const errors = sink.json().filter((message) => message.type === "error");
    expect(errors).toHaveLength(1);
    expect(errors[0].message).toContain("at most 1000 segments, 1000 utterance ends and 1000000 characters");
    expect(session.queued).toEqual({ segments: 0, utteranceEnds: 0, chars: 0 });
    // The cap trips inside the first message: one sentence went to the model, the 3.2 million others never did.
    expect(adapter.jobs.length).toBeLessThanOrEqual(1);
  });

  test("segments at the boundary: 5 waiting behind the one being spoken are accepted, a 6th is refused", async () => {
    const adapter = new GatedToneModel();
    const { session, sink, send } = await openSession(adapter, { maxQueuedSegments: 5 });
    send({ type: "session.config", stream_audio: true });
    send({ type: "input.text", text: "One. Two. Three. Four. Five. Six. " });
    await eventually("five segments queued, or the socket closed", () => session.queued?.segments === 5 || sink.closeCode !== undefined);
    expect(sink.closeCode).toBeUndefined();
    expect(session.queued).toEqual({ segments: 5, utteranceEnds: 0, chars: "Two.Three.Four.Five.Six.".length });

    send({ type: "input.text", text: "Seven. " });
    expect(await sink.waitForClose()).toBe(CLOSE_POLICY);
    expect(sink.json().at(-1)).toMatchObject({ type: "error", message: expect.stringContaining("at most 5 segments") });
    expect(session.queued).toEqual({ segments: 0, utteranceEnds: 0, chars: 0 });
  });

  test("the cap bounds what waits, not what a session may say: 60 sentences in batches of 6 paced by audio.done all play, a 7th at once is refused", async () => {
    const adapter = new ToneModel();
    const { session, sink, send } = await openSession(adapter, { maxQueuedSegments: 5 });
    const audioDone = () => sink.json().filter((message) => message.type === "audio.done" && message.error === false).length;
    send({ type: "session.config", stream_audio: true });
    for (let batch = 0; batch < 10; batch++) {
      send({ type: "input.text", text: Array.from({ length: 6 }, (_, index) => `Sentence ${batch * 6 + index + 1} of sixty.`).join(" ") + " " });
      await eventually("this batch's audio done, or the socket closed", () => audioDone() === (batch + 1) * 6 || sink.closeCode !== undefined);
      expect(sink.closeCode).toBeUndefined();
    }
    send({ type: "input.done" });
    await sink.waitForJson("session.done");
    expect(sink.json().at(-1)).toEqual({ type: "session.done", utterance_index: 0, total_sentences: 60 });
    expect(session.queued).toEqual({ segments: 0, utteranceEnds: 0, chars: 0 });

    send({ type: "input.text", text: "One. Two. Three. Four. Five. Six. Seven. " });
    expect(await sink.waitForClose()).toBe(CLOSE_POLICY);
    expect(audioDone()).toBe(60);
  });

  test("characters at the boundary: exactly the cap waiting (queued segments plus the unfinished one) is accepted, one more is refused", async () => {
    const adapter = new GatedToneModel();
    const { session, sink, send } = await openSession(adapter, { maxQueuedChars: 4096 });
    send({ type: "session.config", stream_audio: true });
    // 16 sentences of 250 characters wait behind the first (4000), then 96 characters of an unfinished one.
    const sentences = Array.from({ length: 17 }, (_, index) => `${String.fromCharCode(65 + index)}${"x".repeat(248)}.`);
    send({ type: "input.text", text: `${sentences.join(" ")} ` });
    send({ type: "input.text", text: `Tail${" word".repeat(19)}`.slice(0, 96) });
    await eventually("sixteen segments queued, or the socket closed", () => session.queued?.segments === 16 || sink.closeCode !== undefined);
    expect(sink.closeCode).toBeUndefined();
    expect(session.queued).toEqual({ segments: 16, utteranceEnds: 0, chars: 4000 });

    send({ type: "input.text", text: "s" });
    expect(await sink.waitForClose()).toBe(CLOSE_POLICY);
    expect(sink.json().at(-1).message).toContain("4096 characters");
    expect(session.queued).toEqual({ segments: 0, utteranceEnds: 0, chars: 0 });
  });
});

describe("a client that stops reading", () => {
  test("reads nothing while audio waits for stallTimeoutMs: close 1008, its generation aborted, its queue freed", async () => {
    const adapter = new ToneModel();
    const { session, sink, send } = await openSession(adapter, { stallTimeoutMs: 200 });
    // The socket's buffer is already past the high-water mark and the client never reads it.
    sink.clientKeepsUp = false;
    sink.unreadBytes = SEND_HIGH_WATER_BYTES + 1;
    send({ type: "session.config", stream_audio: true });
    send({ type: "input.text", text: "The first sentence waits for a reader. The second never gets its turn. " });
    send({ type: "input.done" });
    expect(await sink.waitForClose()).toBe(CLOSE_POLICY);
    expect(sink.closeReason).toContain("stopped reading");
    expect(adapter.jobs).toHaveLength(1);
    expect(adapter.jobs[0]!.signal.aborted).toBe(true);
    expect(session.queued).toEqual({ segments: 0, utteranceEnds: 0, chars: 0 });
  });

  test("a slow but steady reader is never cut, even while its backlog stays above the high-water mark for longer than the timeout", async () => {
    const adapter = new ToneModel();
    const { sink, send } = await openSession(adapter, { stallTimeoutMs: 300 });
    // A backlog of 1 MiB + 256 KiB (a large file sent earlier) read at 4 KiB every 10 ms: ~0.64 s above the mark.
    sink.clientKeepsUp = false;
    sink.unreadBytes = SEND_HIGH_WATER_BYTES + 256 * 1024;
    const reader = setInterval(() => sink.read(4096), 10);
    try {
      send({ type: "session.config", stream_audio: true });
      send({ type: "input.text", text: "A slow reader still hears this. And this one too. " });
      send({ type: "input.done" });
      await sink.waitForJson("session.done");
    } finally {
      clearInterval(reader);
    }
    expect(sink.closeCode).toBeUndefined();
    expect(sink.json().filter((message) => message.type === "audio.done" && message.error === false)).toHaveLength(2);
  });
});

describe("session.close", () => {
  test("right after input.done: every flushed sentence and the session.done are delivered, then close 1000; later messages are ignored", async () => {
    const adapter = new ToneModel({ frameDelayMs: 2 });
    const { session, sink, send } = await openSession(adapter);
    send({ type: "session.config", stream_audio: true });
    send({ type: "input.text", text: "First of three. Second of three. Third of three" });
    send({ type: "input.done" });
    send({ type: "input.text", text: "Never flushed, so never spoken" });
    send({ type: "session.close" });
    send({ type: "input.text", text: "Sent after the close. " });
    send({ type: "input.done" });
    expect(await sink.waitForClose()).toBe(CLOSE_NORMAL);
    const messages = sink.json();
    expect(messages.filter((message) => message.type === "audio.start").map((message) => message.sentence_text)).toEqual(["First of three.", "Second of three.", "Third of three"]);
    expect(messages.filter((message) => message.type === "audio.done").map((message) => message.error)).toEqual([false, false, false]);
    expect(messages.at(-1)).toEqual({ type: "session.done", utterance_index: 0, total_sentences: 3 });
    expect(adapter.jobs.map((job) => job.text)).toEqual(["First of three.", "Second of three.", "Third of three"]);
    expect(session.queued).toEqual({ segments: 0, utteranceEnds: 0, chars: 0 });
  });
});

describe("floods that bypassed the caps", () => {
  test("empty input.done on a socket that reads nothing: the session.done messages wait within the cap, then close 1008", async () => {
    const adapter = new ToneModel();
    const { session, sink, send } = await openSession(adapter);
    send({ type: "session.config", stream_audio: true });
    await Bun.sleep(20);
    // The client's socket is full: nothing more may be sent to it.
    sink.unreadBytes = 8 * 1024 * 1024;
    for (let i = 0; i < 5000 && sink.closeCode === undefined; i++) send({ type: "input.done" });
    expect(await sink.waitForClose()).toBe(CLOSE_POLICY);
    expect(sink.json().filter((message) => message.type === "session.done").length).toBeLessThanOrEqual(1);
    expect(session.queued).toEqual({ segments: 0, utteranceEnds: 0, chars: 0 });
  });

  test("messages sent while session.config is still being checked wait within 8 MiB of inbox, then close 1008", async () => {
    const adapter = new ToneModel();
    const { session, sink } = await openSession(adapter);
    session.receive(JSON.stringify({ type: "session.config", stream_audio: true }));
    for (let i = 0; i < 100; i++) session.receive(FLOOD_MESSAGE);
    expect(await sink.waitForClose()).toBe(CLOSE_POLICY);
    const errors = sink.json().filter((message) => message.type === "error");
    expect(errors).toHaveLength(1);
    expect(errors[0].message).toContain("waiting to be handled");
  });
});

describe("erroneous messages", () => {
  test("a flood of messages of an unknown type: each skipped with an error until the budget is spent, then close 1008", async () => {
    const { sink, send } = await openSession(new ToneModel());
    send({ type: "session.config", stream_audio: true });
    for (let i = 0; i < 10_000 && sink.closeCode === undefined; i++) {
      send({ type: "nope" });
      if (i % 100 === 0) await Bun.sleep(0);
    }
    expect(await sink.waitForClose()).toBe(CLOSE_POLICY);
    expect(sink.closeReason).toContain("too many erroneous messages");
    // The burst, what refilled while the test ran, and the closing error.
    expect(sink.json().length).toBeLessThanOrEqual(ERRONEOUS_MESSAGE_BURST + 3);
  });
});

describe("keepAlive", () => {
  test("restarts the idle timeout: a session kept alive past it stays open, and then idles out", async () => {
    // Kept alive every 100 ms for 2.5 times the timeout: a loop held up to 900 ms on a loaded machine still passes.
    const { session, sink, send } = await openSession(new ToneModel(), { idleTimeoutMs: 1000 });
    send({ type: "session.config", stream_audio: true });
    await Bun.sleep(20);
    for (let i = 0; i < 25; i++) {
      await Bun.sleep(100);
      session.keepAlive();
    }
    expect(sink.closeCode).toBeUndefined();
    expect(await sink.waitForClose()).toBe(CLOSE_NORMAL);
    expect(sink.closeReason).toBe("idle timeout");
  });
});
