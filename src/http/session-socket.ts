/**
 * The glue between a runtime's WebSocket and a speech session, shared by our own WebSocket route and
 * ElevenLabs' sockets: the session opens with the socket and is tracked for the shutdown's drain, a close
 * we start waits a bounded time for the client's half of the handshake, and the access log line is written
 * when the socket closes, with how the session ended.
 */
import type { Context } from "hono";
import type { WSContext, WSEvents } from "hono/ws";
import type { StreamOutcome } from "../metrics.ts";
import type { RuntimeSupport } from "../runtime/serve.ts";
import { outcomeOfClose } from "../speech/stream-rules.ts";
import { streamEnded } from "./access-log.ts";
import type { DrainableSession, ServerLifecycle } from "../async/server-lifecycle.ts";

/**
 * How long a close handshake may take before the connection is dropped: a client that reads nothing never
 * takes the close frame queued behind its unread audio, so its socket would otherwise stay open for good.
 */
const CLOSE_HANDSHAKE_MS = 5000;

/** A session over one socket: messages in, and told when the socket closed (either side). */
export interface SocketSession extends DrainableSession {
  receive(data: string | ArrayBuffer): void;
  closed(): void;
}

/** The socket as a session sends through it. */
export interface SessionSocket {
  /** Sends while the socket is open; a message after the close is dropped. */
  send(message: string | Uint8Array): void;
  /** Bytes sent and not yet taken by the client. */
  bufferedBytes(): number;
  /** Closes with `code` (the first code decides the session's outcome) and drops a client that never completes the handshake. */
  close(code: number, reason: string): void;
}

export interface SessionSocketDeps {
  runtime: RuntimeSupport;
  lifecycle: ServerLifecycle;
}

/** The WebSocket events of one upgraded request, whose session `openSession` makes when the socket opens. */
export function sessionSocketEvents(c: Context, { runtime, lifecycle }: SessionSocketDeps, openSession: (socket: SessionSocket) => SocketSession): WSEvents<unknown> {
  let session: SocketSession | undefined;
  let untrack = () => {};
  const ended = streamEnded(c);
  let serverCloseCode: number | undefined;
  let socketClosed = false;
  const finish = (outcome: StreamOutcome) => {
    session?.closed();
    untrack();
    ended(outcome);
  };
  return {
    onOpen(_event, ws: WSContext<unknown>) {
      session = openSession({
        send: (message) => {
          if (ws.readyState === 1) ws.send(message as string | Uint8Array<ArrayBuffer>);
        },
        bufferedBytes: () => runtime.bufferedBytes(ws),
        close: (code, reason) => {
          serverCloseCode ??= code;
          ws.close(code, reason);
          untrack();
          setTimeout(() => {
            if (!socketClosed) runtime.terminate(ws);
          }, CLOSE_HANDSHAKE_MS).unref?.();
        },
      });
      untrack = lifecycle.trackSession(session);
    },
    onMessage(event) {
      session?.receive(event.data as string | ArrayBuffer);
    },
    onClose() {
      socketClosed = true;
      finish(outcomeOfClose(serverCloseCode));
    },
    onError() {
      finish("failed");
    },
  };
}
