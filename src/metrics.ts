/** Prometheus metrics, one registry per app instance so several apps (tests) never share counters. */
import { Counter, Histogram, Registry } from "prom-client";

/** How a streamed response ended: the one definition, for the HTTP streams, the WebSocket sessions and this counter's label. */
export type StreamOutcome = "completed" | "aborted" | "failed";
export type DeliveryMode = "file" | "audio_stream" | "sse" | "websocket" | "batch";

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

  /** Counts a streamed response that ended, by delivery mode and outcome. */
  countStreamEnd(mode: DeliveryMode, outcome: StreamOutcome): void {
    this.streams.inc({ mode, outcome });
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}
