/** A WebSocket test client that records every message in arrival order. */
export type Received = { kind: "json"; value: any } | { kind: "binary"; bytes: Uint8Array };

export class RecordingSocket {
  readonly received: Received[] = [];
  closeCode: number | undefined;
  closeReason = "";
  readonly #socket: WebSocket;
  readonly opened: Promise<void>;
  readonly closedPromise: Promise<void>;
  #waiters: (() => void)[] = [];

  /** `headers` goes through Bun's WebSocket extension (browsers cannot set any). */
  constructor(url: string, headers?: Record<string, string>) {
    this.#socket = headers ? new WebSocket(url, { headers } as unknown as string[]) : new WebSocket(url);
    this.#socket.binaryType = "arraybuffer";
    this.opened = new Promise((resolve, reject) => {
      this.#socket.addEventListener("open", () => resolve(), { once: true });
      this.#socket.addEventListener("error", () => reject(new Error("websocket failed to open")), { once: true });
    });
    this.closedPromise = new Promise((resolve) => {
      this.#socket.addEventListener("close", (event) => {
        this.closeCode = event.code;
        this.closeReason = event.reason;
        this.#notify();
        resolve();
      });
    });
    this.#socket.addEventListener("message", (event) => {
      this.received.push(typeof event.data === "string" ? { kind: "json", value: JSON.parse(event.data) } : { kind: "binary", bytes: new Uint8Array(event.data as ArrayBuffer) });
      this.#notify();
    });
  }

  send(message: unknown): void {
    this.#socket.send(typeof message === "string" ? message : JSON.stringify(message));
  }

  sendRaw(data: string | Uint8Array): void {
    this.#socket.send(data);
  }

  close(): void {
    this.#socket.close();
  }

  json(): any[] {
    return this.received.filter((entry) => entry.kind === "json").map((entry) => (entry as { value: any }).value);
  }

  /** Resolves once `predicate` holds over what was received (or the socket closed), else rejects. */
  async waitFor(predicate: (received: Received[]) => boolean, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.received)) {
      if (this.closeCode !== undefined) throw new Error(`socket closed (${this.closeCode} ${this.closeReason}) before the condition held; got ${JSON.stringify(this.json())}`);
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new Error(`timed out; got ${JSON.stringify(this.json())}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, remaining);
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  async waitForClose(timeoutMs = 15_000): Promise<number> {
    await Promise.race([this.closedPromise, new Promise((_, reject) => setTimeout(() => reject(new Error("socket did not close")), timeoutMs))]);
    return this.closeCode!;
  }

  #notify(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }
}

export const isJson = (type: string) => (entry: Received) => entry.kind === "json" && entry.value.type === type;
