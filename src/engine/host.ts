/**
 * Owns the model's lifecycle: the server listens at once and reports `loading` on /health until
 * the explicit load finishes, then `ready`, or `failed` with the reason if the load threw.
 */
import type { SpeechModel } from "../models/contract.ts";

export type ModelState = "loading" | "ready" | "failed";

export class ModelHost {
  #state: ModelState = "loading";
  #adapter: SpeechModel | undefined;
  #failure: Error | undefined;
  readonly loaded: Promise<void>;

  private constructor(load: Promise<SpeechModel>) {
    this.loaded = load.then(
      (adapter) => {
        this.#adapter = adapter;
        this.#state = "ready";
      },
      (error: unknown) => {
        this.#failure = error instanceof Error ? error : new Error(String(error));
        this.#state = "failed";
      },
    );
  }

  static load(loader: () => Promise<SpeechModel>): ModelHost {
    return new ModelHost(Promise.resolve().then(loader));
  }

  get state(): ModelState {
    return this.#state;
  }

  get failure(): Error | undefined {
    return this.#failure;
  }

  /** The model once ready; undefined while loading or after a failed load. */
  get model(): SpeechModel | undefined {
    return this.#adapter;
  }

  async close(): Promise<void> {
    await this.loaded;
    await this.#adapter?.close();
  }
}
