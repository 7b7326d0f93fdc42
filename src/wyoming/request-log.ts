/**
 * The access log line of one Wyoming request (a one-shot `synthesize`, or a streaming run from
 * `synthesize-start` to `synthesize-stopped`), in the HTTP access log's shape (src/http/access-log.ts): the
 * same message and fields, with `method` "WYOMING" and the event that began it as the `route`. A status
 * says how it ended in HTTP's words (200, or the refusal's 4xx/5xx, 499 for a client that left). Never the
 * text: its length only.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "../log/logger.ts";

export type WyomingRoute = "synthesize" | "synthesize-start";

export class WyomingRequestLog {
  readonly requestId = randomUUID();
  readonly #startedMs = performance.now();
  #firstAudioMs: number | undefined;
  #audioSeconds = 0;
  #textChars = 0;
  #status = 200;
  #ended = false;

  constructor(
    private readonly logger: Logger,
    private readonly route: WyomingRoute,
  ) {}

  noteText(chars: number): void {
    this.#textChars += chars;
  }

  noteAudio(seconds: number): void {
    this.#firstAudioMs ??= performance.now() - this.#startedMs;
    this.#audioSeconds += seconds;
  }

  /** A refusal or failure; the first one is the status the line shows (a streaming run goes on past it). */
  noteFailure(status: number): void {
    if (this.#status === 200) this.#status = status;
  }

  /** Writes the line, once: `clientLeft` when the connection closed before the answer was complete. */
  end(clientLeft: boolean): void {
    if (this.#ended) return;
    this.#ended = true;
    this.logger.info("request", {
      request_id: this.requestId,
      method: "WYOMING",
      route: this.route,
      status: clientLeft && this.#firstAudioMs === undefined && this.#status === 200 ? 499 : this.#status,
      latency_ms: round(performance.now() - this.#startedMs),
      input_chars: this.#textChars,
      ...(this.#firstAudioMs === undefined ? {} : { first_audio_ms: round(this.#firstAudioMs) }),
      ...(this.#audioSeconds > 0 ? { audio_seconds: Number(this.#audioSeconds.toFixed(3)) } : {}),
      ...(clientLeft && this.#firstAudioMs !== undefined ? { end: "client_closed" } : {}),
    });
  }
}

function round(milliseconds: number): number {
  return Math.round(milliseconds * 10) / 10;
}
