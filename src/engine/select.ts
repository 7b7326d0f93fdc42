/** Picks and loads the speech engine named by the configuration. */
import type { Config } from "../config.ts";
import type { SpeechModelAdapter } from "./adapter.ts";
import { createClassicEngine } from "../models/classic/engine.ts";

export async function loadEngine(config: Config): Promise<SpeechModelAdapter> {
  switch (config.engine) {
    case "auto":
    case "classic":
      return createClassicEngine();
  }
}
