/** An engine around a model outside any server, for tests that drive a model's runner directly. */
import { Engine, type EngineOptions } from "../../src/engine/core.ts";
import type { AudioChunk, SpeechModel, SynthesisJob } from "../../src/models/contract.ts";

export function engineFor(model: SpeechModel, options: Partial<EngineOptions> = {}): Engine {
  return new Engine(model.runner, model.capabilities, { maxStreams: 64, maxQueue: 1024, ...options });
}

/** The job's audio through `engine`, chunk by chunk. */
export async function* speak(engine: Engine, job: SynthesisJob): AsyncGenerator<AudioChunk, void, undefined> {
  yield* await engine.submit(job);
}
