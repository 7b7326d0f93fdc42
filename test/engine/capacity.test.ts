import { describe, expect, test } from "bun:test";
import { DEFAULT_REAL_TIME_TARGET, FIRST_AUDIO_HOLD_FRAMES, RealTimeCapacity } from "../../src/engine/capacity.ts";

const FRAME = 0.08;

describe("RealTimeCapacity", () => {
  test("cold, it admits what the prior keeps within the target", () => {
    const capacity = new RealTimeCapacity({ framePeriodSeconds: FRAME, target: 0.85, prior: { fixedSeconds: 0.006, perStreamSeconds: 0.008 } });
    // (0.85 * 80 - 6) / 8 = 7.75
    expect(capacity.streams).toBe(7);
    expect(capacity.admits(7)).toBe(true);
    expect(capacity.admits(8)).toBe(false);
    expect(capacity.admits(1)).toBe(true);
  });

  test("learns a faster machine's ticks and admits more", () => {
    const capacity = new RealTimeCapacity({ framePeriodSeconds: FRAME });
    const before = capacity.streams;
    for (let tick = 0; tick < 400; tick++) {
      const streams = 1 + (tick % 8);
      capacity.observeTick(streams, 0.002 + 0.003 * streams);
    }
    expect(capacity.fit.perStreamSeconds).toBeCloseTo(0.003, 3);
    expect(capacity.streams).toBeGreaterThan(before);
    // The measured line alone gives (0.55 * 80 - 2) / 3 = 14; the prior's pull costs a stream or two.
    expect(capacity.target).toBe(DEFAULT_REAL_TIME_TARGET);
    expect(capacity.streams).toBeGreaterThanOrEqual(12);
    expect(capacity.streams).toBeLessThanOrEqual(14);
  });

  test("learns a slower machine's ticks and admits fewer, even from ticks of one size", () => {
    const capacity = new RealTimeCapacity({ framePeriodSeconds: FRAME });
    const before = capacity.streams;
    for (let tick = 0; tick < 400; tick++) capacity.observeTick(6, 0.09);
    expect(capacity.predictTickSeconds(6)).toBeCloseTo(0.09, 2);
    expect(capacity.streams).toBeLessThan(before);
    expect(capacity.admits(6)).toBe(false);
  });

  test("decoders falling behind stop admission beyond one stream", () => {
    const capacity = new RealTimeCapacity({ framePeriodSeconds: FRAME });
    expect(capacity.admits(3)).toBe(true);
    // 4 frames (320 ms of audio) taking 600 ms to come back.
    for (let decode = 0; decode < 60; decode++) capacity.observeDecode(4, 0.6);
    expect(capacity.decodeLoad).toBeGreaterThan(1);
    expect(capacity.admits(3)).toBe(false);
    expect(capacity.admits(1)).toBe(true);
  });

  test("holds a new stream's first audio only when the predicted tick leaves little room", () => {
    const capacity = new RealTimeCapacity({ framePeriodSeconds: FRAME, prior: { fixedSeconds: 0.002, perStreamSeconds: 0.004 } });
    // 2 + 4 * 2 = 10 ms < 0.25 * 80
    expect(capacity.firstAudioHoldSeconds(2)).toBe(0);
    // 2 + 4 * 6 = 26 ms > 0.25 * 80
    expect(capacity.firstAudioHoldSeconds(6)).toBeCloseTo(FIRST_AUDIO_HOLD_FRAMES * FRAME, 6);
  });

  test("never holds a stream that runs alone, however slow the machine", () => {
    const capacity = new RealTimeCapacity({ framePeriodSeconds: FRAME, prior: { fixedSeconds: 0.03, perStreamSeconds: 0.04 } });
    expect(capacity.utilization(1)).toBeGreaterThan(0.25);
    expect(capacity.firstAudioHoldSeconds(1)).toBe(0);
    expect(capacity.firstAudioHoldSeconds(2)).toBeCloseTo(FIRST_AUDIO_HOLD_FRAMES * FRAME, 6);
  });

  test("ignores observations that measure nothing", () => {
    const capacity = new RealTimeCapacity({ framePeriodSeconds: FRAME });
    const fit = { ...capacity.fit };
    capacity.observeTick(0, 0.05);
    capacity.observeTick(3, Number.NaN);
    capacity.observeDecode(0, 1);
    expect(capacity.fit).toEqual(fit);
    expect(capacity.ticksSeen).toBe(0);
    expect(capacity.decodeLoad).toBe(0);
  });
});
