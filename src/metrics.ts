/** Prometheus metrics, one registry per app instance so several apps (tests) never share counters. */
import { Counter, Gauge, Histogram, Registry } from "prom-client";

/**
 * How a stream ended: the one vocabulary, for this counter's label, the access log's `end` and the streamed
 * responses and WebSocket sessions that report it. A generation's is derived from its finish reason
 * (STREAM_OUTCOMES in engine/request.ts); "aborted" is the client leaving, or stalling.
 */
export type StreamOutcome = "completed" | "aborted" | "failed";
/**
 * How a request's audio reaches its client: one file, a raw stream of the file's bytes, SSE deltas, WebSocket
 * sentences, batch results, or Wyoming audio-chunk events. The one vocabulary, for the routes (PreparedSpeech.delivery) and the labels here.
 */
export type DeliveryMode = "file" | "audio_stream" | "sse" | "websocket" | "batch" | "wyoming";

/** What the engine gauges read at each scrape (src/engine/core.ts's Engine has this shape). */
export interface EngineGaugeSource {
  readonly counts: { waiting: number; running: number; paused: number };
  readonly stateBytes: number;
  readonly capacity?: { readonly streams: number } | undefined;
  /** Requests the engine runs at once now (its admission's own figure). */
  readonly places: number;
  /** Seconds until a running place is expected to be free for one more request (0: one is free now). */
  expectedWaitSeconds(): number;
}

/**
 * The engine's load: requests running (paused ones hold their places) and waiting over the places it runs at
 * once, its real-time capacity. 1 is full; past 1, requests queue. One number a replica exports for an autoscaler to average (KEDA's prometheus trigger, HPA
 * v2 Pods metrics), as serving stacks scale on their queue (vLLM's num_requests_waiting) or running requests
 * (KServe).
 */
export function engineLoad(source: EngineGaugeSource): number {
  const { running, waiting, paused } = source.counts;
  return (running + paused + waiting) / source.places;
}

export class ServiceMetrics {
  readonly registry = new Registry();
  readonly httpRequests = new Counter({
    name: "voxedge_http_requests_total",
    help: "HTTP requests by route, method and status",
    labelNames: ["route", "method", "status"] as const,
    registers: [this.registry],
  });
  readonly timeToFirstAudio = new Histogram({
    name: "voxedge_time_to_first_audio_seconds",
    help: "Time from request arrival to the first audio chunk produced",
    labelNames: ["mode"] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10],
    registers: [this.registry],
  });
  readonly realTimeFactor = new Histogram({
    name: "voxedge_real_time_factor",
    help: "Synthesis wall time divided by audio duration (lower is faster)",
    labelNames: ["mode"] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5],
    registers: [this.registry],
  });
  readonly streams = new Counter({
    name: "voxedge_streams_total",
    help: "Streaming responses by outcome",
    labelNames: ["mode", "outcome"] as const,
    registers: [this.registry],
  });
  readonly audioSeconds = new Counter({
    name: "voxedge_audio_seconds_total",
    help: "Seconds of audio produced",
    registers: [this.registry],
  });

  #engine: () => EngineGaugeSource | undefined = () => undefined;
  readonly engineRequests: Gauge<"state"> = new Gauge({
    name: "voxedge_engine_requests",
    help: "Requests in the engine by state: waiting for a running place, running, or paused behind a slow consumer",
    labelNames: ["state"] as const,
    registers: [this.registry],
    collect: () => {
      const counts = this.#engine()?.counts ?? { waiting: 0, running: 0, paused: 0 };
      for (const [state, value] of Object.entries(counts)) this.engineRequests.set({ state }, value);
    },
  });
  readonly engineStateBytes: Gauge = new Gauge({
    name: "voxedge_engine_state_bytes",
    help: "Bytes of per-request model state the engine holds (KV caches, decoder states)",
    registers: [this.registry],
    collect: () => {
      this.engineStateBytes.set(this.#engine()?.stateBytes ?? 0);
    },
  });
  readonly engineRealTimeStreams: Gauge = new Gauge({
    name: "voxedge_engine_realtime_streams",
    help: "Streams the engine estimates it keeps in real time at once, from its measured ticks (admission runs no more, up to --max-streams); 0 where it admits by --max-streams alone",
    registers: [this.registry],
    collect: () => {
      this.engineRealTimeStreams.set(this.#engine()?.capacity?.streams ?? 0);
    },
  });
  readonly engineCapacity: Gauge = new Gauge({
    name: "voxedge_engine_capacity_streams",
    help: "Requests the engine runs at once now: the smaller of --max-streams and voxedge_engine_realtime_streams (its measured real-time capacity); the denominator of voxedge_engine_load",
    registers: [this.registry],
    collect: () => {
      this.engineCapacity.set(this.#engine()?.places ?? 0);
    },
  });
  readonly engineExpectedWait: Gauge = new Gauge({
    name: "voxedge_engine_expected_wait_seconds",
    help: "Seconds until a running place is expected to be free for one more request (0: one is free now); a request that would wait longer than --max-queue-wait is refused with 429",
    registers: [this.registry],
    collect: () => {
      const wait = this.#engine()?.expectedWaitSeconds() ?? 0;
      this.engineExpectedWait.set(Number.isFinite(wait) ? wait : -1);
    },
  });
  readonly engineLoad: Gauge = new Gauge({
    name: "voxedge_engine_load",
    help: "Requests running (paused included) and waiting over voxedge_engine_capacity_streams, the places the engine runs at once in real time: 1 is full, more is a queue; the autoscaling signal",
    registers: [this.registry],
    collect: () => {
      const engine = this.#engine();
      this.engineLoad.set(engine ? engineLoad(engine) : 0);
    },
  });
  readonly engineRejections = new Counter({
    name: "voxedge_engine_rejections_total",
    help: "Requests refused with 429: no running place free and none expected within --max-queue-wait, every waiting place taken, or the memory budget",
    registers: [this.registry],
  });
  readonly engineFinished = new Counter({
    name: "voxedge_engine_finished_total",
    help: "Requests that ended, by finish reason (stop: end of speech; length: a frame cap; abort: the client left; error)",
    labelNames: ["finish_reason"] as const,
    registers: [this.registry],
  });
  readonly engineTickSeconds = new Histogram({
    name: "voxedge_engine_tick_seconds",
    help: "Time one engine tick spent in each stage (prefill, flow_lm, flow_head, decode, step)",
    labelNames: ["stage"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });
  readonly engineBatchSize = new Histogram({
    name: "voxedge_engine_batch_size",
    help: "Rows (streams) per model call, by stage",
    labelNames: ["stage"] as const,
    buckets: [1, 2, 4, 8, 16, 32],
    registers: [this.registry],
  });
  /** Graph executions by stage: with voxedge_engine_batch_size's sum, the rows per call (sum ÷ this). */
  readonly engineModelCalls = new Counter({
    name: "voxedge_engine_model_calls_total",
    help: "Model calls (graph executions) by stage (flow_lm, flow_head, decode, ...); voxedge_engine_batch_size_sum divided by it is the rows per call",
    labelNames: ["stage"] as const,
    registers: [this.registry],
  });

  /** Reads the engine's gauges from `source` at every scrape (the engine exists once the model has loaded). */
  watchEngine(source: () => EngineGaugeSource | undefined): void {
    this.#engine = source;
  }

  /** The engine's observer: tick, finish and rejection events into the counters above. */
  readonly engineObserver = {
    tick: (stageSeconds: Record<string, number>, batchSizes: Record<string, number[]>) => {
      for (const [stage, seconds] of Object.entries(stageSeconds)) this.engineTickSeconds.observe({ stage }, seconds);
      for (const [stage, sizes] of Object.entries(batchSizes)) {
        for (const size of sizes) this.engineBatchSize.observe({ stage }, size);
        if (sizes.length > 0) this.engineModelCalls.inc({ stage }, sizes.length);
      }
    },
    finished: (reason: string) => this.engineFinished.inc({ finish_reason: reason }),
    rejected: () => this.engineRejections.inc(),
  };

  /** Counts a stream (a streamed response, a WebSocket sentence) that ended, by delivery mode and outcome. */
  countStreamEnd(mode: DeliveryMode, outcome: StreamOutcome): void {
    this.streams.inc({ mode, outcome });
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}
