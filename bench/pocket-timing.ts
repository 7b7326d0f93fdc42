/** Shared by the Pocket TTS benches: per-stage timing of the generation stages and a synthetic voice. */
import type { GenerationStages } from "../src/models/pocket/loop.ts";

/** The benches' sentence: 30 words, as in ../shared/docs/anchors.md. */
export const BENCH_SENTENCE = "The old lighthouse keeper climbed the winding stairs every evening, lit the great lamp, and watched the ships pass safely through the narrow rocky channel below the cliffs before dawn.";

export type StageTimings = Record<"text" | "main" | "flow" | "decoder", number[]>;

/** Wraps each stage's session-running method to record its wall time in milliseconds. */
export function timeStages(stages: GenerationStages): { timedStages: GenerationStages; stageMs: StageTimings } {
  const stageMs: StageTimings = { text: [], main: [], flow: [], decoder: [] };
  const timed = <T extends object>(stage: T, method: keyof T & string, bucket: keyof StageTimings): T => {
    const original = (stage[method] as (...args: unknown[]) => Promise<unknown>).bind(stage);
    return new Proxy(stage, {
      get: (target, property, receiver) => {
        if (property !== method) {
          const value = Reflect.get(target, property, receiver);
          return typeof value === "function" ? value.bind(target) : value;
        }
        return async (...args: unknown[]) => {
          const start = performance.now();
          const result = await original(...args);
          stageMs[bucket].push(performance.now() - start);
          return result;
        };
      },
    });
  };
  const timedStages: GenerationStages = {
    textConditioner: timed(stages.textConditioner, "embed", "text"),
    flowLm: timed(stages.flowLm, "step", "main"),
    // The batched step over slots, as the server steps FlowLM, where the bundle has it.
    ...(stages.flowLmSlots ? { flowLmSlots: timed(stages.flowLmSlots, "step", "main") } : {}),
    flowHead: timed(stages.flowHead, "sample", "flow"),
    mimiDecoder: timed(stages.mimiDecoder, "decode", "decoder"),
  };
  return { timedStages, stageMs };
}

/** The benches' reference voice: a 180 Hz tone plus a slow ripple, the same for every runtime compared. */
export function syntheticVoice(seconds: number, rateHz: number): Float32Array {
  return Float32Array.from({ length: Math.round(seconds * rateHz) }, (_, i) => 0.3 * Math.sin((2 * Math.PI * 180 * i) / rateHz) + 0.05 * Math.sin(i * 0.37));
}
