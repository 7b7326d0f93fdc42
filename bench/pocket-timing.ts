/** Shared by the Pocket TTS benches: per-stage timing of a generation run and a synthetic voice. */
import type { TickListener } from "../src/engine/generate.ts";

/** The benches' sentence: 30 words, as in docs/anchors.md. */
export const BENCH_SENTENCE = "The old lighthouse keeper climbed the winding stairs every evening, lit the great lamp, and watched the ships pass safely through the narrow rocky channel below the cliffs before dawn.";

/**
 * Milliseconds per runner stage, summed over a run's plans (the engine's tick listener, engine/generate.ts): flow_lm (FlowLM's AR steps),
 * flow_head, decode (each decode as seen from the main thread: with a worker it overlaps sampling) and
 * prefill (voice and text chunks).
 */
export class StageClock {
  readonly ms: Record<string, number> = {};
  readonly onTick: TickListener = (stageSeconds) => {
    for (const [stage, seconds] of Object.entries(stageSeconds)) this.ms[stage] = (this.ms[stage] ?? 0) + seconds * 1000;
  };

  /** Starts a run afresh. */
  reset(): void {
    for (const stage of Object.keys(this.ms)) delete this.ms[stage];
  }

  /** A stage's milliseconds per frame over `frames` frames. */
  perFrame(stage: "flow_lm" | "flow_head" | "decode" | "prefill", frames: number): number {
    return (this.ms[stage] ?? 0) / frames;
  }
}

/** The benches' reference voice: a 180 Hz tone plus a slow ripple, the same for every runtime compared. */
export function syntheticVoice(seconds: number, rateHz: number): Float32Array {
  return Float32Array.from({ length: Math.round(seconds * rateHz) }, (_, i) => 0.3 * Math.sin((2 * Math.PI * 180 * i) / rateHz) + 0.05 * Math.sin(i * 0.37));
}
