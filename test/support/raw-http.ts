/**
 * HTTP/1.x over a bare TCP socket, for what fetch cannot express: a body that stalls or trickles, a hang-up
 * mid-body, a request without Host, a client that never reads, and watching the server close a connection.
 */
import { readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";

export interface RawResponse {
  status: number;
  /** Header names lower-cased. */
  headers: Record<string, string>;
  bytes: Buffer;
  /** The bytes as UTF-8 text. */
  body: string;
}

export class RawHttpConnection {
  #received = Buffer.alloc(0);
  #ended = false;
  #onChange: (() => void)[] = [];
  /** Resolves when the server has ended or reset the connection. */
  readonly closed: Promise<void>;

  private constructor(readonly socket: Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.#received = Buffer.concat([this.#received, chunk]);
      this.#notify();
    });
    this.closed = new Promise((resolve) => {
      const end = () => {
        this.#ended = true;
        this.#notify();
        resolve();
      };
      socket.once("end", end);
      socket.once("close", end);
      socket.once("error", end);
    });
  }

  static async open(serverUrl: string): Promise<RawHttpConnection> {
    const { hostname, port } = new URL(serverUrl);
    const socket = connect(Number(port), hostname);
    await new Promise<void>((resolve, reject) => {
      socket.once("connect", resolve);
      socket.once("error", reject);
    });
    return new RawHttpConnection(socket);
  }

  get ended(): boolean {
    return this.#ended;
  }

  write(data: string | Uint8Array): void {
    if (!this.socket.destroyed) this.socket.write(data);
  }

  /** The next complete response on the connection; rejects when the connection ends first or nothing comes within `withinMs`. */
  response(withinMs = 10_000): Promise<RawResponse> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#onChange = this.#onChange.filter((listener) => listener !== check);
        reject(new Error(`no complete response within ${withinMs} ms (received ${JSON.stringify(this.#received.toString("latin1").slice(0, 200))})`));
      }, withinMs);
      const check = () => {
        const parsed = parseResponse(this.#received, this.#ended);
        if (parsed) {
          this.#received = this.#received.subarray(parsed.consumedBytes);
        } else if (!this.#ended) {
          return;
        }
        clearTimeout(timer);
        this.#onChange = this.#onChange.filter((listener) => listener !== check);
        if (parsed) resolve(parsed.response);
        else reject(new Error(`the connection ended before a complete response (received ${JSON.stringify(this.#received.toString("latin1").slice(0, 200))})`));
      };
      this.#onChange.push(check);
      check();
    });
  }

  /** Resolves true when the server closes the connection within `withinMs`, false otherwise. */
  async closedWithin(withinMs: number): Promise<boolean> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const outcome = await Promise.race([this.closed.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), withinMs)))]);
    clearTimeout(timer);
    return outcome;
  }

  destroy(): void {
    this.socket.destroy();
  }

  #notify(): void {
    for (const listener of [...this.#onChange]) listener();
  }
}

/** A request head; `Host` is added unless `host` is null (an HTTP/1.0 client may leave it out). */
export function requestHead(method: string, path: string, headers: Record<string, string | number>, { version = "1.1", host = "127.0.0.1" }: { version?: string; host?: string | null } = {}): string {
  const lines = [`${method} ${path} HTTP/${version}`];
  if (host !== null) lines.push(`Host: ${host}`);
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  return `${lines.join("\r\n")}\r\n\r\n`;
}

function parseResponse(bytes: Buffer, ended: boolean): { response: RawResponse; consumedBytes: number } | undefined {
  const headEnd = bytes.indexOf("\r\n\r\n");
  if (headEnd < 0) return undefined;
  const [statusLine, ...headerLines] = bytes.subarray(0, headEnd).toString("latin1").split("\r\n");
  const status = Number(/^HTTP\/\d\.\d (\d{3})/.exec(statusLine ?? "")?.[1]);
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const bodyStart = headEnd + 4;
  if (headers["transfer-encoding"]?.toLowerCase() === "chunked") {
    const parts: Buffer[] = [];
    let offset = bodyStart;
    for (;;) {
      const lineEnd = bytes.indexOf("\r\n", offset);
      if (lineEnd < 0) return undefined;
      const size = parseInt(bytes.subarray(offset, lineEnd).toString("latin1"), 16);
      if (bytes.length < lineEnd + 2 + size + 2) return undefined;
      if (size === 0) return { response: withBody(status, headers, Buffer.concat(parts)), consumedBytes: lineEnd + 4 };
      parts.push(bytes.subarray(lineEnd + 2, lineEnd + 2 + size));
      offset = lineEnd + 2 + size + 2;
    }
  }
  if (headers["content-length"] !== undefined) {
    const end = bodyStart + Number(headers["content-length"]);
    if (bytes.length < end) return undefined;
    return { response: withBody(status, headers, bytes.subarray(bodyStart, end)), consumedBytes: end };
  }
  // Neither length nor chunks: the body runs to the end of the connection.
  if (!ended) return undefined;
  return { response: withBody(status, headers, bytes.subarray(bodyStart)), consumedBytes: bytes.length };
}

function withBody(status: number, headers: Record<string, string>, bytes: Buffer): RawResponse {
  return { status, headers, bytes, body: bytes.toString("utf-8") };
}

/**
 * Whether the server still holds its end of a loopback connection open (state ESTABLISHED in /proc/net/tcp),
 * seen without reading from the client's side: a client that reads nothing never sees the server's FIN, which
 * waits behind the unread bytes, so only the kernel's table tells whether the server let go. Linux only.
 */
export function serverEndEstablished(serverPort: number, clientPort: number): boolean {
  const hex = (port: number) => port.toString(16).toUpperCase().padStart(4, "0");
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(table, "utf-8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const [, local, remote, state] = line.trim().split(/\s+/);
      if (!local || !remote) continue;
      if (local.endsWith(`:${hex(serverPort)}`) && remote.endsWith(`:${hex(clientPort)}`) && state === "01") return true;
    }
  }
  return false;
}
