/**
 * A Wyoming client written from the protocol (rhasspy/wyoming, wyoming/event.py), not from our parser: a
 * header line, then data_length bytes of JSON merged over the header's data, then payload_length bytes.
 * Writes may be split however a test likes, to check the server's framing.
 */
import { connect, type Socket } from "node:net";

export interface ClientEvent {
  type: string;
  data: Record<string, unknown>;
  payload?: Uint8Array;
}

/** One event's bytes as wyoming's async_write_event makes them: data after the header, never inside it. */
export function eventBytes(type: string, data?: Record<string, unknown>, payload?: Uint8Array): Uint8Array {
  const dataBytes = data ? Buffer.from(JSON.stringify(data), "utf-8") : undefined;
  const header: Record<string, unknown> = { type, version: "1.8.0" };
  if (dataBytes) header.data_length = dataBytes.byteLength;
  if (payload) header.payload_length = payload.byteLength;
  return Buffer.concat([Buffer.from(`${JSON.stringify(header)}\n`, "utf-8"), ...(dataBytes ? [dataBytes] : []), ...(payload ? [Buffer.from(payload)] : [])]);
}

export class WyomingTestClient {
  readonly events: ClientEvent[] = [];
  #pending = Buffer.alloc(0);
  #waiters: (() => void)[] = [];
  #closed = false;

  private constructor(readonly socket: Socket) {
    socket.on("data", (bytes: Buffer) => {
      this.#pending = Buffer.concat([this.#pending, bytes]);
      this.#parse();
      this.#wake();
    });
    socket.on("close", () => {
      this.#closed = true;
      this.#wake();
    });
    socket.on("error", () => {});
  }

  static connect(port: number): Promise<WyomingTestClient> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: "127.0.0.1", port }, () => resolve(new WyomingTestClient(socket)));
      socket.once("error", reject);
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  send(type: string, data?: Record<string, unknown>): void {
    this.socket.write(eventBytes(type, data));
  }

  writeRaw(bytes: Uint8Array): Promise<void> {
    return new Promise((resolve) => this.socket.write(bytes, () => resolve()));
  }

  /** Events from index `from` on, up to and including the first that `isLast` accepts. */
  async readUntil(isLast: (event: ClientEvent) => boolean, from = 0, timeoutMs = 30_000): Promise<ClientEvent[]> {
    const giveUpAt = Date.now() + timeoutMs;
    for (;;) {
      const index = this.events.findIndex((event, position) => position >= from && isLast(event));
      if (index >= 0) return this.events.slice(from, index + 1);
      if (this.#closed) throw new Error(`connection closed; events so far: ${this.events.map((event) => event.type).join(", ")}`);
      const remaining = giveUpAt - Date.now();
      if (remaining <= 0) throw new Error(`timed out; events so far: ${this.events.map((event) => event.type).join(", ")}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, remaining);
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Resolves once the server has closed the connection. */
  async closedByServer(timeoutMs = 30_000): Promise<void> {
    const giveUpAt = Date.now() + timeoutMs;
    while (!this.#closed) {
      if (Date.now() > giveUpAt) throw new Error("the server kept the connection open");
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  close(): void {
    this.socket.destroy();
  }

  #parse(): void {
    for (;;) {
      const newline = this.#pending.indexOf(0x0a);
      if (newline < 0) return;
      const header = JSON.parse(this.#pending.subarray(0, newline).toString("utf-8")) as { type: string; data?: Record<string, unknown>; data_length?: number; payload_length?: number };
      const dataLength = header.data_length ?? 0;
      const payloadLength = header.payload_length ?? 0;
      if (this.#pending.byteLength < newline + 1 + dataLength + payloadLength) return;
      let data = header.data ?? {};
      if (dataLength > 0) data = { ...data, ...JSON.parse(this.#pending.subarray(newline + 1, newline + 1 + dataLength).toString("utf-8")) };
      const payload = payloadLength > 0 ? new Uint8Array(this.#pending.subarray(newline + 1 + dataLength, newline + 1 + dataLength + payloadLength)) : undefined;
      this.events.push({ type: header.type, data, ...(payload ? { payload } : {}) });
      this.#pending = this.#pending.subarray(newline + 1 + dataLength + payloadLength);
    }
  }

  #wake(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }
}
