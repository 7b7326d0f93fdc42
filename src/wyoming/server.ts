/**
 * The Wyoming listener (`--wyoming-port`): TCP, one WyomingSession per connection. node:net, which Bun and
 * Deno both provide. Bytes become events through the framing parser; bytes that are not Wyoming events get
 * an error event and the connection ends, and nothing a client sends stops the listener.
 *
 * The protocol has no authentication: the port is for Home Assistant on a trusted network, not for the
 * internet (docs/home-assistant.md). Where it binds and whether it serves uploaded voices is decided from
 * the API keys (config.ts, wyomingExposure).
 */
import { createServer, type Socket } from "node:net";
import type { Logger } from "../log/logger.ts";
import type { ServerLifecycle } from "../async/server-lifecycle.ts";
import type { SpeechService } from "../speech/service.ts";
import type { VoiceCatalog } from "../voices/catalog.ts";
import type { VoiceStore } from "../voices/store.ts";
import { MAX_TEXT_MESSAGE_BYTES } from "../speech/stream-rules.ts";
import { InfoSource } from "./info.ts";
import { encodeEvent, EventParser, WyomingProtocolError, type EventLimits } from "./protocol.ts";
import { WyomingSession } from "./session.ts";

/**
 * Data read of each event type; longer data is skipped unread and the event refused (session.ts), so no
 * event costs more than this to parse. A chunk has the WebSocket routes' cap on one message; a whole text
 * (`synthesize`, at most --max-input-chars, 100,000 characters at the most) fits in 1 MiB of JSON however it
 * is escaped; the rest carry a voice or nothing.
 */
const READABLE_DATA_BYTES: Readonly<Record<string, number>> = { "synthesize-chunk": MAX_TEXT_MESSAGE_BYTES, synthesize: 1024 * 1024 };
const OTHER_READABLE_DATA_BYTES = 64 * 1024;

/**
 * A header line is a few hundred bytes. Data is read up to its type's cap (above); longer data, up to
 * maxDataBytes, is skipped, so Home Assistant's whole-text `synthesize` after a long streamed answer (ignored
 * during the run) does not end the connection. A TTS server takes no audio, so payloads stay small.
 */
export const WYOMING_EVENT_LIMITS: EventLimits = {
  maxHeaderBytes: 64 * 1024,
  maxDataBytes: 4 * 1024 * 1024,
  maxPayloadBytes: 1024 * 1024,
  readableDataBytes: (type) => READABLE_DATA_BYTES[type] ?? OTHER_READABLE_DATA_BYTES,
};
/** How long a close may wait for a client to take what was sent before the connection is dropped. */
const CLOSE_FLUSH_MS = 5000;
/** Seconds a connection may sit without events and with nothing to do: Home Assistant opens one per request. */
export const WYOMING_IDLE_TIMEOUT_MS = 30_000;

export interface WyomingServerOptions {
  host: string;
  port: number;
  service: SpeechService;
  catalog: VoiceCatalog;
  voices: VoiceStore;
  logger: Logger;
  /** The server's draining, which each connection takes part in as a session. */
  lifecycle: ServerLifecycle;
  version: string;
  stallTimeoutMs: number;
  idleTimeoutMs?: number;
  /** List and speak uploaded voices (the speech service applies the same choice: config.ts, wyomingExposure). */
  uploadedVoices: boolean;
  /** Most characters one streaming run may carry. */
  maxRunChars: number;
}

export interface WyomingServer {
  /** The port listened on (the real one when 0 was asked for). */
  port: number;
  /** Stops listening and drops the connections still open. */
  close(): Promise<void>;
}

export function startWyomingServer(options: WyomingServerOptions): Promise<WyomingServer> {
  const { logger, lifecycle } = options;
  const sockets = new Set<Socket>();
  const info = new InfoSource({ capabilities: () => options.service.model().capabilities, catalog: options.catalog, voices: options.voices, uploadedVoices: options.uploadedVoices, version: options.version });
  const server = createServer((socket) => {
    // A connection arriving while draining would start work the shutdown does not wait for.
    if (lifecycle.draining) return void socket.destroy();
    sockets.add(socket);
    socket.setNoDelay(true);
    openSession(socket, options, info, () => sockets.delete(socket));
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => {
      server.off("error", reject);
      server.on("error", (error) => logger.error("wyoming listener failed", { error: String(error) }));
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : options.port;
      resolve({
        port,
        close: () =>
          new Promise<void>((closed) => {
            server.close(() => closed());
            for (const socket of sockets) socket.destroy();
          }),
      });
    });
  });
}

function openSession(socket: Socket, options: WyomingServerOptions, info: InfoSource, forget: () => void): void {
  const { logger } = options;
  let ending = false;
  const endConnection = () => {
    if (ending) return;
    ending = true;
    socket.end();
    // A client that reads nothing never takes the bytes ahead of the FIN.
    setTimeout(() => socket.destroy(), CLOSE_FLUSH_MS).unref?.();
  };
  const session = new WyomingSession(
    {
      send: (event) => {
        if (!ending && !socket.destroyed) socket.write(encodeEvent(event));
      },
      bufferedBytes: () => socket.writableLength,
      setReading: (reading) => {
        if (socket.destroyed) return;
        if (reading) socket.resume();
        else socket.pause();
      },
      close: endConnection,
    },
    { service: options.service, catalog: options.catalog, uploadedVoices: options.uploadedVoices, info, logger, maxRunChars: options.maxRunChars, stallTimeoutMs: options.stallTimeoutMs, idleTimeoutMs: options.idleTimeoutMs ?? WYOMING_IDLE_TIMEOUT_MS },
  );
  const untrack = options.lifecycle.trackSession(session);
  const parser = new EventParser(WYOMING_EVENT_LIMITS);
  socket.on("data", (bytes: Buffer) => {
    if (ending) return;
    try {
      for (const event of parser.push(bytes)) session.receive(event);
    } catch (error) {
      if (!(error instanceof WyomingProtocolError)) throw error;
      logger.warn("wyoming client sent bytes that are not events; closing", { reason: error.message });
      socket.write(encodeEvent({ type: "error", data: { text: error.message, code: "protocol_error" } }));
      session.closed();
      endConnection();
    }
  });
  // The client is gone once it stops sending (Home Assistant closes its connection whole): its generation stops now.
  socket.on("end", () => session.closed());
  // A reset by the peer (ECONNRESET, EPIPE) is a client leaving, not a server fault.
  socket.on("error", (error) => logger.debug("wyoming connection error", { error: String(error) }));
  socket.on("close", () => {
    session.closed();
    untrack();
    forget();
  });
}
