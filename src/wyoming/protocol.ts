/**
 * Wyoming's event framing (rhasspy/wyoming, wyoming/event.py): one JSON header line
 * `{"type", "version", "data_length"?, "payload_length"?, "data"?}\n`, then `data_length` bytes of UTF-8 JSON
 * (an object merged over the header's `data`), then `payload_length` bytes of binary payload.
 *
 *   {"type":"audio-chunk","version":"1.5.3","data_length":40,"payload_length":3200}\n
 *   {"rate":16000,"width":2,"channels":1}          ← 40 bytes of data
 *   ........                                         ← 3200 bytes of pcm16
 *
 * TCP delivers these bytes in pieces of any size: the parser keeps what it has and emits an event only once
 * its header, data and payload are all in. Every length is capped before anything is buffered, so a client
 * cannot make the server hold more than one event's worth of bytes; and data longer than its event type is
 * read for is skipped as it arrives, never buffered or parsed (the event comes without it, flagged).
 */

/**
 * The version our event headers carry: a release of the reference library that has the streaming tts events
 * (synthesize-start and the rest). Readers take a header's type, data and lengths, never its version: it informs.
 */
export const WYOMING_PROTOCOL_VERSION = "1.8.0";

export interface WyomingEvent {
  type: string;
  data: Record<string, unknown>;
  payload?: Uint8Array;
}

/** An event as it was read, with its size on the wire: what holding it costs is counted from that. */
export interface ReceivedEvent extends WyomingEvent {
  /** Its size on the wire: header line (its newline included), data and payload, skipped bytes included. */
  wireBytes: number;
  /** Its data was longer than its type is read for: that many bytes were skipped, and `data` is the header's alone. */
  skippedDataBytes?: number;
}

export interface EventLimits {
  /** Longest header line, its newline excluded. */
  maxHeaderBytes: number;
  /** Longer data is no stream to read on: a protocol error. */
  maxDataBytes: number;
  maxPayloadBytes: number;
  /** Longest data read for an event of `type` (default maxDataBytes); longer data, and the payload after it, is skipped. */
  readableDataBytes?(type: string): number;
}

/** A stream of bytes that is not Wyoming events (or exceeds a limit): the connection cannot be read further. */
export class WyomingProtocolError extends Error {}

const NEWLINE = 0x0a;
const INITIAL_BUFFER_BYTES = 4096;
const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/** One event as it goes on the wire; `data` goes after the header, never inside it (a reader's line may be capped, as Python's asyncio at 64 KiB). */
export function encodeEvent(event: WyomingEvent): Uint8Array {
  const dataBytes = Object.keys(event.data).length > 0 ? encoder.encode(JSON.stringify(event.data)) : undefined;
  const payload = event.payload && event.payload.byteLength > 0 ? event.payload : undefined;
  const header = {
    type: event.type,
    version: WYOMING_PROTOCOL_VERSION,
    ...(dataBytes ? { data_length: dataBytes.byteLength } : {}),
    ...(payload ? { payload_length: payload.byteLength } : {}),
  };
  const headerBytes = encoder.encode(`${JSON.stringify(header)}\n`);
  const frame = new Uint8Array(headerBytes.byteLength + (dataBytes?.byteLength ?? 0) + (payload?.byteLength ?? 0));
  frame.set(headerBytes, 0);
  if (dataBytes) frame.set(dataBytes, headerBytes.byteLength);
  if (payload) frame.set(payload, headerBytes.byteLength + (dataBytes?.byteLength ?? 0));
  return frame;
}

interface PendingEvent {
  type: string;
  data: Record<string, unknown>;
  headerBytes: number;
  dataLength: number;
  payloadLength: number;
}

/** Bytes in, events out, across any split of the stream. After a WyomingProtocolError the parser is done. */
export class EventParser {
  /** Received bytes not yet consumed lie in `#buffer` from `#start` to `#end`; the room after `#end` grows by doubling. */
  #buffer: Uint8Array = new Uint8Array(INITIAL_BUFFER_BYTES);
  #start = 0;
  #end = 0;
  /** Where the search for the header's newline resumes, so a header arriving byte by byte is scanned once. */
  #scannedUpTo = 0;
  /** The event whose header has been read and whose data or payload is still arriving. */
  #pending: PendingEvent | undefined;
  /** Bytes still to be dropped as they arrive: the data and payload of an event whose data is not read. */
  #skipping = 0;

  constructor(private readonly limits: EventLimits) {}

  push(bytes: Uint8Array): ReceivedEvent[] {
    this.#append(bytes);
    const events: ReceivedEvent[] = [];
    for (let event = this.#next(); event; event = this.#next()) events.push(event);
    return events;
  }

  /** Bytes held for an event not yet complete. */
  get bufferedBytes(): number {
    return this.#end - this.#start;
  }

  #next(): ReceivedEvent | undefined {
    if (this.#skipping > 0) {
      const dropped = Math.min(this.bufferedBytes, this.#skipping);
      this.#start += dropped;
      this.#skipping -= dropped;
      if (this.#skipping > 0) return undefined;
    }
    this.#pending ??= this.#readHeader();
    const pending = this.#pending;
    if (!pending) return undefined;
    if (pending.dataLength > (this.limits.readableDataBytes?.(pending.type) ?? this.limits.maxDataBytes)) {
      this.#pending = undefined;
      this.#skipping = pending.dataLength + pending.payloadLength;
      return { type: pending.type, data: pending.data, wireBytes: pending.headerBytes + this.#skipping, skippedDataBytes: pending.dataLength };
    }
    if (this.bufferedBytes < pending.dataLength + pending.payloadLength) return undefined;
    let data = pending.data;
    if (pending.dataLength > 0) data = { ...data, ...parseObject(this.#take(pending.dataLength), "data") };
    const payload = pending.payloadLength > 0 ? this.#take(pending.payloadLength).slice() : undefined;
    this.#pending = undefined;
    return { type: pending.type, data, ...(payload ? { payload } : {}), wireBytes: pending.headerBytes + pending.dataLength + pending.payloadLength };
  }

  #readHeader(): PendingEvent | undefined {
    const available = this.#buffer.subarray(this.#start, this.#end);
    const newline = available.indexOf(NEWLINE, this.#scannedUpTo);
    if (newline < 0) {
      if (available.byteLength > this.limits.maxHeaderBytes) throw new WyomingProtocolError(`event header line longer than ${this.limits.maxHeaderBytes} bytes`);
      this.#scannedUpTo = available.byteLength;
      return undefined;
    }
    if (newline > this.limits.maxHeaderBytes) throw new WyomingProtocolError(`event header line longer than ${this.limits.maxHeaderBytes} bytes`);
    const header = parseObject(this.#take(newline + 1).subarray(0, newline), "header");
    this.#scannedUpTo = 0;
    if (typeof header.type !== "string" || header.type.length === 0) throw new WyomingProtocolError("event header has no type");
    const dataLength = lengthField(header.data_length, "data_length", this.limits.maxDataBytes);
    const payloadLength = lengthField(header.payload_length, "payload_length", this.limits.maxPayloadBytes);
    const inlineData = header.data ?? {};
    if (typeof inlineData !== "object" || inlineData === null || Array.isArray(inlineData)) throw new WyomingProtocolError("event header's data is not an object");
    return { type: header.type, data: inlineData as Record<string, unknown>, headerBytes: newline + 1, dataLength, payloadLength };
  }

  #take(byteCount: number): Uint8Array {
    const taken = this.#buffer.subarray(this.#start, this.#start + byteCount);
    this.#start += byteCount;
    return taken;
  }

  /** Keeps the unconsumed bytes at the front of a buffer with room for `bytes`, so bytes arriving one by one cost no copy each. */
  #append(bytes: Uint8Array): void {
    const held = this.#end - this.#start;
    // A large payload's room is given back once it has been consumed.
    if (held === 0 && this.#buffer.byteLength > INITIAL_BUFFER_BYTES) this.#buffer = new Uint8Array(INITIAL_BUFFER_BYTES);
    const needed = held + bytes.byteLength;
    if (this.#start > 0 || needed > this.#buffer.byteLength) {
      const target = needed > this.#buffer.byteLength ? new Uint8Array(Math.max(needed, this.#buffer.byteLength * 2)) : this.#buffer;
      target.set(this.#buffer.subarray(this.#start, this.#end), 0);
      this.#buffer = target;
      this.#start = 0;
      this.#end = held;
    }
    this.#buffer.set(bytes, this.#end);
    this.#end += bytes.byteLength;
  }
}

function parseObject(bytes: Uint8Array, what: "header" | "data"): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(decoder.decode(bytes));
  } catch {
    throw new WyomingProtocolError(`event ${what} is not UTF-8 JSON`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new WyomingProtocolError(`event ${what} is not a JSON object`);
  return parsed as Record<string, unknown>;
}

function lengthField(value: unknown, name: string, max: number): number {
  if (value === undefined || value === null) return 0;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) throw new WyomingProtocolError(`${name} is not a byte count`);
  if (value > max) throw new WyomingProtocolError(`${name} ${value} exceeds the limit of ${max} bytes`);
  return value;
}
