import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeSafetensors, encodeSafetensors, MalformedSafetensorsError, readSafetensorsHeader, readSafetensorsHeaderFromFile } from "../../src/formats/safetensors.ts";

let scratchDir: string;
beforeAll(() => {
  scratchDir = mkdtempSync(join(tmpdir(), "voxedge-safetensors-"));
});
afterAll(() => rmSync(scratchDir, { recursive: true, force: true }));

/** A file from a header object and a raw data section, padded like the reference writer. */
function buildFile(header: unknown, dataSection: Uint8Array = new Uint8Array(0), pad = true): Uint8Array {
  let json = JSON.stringify(header);
  if (pad) json = json.padEnd(Math.ceil(json.length / 8) * 8, " ");
  const headerBytes = new TextEncoder().encode(json);
  return withPrefix(BigInt(headerBytes.length), headerBytes, dataSection);
}

function withPrefix(headerLength: bigint, headerBytes: Uint8Array, dataSection: Uint8Array = new Uint8Array(0)): Uint8Array {
  const file = new Uint8Array(8 + headerBytes.length + dataSection.length);
  new DataView(file.buffer).setBigUint64(0, headerLength, true);
  file.set(headerBytes, 8);
  file.set(dataSection, 8 + headerBytes.length);
  return file;
}

function uint16Bytes(values: number[]): Uint8Array {
  const bytes = new Uint8Array(values.length * 2);
  values.forEach((value, index) => new DataView(bytes.buffer).setUint16(index * 2, value, true));
  return bytes;
}

describe("encode", () => {
  test("matches the format byte for byte: prefix, compact JSON, space padding, little-endian data", () => {
    const file = encodeSafetensors({ a: { dtype: "F32", shape: [2], data: new Float32Array([1, -2]) } }, { k: "v" });
    const json = '{"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}';
    const paddedLength = Math.ceil(json.length / 8) * 8;
    const expected = withPrefix(BigInt(paddedLength), new TextEncoder().encode(json.padEnd(paddedLength, " ")), Uint8Array.of(0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0));
    expect(file).toEqual(expected);
  });

  test("round-trips several tensors, metadata and multi-dimensional shapes", () => {
    const matrix = Float32Array.from({ length: 6 }, (_, index) => index / 7);
    const vector = Float32Array.of(Math.PI, -0, 1e-40, 3.4e38);
    const metadata = { name: "Zoë \"quoted\"\nline", created_at: "1700000000" };
    const file = encodeSafetensors({ z: { dtype: "F32", shape: [2, 3], data: matrix }, b: { dtype: "F32", shape: [4], data: vector } }, metadata);
    const header = readSafetensorsHeader(file);
    expect((header.dataStartBytes - 8) % 8).toBe(0);
    expect(header.fileSizeBytes).toBe(file.length);
    // Tensors are laid out in name order, as the reference writer does for a single dtype.
    expect(header.tensors.b!.dataOffsets).toEqual([0, 16]);
    expect(header.tensors.z!.dataOffsets).toEqual([16, 40]);
    const decoded = decodeSafetensors(file);
    expect(decoded.metadata).toEqual(metadata);
    expect(decoded.tensors.z).toEqual({ dtype: "F32", shape: [2, 3], data: matrix });
    expect(decoded.tensors.b!.data).toEqual(vector);
  });

  test("writes from a subarray view and decodes from an unaligned buffer", () => {
    const backing = Float32Array.from({ length: 10 }, (_, index) => index);
    const file = encodeSafetensors({ x: { dtype: "F32", shape: [3], data: backing.subarray(4, 7) } }, {});
    expect(new TextDecoder().decode(file.subarray(8, 8 + 10))).toBe('{"x":{"dty');
    const shifted = new Uint8Array(file.length + 1);
    shifted.set(file, 1);
    expect(decodeSafetensors(shifted.subarray(1)).tensors.x!.data).toEqual(Float32Array.of(4, 5, 6));
  });

  test("refuses shapes that do not match the data", () => {
    expect(() => encodeSafetensors({ x: { dtype: "F32", shape: [3], data: new Float32Array(2) } }, {})).toThrow("holds 3 elements but data has 2");
    expect(() => encodeSafetensors({ x: { dtype: "F32", shape: [-1], data: new Float32Array(0) } }, {})).toThrow("invalid shape");
    expect(() => encodeSafetensors({ __metadata__: { dtype: "F32", shape: [0], data: new Float32Array(0) } }, {})).toThrow("cannot name a tensor");
  });
});

describe("decode", () => {
  test("upcasts F16, including subnormals, infinities, NaN and negative zero", () => {
    const halves = [0x3c00, 0xc000, 0x3555, 0x0001, 0x03ff, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0x8000];
    const file = buildFile({ h: { dtype: "F16", shape: [halves.length], data_offsets: [0, halves.length * 2] } }, uint16Bytes(halves));
    const values = [...decodeSafetensors(file).tensors.h!.data];
    expect(values.slice(0, 3)).toEqual([1, -2, Math.fround(0.333251953125)]);
    expect(values[3]).toBe(Math.fround(2 ** -24));
    expect(values[4]).toBe(Math.fround(1023 * 2 ** -24));
    expect(values.slice(5, 8)).toEqual([65504, Infinity, -Infinity]);
    expect(values[8]).toBeNaN();
    expect(Object.is(values[9], -0)).toBe(true);
  });

  test("upcasts BF16 exactly (the top half of a float32)", () => {
    const halves = [0x3f80, 0xc040, 0x3eab, 0x0001, 0x7f80, 0xff80];
    const file = buildFile({ b: { dtype: "BF16", shape: [2, 3], data_offsets: [0, 12] } }, uint16Bytes(halves));
    const tensor = decodeSafetensors(file).tensors.b!;
    expect(tensor.shape).toEqual([2, 3]);
    expect([...tensor.data]).toEqual([1, -3, 0.333984375, Math.fround(2 ** -133), Infinity, -Infinity]);
  });

  test("names the tensor and dtype when it cannot be read as floats", () => {
    const file = buildFile({ ids: { dtype: "I64", shape: [1], data_offsets: [0, 8] } }, new Uint8Array(8));
    expect(readSafetensorsHeader(file).tensors.ids!.dtype).toBe("I64");
    expect(() => decodeSafetensors(file)).toThrow("Tensor 'ids' has dtype I64");
  });

  test("accepts an unpadded header, a zero-element tensor and no metadata", () => {
    const file = buildFile({ empty: { dtype: "F32", shape: [0, 4], data_offsets: [0, 0] }, one: { dtype: "F32", shape: [], data_offsets: [0, 4] } }, Uint8Array.of(0, 0, 0x80, 0x3f), false);
    const decoded = decodeSafetensors(file);
    expect(decoded.metadata).toEqual({});
    expect(decoded.tensors.empty!.data.length).toBe(0);
    expect([...decoded.tensors.one!.data]).toEqual([1]);
  });
});

describe("malformed files are rejected with a reason", () => {
  const f32 = (offsets: [number, number], shape = [1]) => ({ dtype: "F32", shape, data_offsets: offsets });
  const cases: { name: string; file: () => Uint8Array; reason: string }[] = [
    { name: "shorter than the prefix", file: () => new Uint8Array(5), reason: "shorter than the 8-byte length prefix" },
    { name: "header length over 100 MB", file: () => withPrefix(100_000_001n, new TextEncoder().encode("{}")), reason: "exceeds the 100000000-byte limit" },
    { name: "huge u64 header length", file: () => withPrefix(0xffffffffffffffffn, new TextEncoder().encode("{}")), reason: "exceeds" },
    { name: "header length past the end", file: () => withPrefix(64n, new TextEncoder().encode("{}")), reason: "runs past the end" },
    { name: "empty header", file: () => withPrefix(0n, new Uint8Array(0)), reason: "does not start with '{'" },
    { name: "header not starting with {", file: () => withPrefix(4n, new TextEncoder().encode(" {} ")), reason: "does not start with '{'" },
    { name: "invalid JSON", file: () => withPrefix(3n, new TextEncoder().encode("{x}")), reason: "not valid UTF-8 JSON" },
    { name: "invalid UTF-8", file: () => withPrefix(4n, Uint8Array.of(0x7b, 0xff, 0xfe, 0x7d)), reason: "not valid UTF-8 JSON" },
    { name: "metadata value not a string", file: () => buildFile({ __metadata__: { created_at: 5 } }), reason: "metadata 'created_at' is not a string" },
    { name: "metadata not an object", file: () => buildFile({ __metadata__: ["a"] }), reason: "'__metadata__' is not an object" },
    { name: "unknown dtype", file: () => buildFile({ t: { dtype: "F33", shape: [1], data_offsets: [0, 4] } }, new Uint8Array(4)), reason: "unknown dtype" },
    { name: "negative dimension", file: () => buildFile({ t: f32([0, 4], [-1]) }, new Uint8Array(4)), reason: "invalid shape" },
    { name: "fractional offset", file: () => buildFile({ t: f32([0, 3.5]) }, new Uint8Array(4)), reason: "invalid data_offsets" },
    { name: "reversed offsets", file: () => buildFile({ t: f32([4, 0]) }, new Uint8Array(4)), reason: "invalid data_offsets" },
    { name: "span does not fit dtype × shape", file: () => buildFile({ t: f32([0, 8]) }, new Uint8Array(8)), reason: "spans 8 bytes but F32 [1] needs 4" },
    { name: "gap between tensors", file: () => buildFile({ a: f32([0, 4]), b: f32([8, 12]) }, new Uint8Array(12)), reason: "tensor 'b' starts at 8, expected 4" },
    { name: "overlapping tensors", file: () => buildFile({ a: f32([0, 8], [2]), b: f32([4, 8]) }, new Uint8Array(8)), reason: "expected 8" },
    { name: "tensor past the end", file: () => buildFile({ a: f32([0, 4]) }, new Uint8Array(2)), reason: "past the 2-byte data section" },
    { name: "trailing bytes after the tensors", file: () => buildFile({ a: f32([0, 4]) }, new Uint8Array(6)), reason: "tensors cover 4 bytes but the data section is 6" },
  ];
  for (const { name, file, reason } of cases) {
    test(name, () => {
      const bytes = file();
      expect(() => readSafetensorsHeader(bytes)).toThrow(MalformedSafetensorsError);
      expect(() => decodeSafetensors(bytes)).toThrow(reason);
    });
  }
});

describe("header-only file read", () => {
  test("reads the header of a 1 GB file without reading its data", async () => {
    // A sparse file: the tensor's gigabyte is never written, so reading it would be slow and huge.
    const elementCount = 250_000_000;
    const path = join(scratchDir, "large.safetensors");
    const headerFile = buildFile({ __metadata__: { voice: "x" }, big: f32Info(elementCount) });
    const handle = await open(path, "w");
    await handle.write(headerFile);
    await handle.truncate(headerFile.length + elementCount * 4);
    await handle.close();
    const header = await readSafetensorsHeaderFromFile(path);
    expect(header.metadata).toEqual({ voice: "x" });
    expect(header.tensors.big).toEqual({ dtype: "F32", shape: [elementCount], dataOffsets: [0, elementCount * 4] });
    expect(header.dataStartBytes).toBe(headerFile.length);
    expect(header.fileSizeBytes).toBe(headerFile.length + elementCount * 4);
  });

  test("agrees with the in-memory reader and validates offsets against the file size", async () => {
    const file = encodeSafetensors({ audio: { dtype: "F32", shape: [3], data: Float32Array.of(1, 2, 3) } }, { name: "a" });
    const path = join(scratchDir, "small.safetensors");
    writeFileSync(path, file);
    expect(await readSafetensorsHeaderFromFile(path)).toEqual(readSafetensorsHeader(file));
    writeFileSync(path, file.subarray(0, file.length - 1));
    await expect(readSafetensorsHeaderFromFile(path)).rejects.toThrow("past the 11-byte data section");
    writeFileSync(path, file.subarray(0, 20));
    await expect(readSafetensorsHeaderFromFile(path)).rejects.toThrow("runs past the end of the 20-byte file");
    writeFileSync(path, new Uint8Array(3));
    await expect(readSafetensorsHeaderFromFile(path)).rejects.toThrow(MalformedSafetensorsError);
  });
});

function f32Info(elementCount: number) {
  return { dtype: "F32", shape: [elementCount], data_offsets: [0, elementCount * 4] };
}
