import { describe, expect, test } from "bun:test";
import { encodeEvent, EventParser, WYOMING_PROTOCOL_VERSION, WyomingProtocolError, type EventLimits } from "../../src/wyoming/protocol.ts";
import { eventBytes } from "../support/wyoming-client.ts";

const LIMITS: EventLimits = { maxHeaderBytes: 256, maxDataBytes: 1024, maxPayloadBytes: 4096 };
const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

describe("encodeEvent", () => {
  test("a header line with the lengths, then the data, then the payload", () => {
    const bytes = encodeEvent({ type: "audio-chunk", data: { rate: 16000, width: 2, channels: 1 }, payload: Uint8Array.of(1, 2, 3, 4) });
    const newline = bytes.indexOf(0x0a);
    const header = JSON.parse(decode(bytes.subarray(0, newline)));
    expect(header).toEqual({ type: "audio-chunk", version: WYOMING_PROTOCOL_VERSION, data_length: header.data_length, payload_length: 4 });
    expect(JSON.parse(decode(bytes.subarray(newline + 1, newline + 1 + header.data_length)))).toEqual({ rate: 16000, width: 2, channels: 1 });
    expect([...bytes.subarray(newline + 1 + header.data_length)]).toEqual([1, 2, 3, 4]);
  });

  test("an event without data or payload is its header line alone", () => {
    expect(decode(encodeEvent({ type: "synthesize-stopped", data: {} }))).toBe(`{"type":"synthesize-stopped","version":"${WYOMING_PROTOCOL_VERSION}"}\n`);
  });
});

describe("EventParser", () => {
  const stream = Buffer.concat([
    eventBytes("describe"),
    eventBytes("synthesize", { text: "Grüße, 世界 🌍", voice: { name: "rms" } }),
    eventBytes("audio-chunk", { rate: 16000, width: 2, channels: 1 }, Uint8Array.of(9, 8, 7, 6)),
  ]);
  // Each event's wireBytes is its whole frame: header line, data and payload.
  const expected = [
    { type: "describe", data: {}, wireBytes: eventBytes("describe").byteLength },
    { type: "synthesize", data: { text: "Grüße, 世界 🌍", voice: { name: "rms" } }, wireBytes: eventBytes("synthesize", { text: "Grüße, 世界 🌍", voice: { name: "rms" } }).byteLength },
    { type: "audio-chunk", data: { rate: 16000, width: 2, channels: 1 }, payload: Uint8Array.of(9, 8, 7, 6), wireBytes: eventBytes("audio-chunk", { rate: 16000, width: 2, channels: 1 }, Uint8Array.of(9, 8, 7, 6)).byteLength },
  ];

  test("every split of the stream into two pieces gives the same events", () => {
    for (let cut = 0; cut <= stream.byteLength; cut++) {
      const parser = new EventParser(LIMITS);
      expect([...parser.push(stream.subarray(0, cut)), ...parser.push(stream.subarray(cut))]).toEqual(expected);
      expect(parser.bufferedBytes).toBe(0);
    }
  });

  test("byte by byte, each event comes out when its last byte arrives", () => {
    const parser = new EventParser(LIMITS);
    const events = [];
    for (const byte of stream) events.push(...parser.push(Uint8Array.of(byte)));
    expect(events).toEqual(expected);
  });

  test("data after the header is merged over the header's own data", () => {
    const header = Buffer.from(`${JSON.stringify({ type: "synthesize", data: { text: "inline", voice: { name: "a" } }, data_length: 14 })}\n`);
    const parser = new EventParser(LIMITS);
    expect(parser.push(Buffer.concat([header, Buffer.from('{"text":"put"}')]))).toEqual([{ type: "synthesize", data: { text: "put", voice: { name: "a" } }, wireBytes: header.byteLength + 14 }]);
  });

  const refusals: [string, Uint8Array, RegExp][] = [
    ["a header that is not JSON", Buffer.from("hello\n"), /not UTF-8 JSON/],
    ["a header that is not an object", Buffer.from("[1,2]\n"), /not a JSON object/],
    ["a header without a type", Buffer.from('{"data":{}}\n'), /no type/],
    ["a negative data_length", Buffer.from('{"type":"x","data_length":-1}\n'), /data_length/],
    ["a fractional payload_length", Buffer.from('{"type":"x","payload_length":1.5}\n'), /payload_length/],
    ["a data_length past the limit", Buffer.from('{"type":"x","data_length":1025}\n'), /data_length 1025 exceeds/],
    ["a payload_length past the limit", Buffer.from('{"type":"x","payload_length":4097}\n'), /payload_length 4097 exceeds/],
    ["data that is not an object", Buffer.concat([Buffer.from('{"type":"x","data_length":2}\n'), Buffer.from("42")]), /data is not a JSON object/],
    ["inline data that is not an object", Buffer.from('{"type":"x","data":"text"}\n'), /data is not an object/],
    ["a header line past the limit, newline or not", Buffer.from(`{"type":"${"x".repeat(300)}"`), /longer than 256 bytes/],
  ];
  for (const [what, bytes, message] of refusals) {
    test(`refuses ${what}`, () => {
      const parser = new EventParser(LIMITS);
      expect(() => parser.push(bytes)).toThrow(WyomingProtocolError);
      expect(() => new EventParser(LIMITS).push(bytes)).toThrow(message);
    });
  }

  test("data longer than its type is read for is skipped as it arrives, never held; the event comes flagged and the stream reads on", () => {
    const limits: EventLimits = { ...LIMITS, readableDataBytes: (type) => (type === "synthesize-chunk" ? 16 : LIMITS.maxDataBytes) };
    const oversized = eventBytes("synthesize-chunk", { text: "x".repeat(900) }, Uint8Array.of(1, 2, 3));
    const oversizedHeaderBytes = oversized.indexOf(0x0a) + 1;
    const small = eventBytes("synthesize-chunk", { text: "ok" });
    const stream = Buffer.concat([oversized, small, eventBytes("describe")]);
    const wanted = [
      { type: "synthesize-chunk", data: {}, wireBytes: oversized.byteLength, skippedDataBytes: oversized.byteLength - oversizedHeaderBytes - 3 },
      { type: "synthesize-chunk", data: { text: "ok" }, wireBytes: small.byteLength },
      { type: "describe", data: {}, wireBytes: eventBytes("describe").byteLength },
    ];
    for (const pieceBytes of [1, 7, 64, stream.byteLength]) {
      const parser = new EventParser(limits);
      const events = [];
      let mostHeldBytes = 0;
      for (let offset = 0; offset < stream.byteLength; offset += pieceBytes) {
        events.push(...parser.push(stream.subarray(offset, offset + pieceBytes)));
        mostHeldBytes = Math.max(mostHeldBytes, parser.bufferedBytes);
      }
      expect(events).toEqual(wanted);
      // The 900 characters are dropped piece by piece: at most a header (or a piece) is ever held.
      if (pieceBytes < 64) expect(mostHeldBytes).toBeLessThan(oversizedHeaderBytes + pieceBytes);
    }
  });

  test("a header line past the limit is refused as soon as it is too long, before its newline", () => {
    const parser = new EventParser(LIMITS);
    expect(parser.push(Buffer.from("{".padEnd(256, " ")))).toEqual([]);
    expect(() => parser.push(Buffer.from(" "))).toThrow(/longer than 256 bytes/);
  });
});
