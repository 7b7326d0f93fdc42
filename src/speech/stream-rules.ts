/**
 * What every text-stream connection shares, whatever its protocol (the native WebSocket, ElevenLabs' sockets,
 * Wyoming): the caps on one message and on the messages waiting, the budget of erroneous messages, and how a
 * stream's ending closes a socket (RFC 6455 codes) and counts as an outcome.
 */
import type { StreamOutcome } from "../metrics.ts";
import type { TextStreamEnding, TextStreamError } from "./text-stream.ts";

/** Close codes of RFC 6455 the protocol uses. */
export const CLOSE_NORMAL = 1000;
/** The server is shutting down (RFC 6455 §7.4.1: "going away"): a client reconnects, to another replica. */
export const CLOSE_GOING_AWAY = 1001;
export const CLOSE_POLICY = 1008;
/** The server is at capacity (1013, "Try Again Later", IANA's registry of RFC 6455 codes): reconnect later, or elsewhere. */
export const CLOSE_TRY_AGAIN_LATER = 1013;
export const CLOSE_TOO_BIG = 1009;

/**
 * How a session's socket ended, from the code we closed it with (undefined: the client closed it first).
 * Closed by us with 1000/1001 is a session that ran its course; other codes are its protocol errors.
 */
export function outcomeOfClose(serverCloseCode: number | undefined): StreamOutcome {
  if (serverCloseCode === undefined) return "aborted";
  return serverCloseCode === CLOSE_NORMAL || serverCloseCode === CLOSE_GOING_AWAY ? "completed" : "failed";
}

export const MAX_CONFIG_MESSAGE_BYTES = 4 * 1024 * 1024;
export const MAX_TEXT_MESSAGE_BYTES = 128 * 1024;
/**
 * Bytes of client messages waiting to be handled (messages queue while a session.config is checked, which
 * may fetch and encode a ref_audio): two of the largest messages (each also counts an overhead, text-stream.ts).
 */
export const MAX_INBOX_BYTES = 2 * MAX_CONFIG_MESSAGE_BYTES;

/**
 * Erroneous messages a connection may send (answered with an error, the connection kept): a burst of
 * ERRONEOUS_MESSAGE_BURST, refilled at ERRONEOUS_MESSAGES_PER_SECOND, so an agent that errs now and then over
 * hours keeps its socket while a flood of them is closed (1008) after a few dozen replies instead of costing
 * the event loop a parse and a reply each, and the client's unread replies a growing send buffer.
 */
export const ERRONEOUS_MESSAGE_BURST = 32;
export const ERRONEOUS_MESSAGES_PER_SECOND = 1;

export class ErroneousMessageBudget {
  #tokens = ERRONEOUS_MESSAGE_BURST;
  #refilledAtMs: number;

  constructor(private readonly clockMs: () => number = () => performance.now()) {
    this.#refilledAtMs = clockMs();
  }

  /** Counts one erroneous message; false once the budget is spent, when the connection must be closed. */
  spend(): boolean {
    const nowMs = this.clockMs();
    this.#tokens = Math.min(ERRONEOUS_MESSAGE_BURST, this.#tokens + ((nowMs - this.#refilledAtMs) / 1000) * ERRONEOUS_MESSAGES_PER_SECOND);
    this.#refilledAtMs = nowMs;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }
}

/** The close reason and error message once a connection's ErroneousMessageBudget is spent. */
export const ERRONEOUS_MESSAGE_FLOOD = `too many erroneous messages (more than ${ERRONEOUS_MESSAGE_BURST} at once, or ${ERRONEOUS_MESSAGES_PER_SECOND} a second after)`;

/** The close code a stream's error ends the socket with: text past a cap is 1009, any other broken rule 1008. */
export function closeCodeOf(error: TextStreamError): number {
  return error.kind === "too_big" ? CLOSE_TOO_BIG : CLOSE_POLICY;
}

/** The error message a stream's ending sends before the socket closes, and the close code and reason. */
export function closeOf(ending: TextStreamEnding): { message?: string; code: number; reason: string } {
  switch (ending.kind) {
    case "finished":
      return { code: CLOSE_NORMAL, reason: "session closed" };
    case "going_away":
      return { code: CLOSE_GOING_AWAY, reason: "server shutting down" };
    case "stalled":
      return { code: CLOSE_POLICY, reason: "client stopped reading audio" };
    case "at_capacity":
      // The refusal itself went out as the sentence's error, in the protocol's shape.
      return { code: CLOSE_TRY_AGAIN_LATER, reason: `server at capacity; retry after ${ending.retryAfterSeconds} s` };
    case "idle":
      return { message: `idle timeout: no message for ${ending.idleSeconds} s and nothing left to send; the session is closed`, code: CLOSE_NORMAL, reason: "idle timeout" };
    case "unconfigured":
      return closeOf({ kind: "broken", error: { kind: "invalid", message: "session.config must arrive within the configuration deadline" } });
    case "broken":
      return { message: ending.error.message, code: closeCodeOf(ending.error), reason: ending.error.message.slice(0, 120) };
  }
}
