import { describe, expect, test } from "bun:test";
import { generationParams, pocketParamsSchema } from "../../../src/models/pocket/params.ts";

describe("Pocket TTS extra_params", () => {
  test("each range is closed at its edges and names the key when broken", () => {
    const edges = { temperature: [0, 2], lsd_steps: [1, 16], eos_threshold: [-10, 0], frames_after_eos: [0, 25] } as const;
    for (const [key, [min, max]] of Object.entries(edges)) {
      expect(pocketParamsSchema.safeParse({ [key]: min }).success).toBe(true);
      expect(pocketParamsSchema.safeParse({ [key]: max }).success).toBe(true);
      for (const bad of [min - 0.5, max + 0.5, Infinity, "1", null]) {
        const parsed = pocketParamsSchema.safeParse({ [key]: bad });
        expect(parsed.success).toBe(false);
        expect(parsed.error!.issues[0]!.path).toEqual([key]);
        expect(parsed.error!.issues[0]!.message).toStartWith(`${key} must be`);
      }
    }
    expect(pocketParamsSchema.safeParse({ lsd_steps: 2.5 }).error!.issues[0]!.message).toBe("lsd_steps must be an integer in 1..16");
    expect(pocketParamsSchema.safeParse({ temperature: 2.5 }).error!.issues[0]!.message).toBe("temperature must be a number in 0..2");
  });

  test("keys the model does not read are dropped; the ones absent keep the loop's defaults", () => {
    expect(pocketParamsSchema.parse({ temperature: 0.5, top_k: 40 })).toEqual({ temperature: 0.5 });
    expect(generationParams({ temperature: 0.5, lsd_steps: 4, eos_threshold: -3, frames_after_eos: 2 })).toEqual({ temperature: 0.5, lsdSteps: 4, eosThreshold: -3, framesAfterEos: 2 });
    expect(generationParams({ lsd_steps: 4 })).toEqual({ lsdSteps: 4 });
    expect(Object.keys(generationParams({}))).toEqual([]);
  });
});
