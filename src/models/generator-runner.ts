/**
 * A runner for models whose work per request is a sequence of steps with nothing to batch (the classic
 * model: one sentence per step; the test tone model: one frame): each request is an async generator that
 * yields one step's audio per `next()`. A tick's steps are started together, most urgent first, and the
 * tick waits for all of them.
 */
import { NO_WORK, type AudioChunk, type ModelRunner, type RequestId, type RequestResult, type RequestWork, type StepOutput, type StepPlan, type SynthesisJob } from "./contract.ts";

/** One request's steps: each yielded array is the audio of one step. Must stop soon once `job.signal` aborts. */
export type StepGenerator = (job: SynthesisJob) => AsyncGenerator<AudioChunk[], void, undefined>;

interface GeneratorRequest {
  steps: AsyncGenerator<AudioChunk[], void, undefined>;
  /** Its generator has returned. */
  done: boolean;
  /** Aborted when the engine frees the request, whatever the client's own signal says. */
  stop: AbortController;
}

const READY: RequestWork = Object.freeze({ prefillPositions: 0, canStep: true, decodeFrames: 0 });

export class GeneratorRunner implements ModelRunner {
  readonly #requests = new Map<RequestId, GeneratorRequest>();

  constructor(
    private readonly stepsOf: StepGenerator,
    readonly options: {
      /** Steps one tick holds (a long step, such as a sentence, would otherwise hold every stream for all of them). */
      stepsPerTick?: number;
      /** Bytes a request's state holds while it is alive, for the state gauge. */
      bytesPerRequest?: number;
      /** Why the model can run nothing more (its worker cannot be restarted), when it cannot. */
      failure?: () => Error | undefined;
    } = {},
  ) {}

  get failure(): Error | undefined {
    return this.options.failure?.();
  }

  get stepsPerTick(): number | undefined {
    return this.options.stepsPerTick;
  }

  stateBytes(): number {
    return this.#requests.size * (this.options.bytesPerRequest ?? 0);
  }

  /** Requests whose state the runner holds (for tests of freeing). */
  get heldRequests(): number {
    return this.#requests.size;
  }

  async execute(plan: StepPlan): Promise<StepOutput> {
    for (const id of plan.finishedRequestIds) this.#free(id);
    const started = performance.now();
    const results: RequestResult[] = [];
    for (const { requestId, job } of plan.newRequests) {
      const stop = new AbortController();
      const signal = AbortSignal.any([job.signal, stop.signal]);
      this.#requests.set(requestId, { steps: this.stepsOf({ ...job, signal }), done: false, stop });
    }
    // A generator has no prefill of its own: its first unit of work is its first step.
    for (const id of plan.prefills) results.push({ requestId: id, audio: [] });
    results.push(...(await Promise.all(plan.steps.map((id) => this.#step(id)))));
    return { results, stageSeconds: plan.steps.length > 0 ? { step: (performance.now() - started) / 1000 } : {}, batchSizes: plan.steps.length > 0 ? { step: [plan.steps.length] } : {} };
  }

  nextWork(requestId: RequestId): RequestWork | undefined {
    const request = this.#requests.get(requestId);
    if (!request) return undefined;
    return request.done ? NO_WORK : READY;
  }

  async #step(requestId: RequestId): Promise<RequestResult> {
    const request = this.#requests.get(requestId);
    if (!request) return { requestId, audio: [], error: new Error(`request ${requestId} is unknown to the runner`) };
    try {
      const next = await request.steps.next();
      if (!next.done) return { requestId, audio: next.value };
      request.done = true;
      return { requestId, audio: [], finishReason: "stop" };
    } catch (error) {
      request.done = true;
      return { requestId, audio: [], error: error instanceof Error ? error : new Error(String(error)) };
    }
  }

  #free(requestId: RequestId): void {
    const request = this.#requests.get(requestId);
    if (!request) return;
    this.#requests.delete(requestId);
    request.stop.abort();
    void request.steps.return(undefined).catch(() => {});
  }
}
