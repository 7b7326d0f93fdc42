import { afterEach, describe, expect, test } from "bun:test";
import { badRequest } from "../../src/api/errors.ts";
import { EngineFullError } from "../../src/engine/core.ts";
import { silentLogger } from "../../src/log/logger.ts";
import type { PreparedSpeech, StartedSpeech } from "../../src/speech/service.ts";
import { TextStream, type TextStreamEnding, type TextStreamError, type TextStreamOptions } from "../../src/speech/text-stream.ts";
import { eventually } from "../support/eventually.ts";

/** What a sentence's speech does: two pieces of audio, or a refusal before any. */
type Behaviour = { kind: "speaks" } | { kind: "throws"; error: unknown } | { kind: "waits"; release: Promise<void> };

/** A stand-in for a speech start: each sentence yields two 4-byte pieces, 0.5 s of audio in all. */
function startedSpeech(text: string, release?: Promise<void>): StartedSpeech {
  let settle: (end: Awaited<StartedSpeech["done"]>) => void = () => {};
  const done = new Promise<Awaited<StartedSpeech["done"]>>((resolve) => (settle = resolve));
  async function* audio(): AsyncGenerator<Uint8Array, void, undefined> {
    await release;
    yield new Uint8Array(4);
    yield new Uint8Array(4);
    settle({ finishReason: "stop", audioSeconds: 0.5, usage: { input_tokens: text.length, output_tokens: 2, total_tokens: text.length + 2, input_token_details: { text_tokens: text.length, audio_tokens: 0 } } });
  }
  const prepared = { responseFormat: "pcm", outputSampleRateHz: 24000, ignoredFields: [] } as unknown as PreparedSpeech;
  return { prepared, audio: audio(), done };
}

interface Harness {
  stream: TextStream<string>;
  /** What the stream told, one line per event. */
  log: string[];
  /** The settings each sentence was spoken with, in order. */
  spokenWith: string[];
  ending(): TextStreamEnding | undefined;
  failures: TextStreamError[];
  setBufferedBytes(bytes: number): void;
}

const streams: TextStream<string>[] = [];
afterEach(() => {
  for (const stream of streams.splice(0)) stream.closed();
});

function open(behaviour: (text: string) => Behaviour = () => ({ kind: "speaks" }), overrides: Partial<TextStreamOptions<string>> = {}): Harness {
  const log: string[] = [];
  const spokenWith: string[] = [];
  const failures: TextStreamError[] = [];
  let ending: TextStreamEnding | undefined;
  let bufferedBytes = 0;
  const stream = new TextStream<string>(
    {
      sentenceStart: (sentence) => log.push(`start ${sentence.utteranceIndex}.${sentence.sentenceIndex} ${sentence.text}`),
      audio: (bytes, sentence) => log.push(`audio ${sentence.sentenceIndex} ${bytes.byteLength}`),
      sentenceDone: (sentence, end) => log.push(`done ${sentence.sentenceIndex} ${end.totalBytes} bytes ${end.audioSeconds} s ${end.finishReason}`),
      sentenceFailed: (sentence, error, sentBytes) => {
        failures.push(error);
        log.push(`failed ${sentence.sentenceIndex} ${error.kind} after ${sentBytes} bytes`);
      },
      utteranceDone: (utteranceIndex, totalSentences) => log.push(`utterance ${utteranceIndex} of ${totalSentences}`),
      ended: (how) => {
        ending = how;
        log.push(`ended ${how.kind}`);
      },
      bufferedBytes: () => bufferedBytes,
    },
    {
      speak: async (text, settings) => {
        spokenWith.push(settings);
        const what = behaviour(text);
        if (what.kind === "throws") throw what.error;
        return startedSpeech(text, what.kind === "waits" ? what.release : undefined);
      },
      logger: silentLogger,
      configTimeoutMs: 10_000,
      idleTimeoutMs: 30_000,
      maxQueuedSegments: 100,
      maxQueuedChars: 10_000,
      maxInputChars: 1000,
      maxInboxBytes: 64 * 1024,
      stallTimeoutMs: 60_000,
      ...overrides,
    },
  );
  streams.push(stream);
  return { stream, log, spokenWith, ending: () => ending, failures, setBufferedBytes: (bytes) => (bufferedBytes = bytes) };
}

describe("ordering", () => {
  test("sentences are spoken one at a time in arrival order, each start, audio and done together, then the utterance's end", async () => {
    const { stream, log } = open();
    stream.configure("a");
    stream.text("One. Two. Thr");
    stream.text("ee");
    stream.end();
    await eventually("the utterance done", () => log.includes("utterance 0 of 3"));
    expect(log).toEqual([
      "start 0.0 One.", "audio 0 4", "audio 0 4", "done 0 8 bytes 0.5 s stop",
      "start 0.1 Two.", "audio 1 4", "audio 1 4", "done 1 8 bytes 0.5 s stop",
      "start 0.2 Three", "audio 2 4", "audio 2 4", "done 2 8 bytes 0.5 s stop",
      "utterance 0 of 3",
    ]);
  });

  test("a new configuration applies to text that arrives after it; text buffered before keeps its settings", async () => {
    const { stream, log, spokenWith } = open();
    stream.configure("first");
    stream.text("Alpha one. Beta two. Gamma");
    stream.configure("second");
    stream.text(" three. Delta four.");
    stream.end();
    await eventually("the utterance done", () => log.some((line) => line.startsWith("utterance 0")));
    expect(log.filter((line) => line.startsWith("start"))).toEqual(["start 0.0 Alpha one.", "start 0.1 Beta two.", "start 0.2 Gamma three.", "start 0.3 Delta four."]);
    expect(spokenWith).toEqual(["first", "first", "second", "second"]);
  });

  test("a new granularity re-cuts the text still buffered, which keeps its place in line", async () => {
    const { stream, log } = open();
    stream.configure("a");
    stream.text("Alpha one. Beta two, and");
    stream.configure("b", "clause");
    stream.text(" more, then the end.");
    stream.end();
    await eventually("the utterance done", () => log.some((line) => line.startsWith("utterance 0")));
    expect(log.filter((line) => line.startsWith("start")).map((line) => line.slice("start 0.0 ".length)).join(" ")).toBe("Alpha one. Beta two, and more, then the end.");
  });

  test("end() numbers utterances from 0 and restarts sentence numbers; sentence() passes the segmenter by", async () => {
    const { stream, log } = open();
    stream.configure("a");
    expect(stream.nextPosition).toEqual({ utteranceIndex: 0, sentenceIndex: 0 });
    stream.sentence("no full stop here, still one sentence");
    stream.end();
    expect(stream.nextPosition).toEqual({ utteranceIndex: 1, sentenceIndex: 0 });
    stream.text("Next.");
    stream.end();
    await eventually("two utterances done", () => log.includes("utterance 1 of 1"));
    expect(log.filter((line) => line.startsWith("start") || line.startsWith("utterance"))).toEqual(["start 0.0 no full stop here, still one sentence", "utterance 0 of 1", "start 1.0 Next.", "utterance 1 of 1"]);
  });
});

describe("spoken", () => {
  test("spoken() resolves once the queue is empty, at once when it is", async () => {
    const { stream, log } = open();
    stream.configure("a");
    await stream.spoken();
    stream.text("Alpha one. Beta two. ");
    await stream.spoken();
    expect(log.filter((line) => line.startsWith("done"))).toEqual(["done 0 8 bytes 0.5 s stop", "done 1 8 bytes 0.5 s stop"]);
  });
});

describe("caps", () => {
  test("segments past maxQueuedSegments break the stream as invalid, freeing the queue", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    const { stream, ending } = open(() => ({ kind: "waits", release: held }), { maxQueuedSegments: 2 });
    stream.configure("a");
    stream.text("Alpha one. Beta two. Gamma three. ");
    await Bun.sleep(0);
    // The first is being spoken; two wait: the cap. One more is too many.
    expect(stream.queued).toEqual({ segments: 2, utteranceEnds: 0, chars: "Beta two.Gamma three.".length });
    stream.text("Delta four. ");
    expect(ending()).toEqual({ kind: "broken", error: { kind: "invalid", message: expect.stringContaining("at most 2 segments") } });
    expect(stream.queued).toEqual({ segments: 0, utteranceEnds: 0, chars: 0 });
    expect(stream.accepting).toBe(false);
    release();
  });

  test("characters past maxQueuedChars break the stream", () => {
    const { stream, ending } = open(undefined, { maxQueuedChars: 10 });
    stream.configure("a");
    stream.text("0123456789");
    expect(ending()).toBeUndefined();
    stream.text("x");
    expect(ending()).toMatchObject({ kind: "broken", error: { kind: "invalid" } });
  });

  test("text buffered without a segment end past maxInputChars is too_big", () => {
    const { stream, ending } = open(undefined, { maxInputChars: 20 });
    stream.configure("a", "none");
    stream.text("a".repeat(20));
    expect(ending()).toBeUndefined();
    stream.text("b");
    expect(ending()).toMatchObject({ kind: "broken", error: { kind: "too_big" } });
  });

  test("messages waiting past maxInboxBytes break the stream; those within are handled in order", async () => {
    const { stream, ending } = open(undefined, { maxInboxBytes: 4096 });
    const handled: number[] = [];
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    stream.handleInOrder(1000, () => held);
    for (let index = 0; index < 3; index++) stream.handleInOrder(500, () => void handled.push(index));
    expect(ending()).toBeUndefined();
    release();
    await eventually("the waiting messages handled", () => handled.length === 3);
    expect(handled).toEqual([0, 1, 2]);
    stream.handleInOrder(4096, () => held);
    expect(ending()).toMatchObject({ kind: "broken", error: { kind: "invalid", message: expect.stringContaining("4096 bytes") } });
  });
});

describe("errors", () => {
  test("a refused sentence (ApiError) is invalid, a full engine at_capacity with its retry, anything else failed; the stream goes on", async () => {
    const refusals: Record<string, unknown> = { "Bad.": badRequest("no such voice", "voice"), "Full.": new EngineFullError(3, { maxStreams: 1, maxQueue: 0 }), "Broken.": new Error("boom") };
    const { stream, log, failures, ending } = open((text) => (text in refusals ? { kind: "throws", error: refusals[text] } : { kind: "speaks" }));
    stream.configure("a");
    stream.text("Bad. Full. Broken. Fine.");
    stream.end();
    await eventually("the utterance done", () => log.includes("utterance 0 of 4"));
    expect(failures).toEqual([
      { kind: "invalid", message: "no such voice", cause: refusals["Bad."] },
      { kind: "at_capacity", message: expect.stringContaining("retry after 3 s"), retryAfterSeconds: 3, cause: refusals["Full."] },
      { kind: "failed", message: "speech generation failed", cause: refusals["Broken."] },
    ]);
    expect(log).toContain("done 3 8 bytes 0.5 s stop");
    expect(ending()).toBeUndefined();
  });

  test("a handler that throws is our fault: the stream breaks with an internal error", async () => {
    const { stream, ending } = open();
    stream.handleInOrder(10, () => {
      throw new Error("bug");
    });
    await eventually("the stream broken", () => ending());
    expect(ending()).toEqual({ kind: "broken", error: { kind: "invalid", message: "internal error" } });
  });
});

describe("close and drain", () => {
  test("close() finishes what end() flushed, drops unflushed text, then ends finished; later input is not accepted", async () => {
    const { stream, log } = open();
    stream.configure("a");
    stream.text("One. Two. Never flushed");
    stream.end();
    stream.text("Dropped, never flushed");
    stream.close();
    expect(stream.accepting).toBe(false);
    await eventually("ended", () => log.includes("ended finished"));
    expect(log.filter((line) => line.startsWith("start"))).toEqual(["start 0.0 One.", "start 0.1 Two.", "start 0.2 Never flushed"]);
    expect(log.at(-1)).toBe("ended finished");
  });

  test("drain() while speaking: the queued sentences are finished, then the stream ends going_away", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    const { stream, log } = open(() => ({ kind: "waits", release: held }));
    stream.configure("a");
    stream.text("One. Two. ");
    await Bun.sleep(0);
    stream.drain();
    stream.handleInOrder(10, () => void log.push("handled after drain"));
    release();
    await eventually("ended", () => log.includes("ended going_away"));
    expect(log.filter((line) => line.startsWith("done") || line.startsWith("ended") || line.startsWith("handled"))).toEqual(["done 0 8 bytes 0.5 s stop", "done 1 8 bytes 0.5 s stop", "ended going_away"]);
  });

  test("drain() with nothing to do ends at once", () => {
    const { stream, ending } = open();
    stream.configure("a");
    stream.drain();
    expect(ending()).toEqual({ kind: "going_away" });
    expect(stream.ended).toBe(true);
  });

  test("closed() by the transport stops the speech and tells nothing", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    const { stream, log } = open(() => ({ kind: "waits", release: held }));
    stream.configure("a");
    stream.text("One. Two. ");
    await Bun.sleep(0);
    stream.closed();
    expect(stream.signal.aborted).toBe(true);
    release();
    await Bun.sleep(10);
    expect(log).toEqual(["start 0.0 One."]);
  });
});

describe("timers and flow control", () => {
  test("no settings within configTimeoutMs: the stream ends unconfigured", async () => {
    const { ending } = open(undefined, { configTimeoutMs: 20 });
    await eventually("ended", () => ending());
    expect(ending()).toEqual({ kind: "unconfigured" });
  });

  test("idle: activity restarts the timeout, speaking is never idle, and silence after it ends the stream", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    // Activity every 50 ms for 600 ms against a 500 ms timeout: the quiet gaps are a tenth of the timeout, so
    // a busy machine that stretches a sleep several times over still never looks idle.
    const { stream, ending } = open(() => ({ kind: "waits", release: held }), { idleTimeoutMs: 500 });
    stream.configure("a");
    for (let index = 0; index < 12; index++) {
      await Bun.sleep(50);
      stream.activity();
    }
    expect(ending()).toBeUndefined();
    stream.text("Long. ");
    await Bun.sleep(750);
    expect(ending()).toBeUndefined();
    release();
    await eventually("ended", () => ending());
    expect(ending()).toEqual({ kind: "idle", idleSeconds: 1 });
  });

  test("a client that takes nothing while audio waits is stalled after stallTimeoutMs", async () => {
    const { stream, ending, setBufferedBytes, log } = open(undefined, { stallTimeoutMs: 50 });
    setBufferedBytes(64 * 1024 * 1024);
    stream.configure("a");
    stream.text("One. ");
    await eventually("ended", () => ending());
    expect(ending()).toEqual({ kind: "stalled" });
    expect(log.filter((line) => line.startsWith("audio"))).toEqual([]);
  });
});
