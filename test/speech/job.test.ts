import { describe, expect, test } from "bun:test";
import { utteranceJob, utteranceJobInSlices } from "../../src/speech/job.ts";
import { DEFAULT_MARKDOWN_READING } from "../../src/text/markdown.ts";
import { maxFramesForInput } from "../../src/engine/request.ts";
import { ApiError } from "../../src/api/errors.ts";
import { ToneModel } from "../support/tone-model.ts";

const model = new ToneModel();

describe("utteranceJob", () => {
  test("the model reads the text normalized, and the frame cap comes from the text as sent", () => {
    const text = "It costs $19.99 on 03/04/2026.";
    const { job, textDropped } = utteranceJob(model, { text, builtInVoice: "high", seed: 7n, extraParams: { temperature: 0.5 } });
    expect(job.text).not.toContain("$");
    expect(job.text).toContain("nineteen");
    expect(job).toMatchObject({ voice: "high", seed: 7n, extraParams: { temperature: 0.5 }, language: "Auto" });
    expect(job.maxNewTokens).toBe(maxFramesForInput(text.length, model.capabilities.framesPerSecond));
    expect(textDropped).toBe(false);
    expect(utteranceJob(model, { text, normalization: "off", extraParams: {} }).job.text).toBe(text);
  });

  test("a caller's own frame cap applies only below the input's", () => {
    const text = "Short.";
    const cap = maxFramesForInput(text.length, model.capabilities.framesPerSecond);
    expect(utteranceJob(model, { text, maxNewTokens: 3, extraParams: {} }).job.maxNewTokens).toBe(3);
    expect(utteranceJob(model, { text, maxNewTokens: cap + 100, extraParams: {} }).job.maxNewTokens).toBe(cap);
  });

  test("without a built-in voice (a cloned one, or none named) the job names the model's default voice", () => {
    expect(utteranceJob(model, { text: "Hi.", extraParams: {} }).job.voice).toBe(model.capabilities.defaultVoice);
  });

  test("instructions reach only a model that follows them", () => {
    expect(utteranceJob(model, { text: "Hi.", instructions: "Whisper.", extraParams: {} }).job.instructions).toBeUndefined();
    const instructed = new ToneModel();
    instructed.capabilities.supportsInstructions = true;
    expect(utteranceJob(instructed, { text: "Hi.", instructions: "  Whisper. ", extraParams: {} }).job.instructions).toBe("Whisper.");
  });

  test("text the model can read none of is a 400 naming input; text it reads part of says so", () => {
    const latinOnly = Object.assign(new ToneModel(), {
      readableText: (text: string) => {
        const kept = text.replace(/[^\p{Script=Latin}\p{N}\s.,!?]/gu, "");
        return { text: kept, dropped: kept !== text };
      },
    });
    let refused: unknown;
    try {
      utteranceJob(latinOnly, { text: "你好", extraParams: {} });
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({ status: 400, param: "input" });
    expect(utteranceJob(latinOnly, { text: "Hello 你好", extraParams: {} })).toMatchObject({ job: { text: "Hello " }, textDropped: true });
  });
});

describe("utteranceJobInSlices", () => {
  const compact = (text: string) => text.replace(/\s+/g, " ").trim();
  const answer = (length: number) => {
    const unit = "## Costs\n- It costs **$19.99** on 03/04/2026 at 10:30 pm, see [docs](https://x.y).\n| a | 1,234 |\n";
    return unit.repeat(Math.ceil(length / unit.length)).slice(0, length);
  };

  test("a long text reads as utteranceJob reads it", async () => {
    for (const text of ["Short, $5.", "It costs $19.99 on 03/04/2026. ".repeat(400), answer(20_000)]) {
      const request = { text, markdown: DEFAULT_MARKDOWN_READING, extraParams: {} };
      expect(compact((await utteranceJobInSlices(model, request)).job.text)).toBe(compact(utteranceJob(model, request).job.text));
    }
  });

  test("the event loop turns while 100,000 characters are read: a zero-delay timer fires many times before the job is ready", async () => {
    let turns = 0;
    const timer = setInterval(() => turns++, 0);
    try {
      await utteranceJobInSlices(model, { text: answer(100_000), markdown: DEFAULT_MARKDOWN_READING, extraParams: {} });
    } finally {
      clearInterval(timer);
    }
    expect(turns).toBeGreaterThanOrEqual(10);
  });
});

