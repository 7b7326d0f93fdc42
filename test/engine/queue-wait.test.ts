/**
 * The expected wait for a running place: places turning over as running requests end, waiting ones taking
 * them in order; and request lengths learnt from the requests that ended.
 */
import { describe, expect, test } from "bun:test";
import { DEFAULT_START_PRIOR, expectedWaitSeconds, RequestLengths, StartLatency } from "../../src/engine/queue-wait.ts";

describe("expectedWaitSeconds", () => {
  test("a free place: no wait", () => {
    expect(expectedWaitSeconds(4, [3, 5], [])).toBe(0);
    expect(expectedWaitSeconds(4, [3, 5], [2])).toBe(0);
  });

  test("every place taken: the earliest end; waiting requests take the places before the new one", () => {
    expect(expectedWaitSeconds(2, [3, 5], [])).toBe(3);
    // The waiting one takes the place free at 3 and holds it to 3 + 4 = 7; the next frees at 5.
    expect(expectedWaitSeconds(2, [3, 5], [4])).toBe(5);
    // Two waiting: 3 → 3 + 1 = 4, then 4 → 4 + 10 = 14; the new one gets the place free at 5.
    expect(expectedWaitSeconds(2, [3, 5], [1, 10])).toBe(5);
    expect(expectedWaitSeconds(1, [2], [3, 3])).toBe(8);
  });

  test("more running than places (the capacity fell): a place frees once the surplus has ended", () => {
    expect(expectedWaitSeconds(2, [1, 2, 3, 9], [])).toBe(3);
  });

  test("no places: never", () => {
    expect(expectedWaitSeconds(0, [], [])).toBe(Infinity);
  });
});

describe("RequestLengths", () => {
  const text = "x".repeat(150); // 10 s of speech: 131 frames at 12.5 Hz with the half second

  test("before anything ends: the text's spoken length, at real time, within the request's cap", () => {
    const lengths = new RequestLengths(12.5);
    expect(lengths.expectedFrames({ job: { text }, framesMade: 0 })).toBe(132);
    expect(lengths.expectedFrames({ job: { text, maxNewTokens: 50 }, framesMade: 0 })).toBe(50);
    expect(lengths.remainingFrames({ job: { text }, framesMade: 100 })).toBe(32);
    expect(lengths.remainingFrames({ job: { text }, framesMade: 500 })).toBe(1);
    expect(lengths.secondsPerFrame).toBeCloseTo(0.08);
  });

  test("learns the frames requests make against their text, and their pace", () => {
    const lengths = new RequestLengths(12.5);
    for (let index = 0; index < 20; index++) lengths.observe({ job: { text }, framesMade: 264 }, 264, 264 * 0.04);
    expect(lengths.lengthRatio).toBeCloseTo(2, 1);
    expect(lengths.secondsPerFrame).toBeCloseTo(0.04, 2);
    expect(lengths.expectedFrames({ job: { text }, framesMade: 0 })).toBeGreaterThan(250);
  });

  test("a request its cap ended raises the figure but never lowers it: it would have gone on", () => {
    const lengths = new RequestLengths(12.5);
    for (let index = 0; index < 20; index++) lengths.observe({ job: { text, maxNewTokens: 20 }, framesMade: 20 }, 20, 1);
    expect(lengths.lengthRatio).toBe(1);
    for (let index = 0; index < 20; index++) lengths.observe({ job: { text, maxNewTokens: 275 }, framesMade: 275 }, 275, 10);
    expect(lengths.lengthRatio).toBeGreaterThan(2);
    // A model that ends by itself early lowers it.
    for (let index = 0; index < 20; index++) lengths.observe({ job: { text }, framesMade: 66 }, 66, 3);
    expect(lengths.lengthRatio).toBeCloseTo(0.5, 1);
  });
});

describe("StartLatency", () => {
  test("starts at its prior, then follows the starts measured: fixed seconds plus seconds a starter", () => {
    const starts = new StartLatency();
    expect(starts.predict(4)).toBeCloseTo(DEFAULT_START_PRIOR.fixedSeconds + 4 * DEFAULT_START_PRIOR.perStarterSeconds);
    for (let index = 0; index < 300; index++) {
      const starters = 1 + (index % 6);
      starts.observe(starters, 0.1 + 0.25 * starters);
    }
    expect(starts.fit.perStarterSeconds).toBeCloseTo(0.25, 1);
    expect(starts.predict(4)).toBeCloseTo(1.1, 1);
  });

  test("counts as measured only once starts beside others have been seen: a stream alone says nothing of a crowd", () => {
    const starts = new StartLatency();
    for (let index = 0; index < 10; index++) starts.observe(1, 0.1);
    expect(starts.measured).toBe(false);
    for (let index = 0; index < 3; index++) starts.observe(2 + index, 0.4);
    expect(starts.measured).toBe(true);
  });

  test("ignores what is no measurement", () => {
    const starts = new StartLatency();
    starts.observe(0, 1);
    starts.observe(2, Number.NaN);
    starts.observe(2, -1);
    expect(starts.fit).toEqual(DEFAULT_START_PRIOR);
  });
});
