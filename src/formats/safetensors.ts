/**
 * The safetensors file format (https://github.com/huggingface/safetensors), read and written without I/O
 * except for the header-only file read:
 *
 *   [u64 little-endian N][N bytes of UTF-8 JSON header][data section]
 *
 * The header maps tensor names to `{dtype, shape, data_offsets: [begin, end]}` (offsets relative to the
 * data section) plus an optional `__metadata__` object of string → string. Validation follows the
 * reference implementation's `validate`: header ≤ 100 MB and starting with `{`, tensors laid out
 * back to back from offset 0 to the end of the file, each span exactly `elements × dtype size` bytes.
 *
 * Tensor bytes are little-endian; Float32Array views use host byte order, which is little-endian on every
 * platform Bun and Deno ship for (x86-64, arm64).
 */
import { open, type FileHandle } from "node:fs/promises";

const LENGTH_PREFIX_BYTES = 8;
/** The reference implementation's limit; a larger prefix means a corrupt or hostile file. */
const MAX_HEADER_BYTES = 100_000_000;
const METADATA_KEY = "__metadata__";
/** Writers pad the header with spaces so the data section starts 8-byte aligned. */
const HEADER_ALIGNMENT_BYTES = 8;

const DTYPE_BYTES = {
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E5M2: 1,
  F8_E4M3: 1,
  I16: 2,
  U16: 2,
  F16: 2,
  BF16: 2,
  I32: 4,
  U32: 4,
  F32: 4,
  I64: 8,
  U64: 8,
  F64: 8,
} as const;
export type SafetensorsDtype = keyof typeof DTYPE_BYTES;

export interface TensorInfo {
  dtype: SafetensorsDtype;
  shape: number[];
  /** [begin, end) in bytes, relative to the start of the data section. */
  dataOffsets: [number, number];
}

export interface SafetensorsHeader {
  metadata: Record<string, string>;
  tensors: Record<string, TensorInfo>;
  /** 8 + N: where the data section starts in the file. */
  dataStartBytes: number;
  fileSizeBytes: number;
}

/** A tensor upcast to float32, whatever its stored dtype (F32, F16 or BF16). */
export interface FloatTensor {
  dtype: SafetensorsDtype;
  shape: number[];
  data: Float32Array;
}

export interface F32TensorInput {
  dtype: "F32";
  shape: number[];
  data: Float32Array;
}

export class MalformedSafetensorsError extends Error {
  constructor(reason: string) {
    super(`Malformed safetensors file: ${reason}`);
    this.name = "MalformedSafetensorsError";
  }
}

export function encodeSafetensors(tensors: Record<string, F32TensorInput>, metadata: Record<string, string>): Uint8Array {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header[METADATA_KEY] = metadata;
  // The reference writer orders by dtype alignment, then name; with one dtype that is name order.
  const names = Object.keys(tensors).sort();
  let dataBytes = 0;
  for (const name of names) {
    if (name === METADATA_KEY) throw new Error(`'${METADATA_KEY}' cannot name a tensor`);
    const tensor = tensors[name]!;
    if (tensor.dtype !== "F32") throw new Error(`Tensor '${name}': only F32 can be written, got ${String(tensor.dtype)}`);
    const elementCount = elementCountOf(tensor.shape);
    if (elementCount === undefined) throw new Error(`Tensor '${name}' has an invalid shape [${tensor.shape.join(", ")}]`);
    if (elementCount !== tensor.data.length) throw new Error(`Tensor '${name}': shape [${tensor.shape.join(", ")}] holds ${elementCount} elements but data has ${tensor.data.length}`);
    header[name] = { dtype: tensor.dtype, shape: tensor.shape, data_offsets: [dataBytes, dataBytes + tensor.data.byteLength] };
    dataBytes += tensor.data.byteLength;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const paddedHeaderBytes = Math.ceil(json.length / HEADER_ALIGNMENT_BYTES) * HEADER_ALIGNMENT_BYTES;
  const file = new Uint8Array(LENGTH_PREFIX_BYTES + paddedHeaderBytes + dataBytes);
  new DataView(file.buffer).setBigUint64(0, BigInt(paddedHeaderBytes), true);
  file.set(json, LENGTH_PREFIX_BYTES);
  file.fill(0x20, LENGTH_PREFIX_BYTES + json.length, LENGTH_PREFIX_BYTES + paddedHeaderBytes);
  let offset = LENGTH_PREFIX_BYTES + paddedHeaderBytes;
  for (const name of names) {
    const values = tensors[name]!.data;
    file.set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength), offset);
    offset += values.byteLength;
  }
  return file;
}

/** Parses and validates the header of a whole file held in memory. */
export function readSafetensorsHeader(bytes: Uint8Array): SafetensorsHeader {
  const headerBytes = headerLengthFromPrefix(bytes.subarray(0, LENGTH_PREFIX_BYTES), bytes.length);
  return parseHeader(bytes.subarray(LENGTH_PREFIX_BYTES, LENGTH_PREFIX_BYTES + headerBytes), bytes.length);
}

/** Reads only the first 8 + N bytes of the file, so listing large files costs one small read each. */
export async function readSafetensorsHeaderFromFile(path: string): Promise<SafetensorsHeader> {
  const handle = await open(path, "r");
  try {
    const { size: fileSizeBytes } = await handle.stat();
    const prefix = await readExactly(handle, 0, Math.min(LENGTH_PREFIX_BYTES, fileSizeBytes));
    const headerBytes = headerLengthFromPrefix(prefix, fileSizeBytes);
    return parseHeader(await readExactly(handle, LENGTH_PREFIX_BYTES, headerBytes), fileSizeBytes);
  } finally {
    await handle.close();
  }
}

export function decodeSafetensors(bytes: Uint8Array): { metadata: Record<string, string>; tensors: Record<string, FloatTensor> } {
  const header = readSafetensorsHeader(bytes);
  const tensors: Record<string, FloatTensor> = {};
  for (const [name, info] of Object.entries(header.tensors)) {
    const [begin, end] = info.dataOffsets;
    const raw = bytes.subarray(header.dataStartBytes + begin, header.dataStartBytes + end);
    tensors[name] = { dtype: info.dtype, shape: info.shape, data: upcastToFloat32(raw, info.dtype, name) };
  }
  return { metadata: header.metadata, tensors };
}

/** A tensor as JS reads it: floats (F32, F16, BF16) upcast to float32, int64 as BigInt64Array. */
export type DecodedTensor = { dtype: "F32"; shape: number[]; data: Float32Array } | { dtype: "I64"; shape: number[]; data: BigInt64Array };

/**
 * Every tensor of the file, int64 ones included: upstream voice states carry `offset` int64 [1] (docs/pocket-tts.md §2.1) and
 * golden files carry int64 token ids, which `decodeSafetensors` (floats only) refuses.
 */
export function decodeSafetensorsWithInt64(bytes: Uint8Array): Record<string, DecodedTensor> {
  const header = readSafetensorsHeader(bytes);
  const tensors: Record<string, DecodedTensor> = {};
  for (const [name, info] of Object.entries(header.tensors)) {
    const [begin, end] = info.dataOffsets;
    const raw = bytes.subarray(header.dataStartBytes + begin, header.dataStartBytes + end);
    tensors[name] =
      info.dtype === "I64"
        ? { dtype: "I64", shape: info.shape, data: new BigInt64Array(new Uint8Array(raw).buffer) }
        : { dtype: "F32", shape: info.shape, data: upcastToFloat32(raw, info.dtype, name) };
  }
  return tensors;
}

function upcastToFloat32(raw: Uint8Array, dtype: SafetensorsDtype, name: string): Float32Array {
  // Copy into a fresh buffer so the views below are aligned whatever `raw`'s offset. Not raw.slice():
  // on a Node Buffer (what readFile returns) slice() is a view of the shared buffer, not a copy.
  const aligned = new Uint8Array(raw).buffer;
  switch (dtype) {
    case "F32":
      return new Float32Array(aligned);
    case "BF16": {
      // bfloat16 is the top half of a float32: shift it back into place.
      const halves = new Uint16Array(aligned);
      const words = new Uint32Array(halves.length);
      for (let index = 0; index < halves.length; index++) words[index] = halves[index]! << 16;
      return new Float32Array(words.buffer);
    }
    case "F16": {
      const halves = new Uint16Array(aligned);
      const values = new Float32Array(halves.length);
      for (let index = 0; index < halves.length; index++) values[index] = halfToFloat(halves[index]!);
      return values;
    }
    default:
      throw new Error(`Tensor '${name}' has dtype ${dtype}; only F32, F16 and BF16 can be read as floats`);
  }
}

/** IEEE 754 binary16 → number: 1 sign bit, 5 exponent bits (bias 15), 10 fraction bits. */
function halfToFloat(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 0x1f) return fraction === 0 ? sign * Infinity : NaN;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

function headerLengthFromPrefix(prefix: Uint8Array, fileSizeBytes: number): number {
  if (prefix.length < LENGTH_PREFIX_BYTES) throw new MalformedSafetensorsError(`file is ${fileSizeBytes} bytes, shorter than the 8-byte length prefix`);
  const headerBytes = new DataView(prefix.buffer, prefix.byteOffset, LENGTH_PREFIX_BYTES).getBigUint64(0, true);
  if (headerBytes > BigInt(MAX_HEADER_BYTES)) throw new MalformedSafetensorsError(`header length ${headerBytes} exceeds the ${MAX_HEADER_BYTES}-byte limit`);
  if (Number(headerBytes) + LENGTH_PREFIX_BYTES > fileSizeBytes) throw new MalformedSafetensorsError(`header length ${headerBytes} runs past the end of the ${fileSizeBytes}-byte file`);
  return Number(headerBytes);
}

function parseHeader(headerBytes: Uint8Array, fileSizeBytes: number): SafetensorsHeader {
  if (headerBytes[0] !== 0x7b) throw new MalformedSafetensorsError("header does not start with '{'");
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(headerBytes));
  } catch {
    throw new MalformedSafetensorsError("header is not valid UTF-8 JSON");
  }
  if (!isPlainObject(parsed)) throw new MalformedSafetensorsError("header is not a JSON object");

  const metadata: Record<string, string> = {};
  const tensors: Record<string, TensorInfo> = {};
  for (const [key, value] of Object.entries(parsed)) {
    if (key === METADATA_KEY) {
      if (!isPlainObject(value)) throw new MalformedSafetensorsError(`'${METADATA_KEY}' is not an object`);
      for (const [metadataKey, metadataValue] of Object.entries(value)) {
        if (typeof metadataValue !== "string") throw new MalformedSafetensorsError(`metadata '${metadataKey}' is not a string`);
        metadata[metadataKey] = metadataValue;
      }
    } else {
      tensors[key] = parseTensorInfo(key, value);
    }
  }

  // Spans must tile the data section exactly: sorted by begin, each starts where the last ended.
  const dataStartBytes = LENGTH_PREFIX_BYTES + headerBytes.length;
  const dataSectionBytes = fileSizeBytes - dataStartBytes;
  let expectedBegin = 0;
  for (const [name, info] of Object.entries(tensors).sort(([, a], [, b]) => a.dataOffsets[0] - b.dataOffsets[0] || a.dataOffsets[1] - b.dataOffsets[1])) {
    const [begin, end] = info.dataOffsets;
    if (begin !== expectedBegin) throw new MalformedSafetensorsError(`tensor '${name}' starts at ${begin}, expected ${expectedBegin} (overlapping or non-contiguous data)`);
    if (end > dataSectionBytes) throw new MalformedSafetensorsError(`tensor '${name}' ends at ${end}, past the ${dataSectionBytes}-byte data section`);
    expectedBegin = end;
  }
  if (expectedBegin !== dataSectionBytes) throw new MalformedSafetensorsError(`tensors cover ${expectedBegin} bytes but the data section is ${dataSectionBytes}`);
  return { metadata, tensors, dataStartBytes, fileSizeBytes };
}

function parseTensorInfo(name: string, value: unknown): TensorInfo {
  if (!isPlainObject(value)) throw new MalformedSafetensorsError(`tensor '${name}' is not an object`);
  const { dtype, shape, data_offsets: offsets } = value;
  if (typeof dtype !== "string" || !Object.hasOwn(DTYPE_BYTES, dtype)) throw new MalformedSafetensorsError(`tensor '${name}' has unknown dtype ${JSON.stringify(dtype)}`);
  if (!Array.isArray(shape)) throw new MalformedSafetensorsError(`tensor '${name}' has no shape array`);
  if (!Array.isArray(offsets) || offsets.length !== 2) throw new MalformedSafetensorsError(`tensor '${name}' has invalid data_offsets`);
  const [begin, end]: unknown[] = offsets;
  if (!isNonNegativeInteger(begin) || !isNonNegativeInteger(end) || begin > end) throw new MalformedSafetensorsError(`tensor '${name}' has invalid data_offsets`);
  const elementCount = elementCountOf(shape);
  if (elementCount === undefined) throw new MalformedSafetensorsError(`tensor '${name}' has an invalid shape`);
  const spanBytes = end - begin;
  const expectedBytes = elementCount * DTYPE_BYTES[dtype as SafetensorsDtype];
  if (spanBytes !== expectedBytes) throw new MalformedSafetensorsError(`tensor '${name}' spans ${spanBytes} bytes but ${dtype} [${shape.join(", ")}] needs ${expectedBytes}`);
  return { dtype: dtype as SafetensorsDtype, shape: shape as number[], dataOffsets: [begin, end] };
}

/** Product of the dimensions, or undefined when one is not a non-negative integer or the product overflows. */
function elementCountOf(shape: readonly unknown[]): number | undefined {
  let elementCount = 1;
  for (const dimension of shape) {
    if (!isNonNegativeInteger(dimension)) return undefined;
    elementCount *= dimension;
    if (!Number.isSafeInteger(elementCount)) return undefined;
  }
  return elementCount;
}

function isNonNegativeInteger(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

async function readExactly(handle: FileHandle, position: number, length: number): Promise<Uint8Array> {
  const buffer = new Uint8Array(length);
  let filled = 0;
  while (filled < length) {
    const { bytesRead } = await handle.read(buffer, filled, length - filled, position + filled);
    if (bytesRead === 0) throw new MalformedSafetensorsError("file ended while reading the header");
    filled += bytesRead;
  }
  return buffer;
}
