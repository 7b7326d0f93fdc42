/**
 * The protobuf wire format (protobuf.dev/programming-guides/encoding), read and written field by field:
 * enough for the three protobufs a bundle holds (ONNX ModelProto, SentencePiece ModelProto) without their
 * schemas, and for splicing a model's bytes without decoding its weights. Groups (wire types 3 and 4)
 * never occur in these schemas and are refused.
 */
export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_LENGTH_DELIMITED = 2;
export const WIRE_FIXED32 = 5;

/** Bytes that are not a well-formed protobuf message. */
export class ProtobufError extends Error {
  override name = "ProtobufError";
}

/** One field's header; a length-delimited or fixed field's payload is bytes [payloadStart, next). */
export interface ProtobufFieldHeader {
  number: number;
  wireType: number;
  /** A varint field's value: exact below 2^53 (every length, dim and enum here); larger ones only skipped. */
  value: number;
  payloadStart: number;
  /** Offset just past the field. */
  next: number;
}

/** A field of a message held in memory. */
export interface ProtobufField extends ProtobufFieldHeader {
  /** Offset of the field's tag. */
  start: number;
  payload: Uint8Array;
  /** The whole field as encoded (tag and payload), for copying it unchanged. */
  raw: Uint8Array;
}

/** Parses the field starting at `offset` of `bytes`; its payload may lie beyond `bytes` (a file read in windows). */
export function readFieldHeader(bytes: Uint8Array, offset: number): ProtobufFieldHeader {
  const tag = readVarint(bytes, offset);
  const field: ProtobufFieldHeader = { number: Math.floor(tag.value / 8), wireType: tag.value % 8, value: 0, payloadStart: tag.next, next: tag.next };
  if (field.wireType === WIRE_VARINT) {
    const varint = readVarint(bytes, tag.next);
    field.value = varint.value;
    field.next = varint.next;
  } else if (field.wireType === WIRE_LENGTH_DELIMITED) {
    const length = readVarint(bytes, tag.next);
    field.payloadStart = length.next;
    field.next = length.next + length.value;
  } else if (field.wireType === WIRE_FIXED64) {
    field.next = tag.next + 8;
  } else if (field.wireType === WIRE_FIXED32) {
    field.next = tag.next + 4;
  } else {
    throw new ProtobufError(`field ${field.number} has unsupported wire type ${field.wireType}`);
  }
  return field;
}

/** Decodes a varint at `offset` as a JS number. */
export function readVarint(bytes: Uint8Array, offset: number): { value: number; next: number } {
  let value = 0;
  let scale = 1;
  for (let index = offset; index < bytes.length && index < offset + 10; index++) {
    const byte = bytes[index]!;
    value += (byte & 0x7f) * scale;
    scale *= 128;
    if ((byte & 0x80) === 0) return { value, next: index + 1 };
  }
  throw new ProtobufError(offset + 10 <= bytes.length ? "a varint is longer than 10 bytes" : "truncated varint");
}

/** The fields of a message held in memory, in order. */
export function* protobufFields(bytes: Uint8Array): Generator<ProtobufField> {
  let position = 0;
  while (position < bytes.length) {
    const field = readFieldHeader(bytes, position);
    if (field.next > bytes.length) throw new ProtobufError(`field ${field.number} is truncated: it runs past the end of its message`);
    yield { ...field, start: position, payload: bytes.subarray(field.payloadStart, field.next), raw: bytes.subarray(position, field.next) };
    position = field.next;
  }
}

function pushVarint(bytes: number[], value: number): number[] {
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  bytes.push(rest);
  return bytes;
}

export function encodeVarint(value: number): Uint8Array {
  return Uint8Array.from(pushVarint([], value));
}

export function varintField(fieldNumber: number, value: number): Uint8Array {
  return Uint8Array.from(pushVarint(pushVarint([], fieldNumber * 8 + WIRE_VARINT), value));
}

/** The key and length of a length-delimited field whose payload of `length` bytes follows. */
export function lengthDelimitedHeader(fieldNumber: number, length: number): Uint8Array {
  return Uint8Array.from(pushVarint(pushVarint([], fieldNumber * 8 + WIRE_LENGTH_DELIMITED), length));
}

/** Key, length and payload in one allocation: formats/ imports nothing of ours, so not audio's concat either. */
export function lengthDelimitedField(fieldNumber: number, payload: Uint8Array): Uint8Array {
  const header = pushVarint(pushVarint([], fieldNumber * 8 + WIRE_LENGTH_DELIMITED), payload.length);
  const field = new Uint8Array(header.length + payload.length);
  field.set(header);
  field.set(payload, header.length);
  return field;
}
