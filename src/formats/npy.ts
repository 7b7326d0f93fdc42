/** NumPy `.npy` arrays (the bundles' `bos_before_voice.npy`). */

/**
 * Parses a little-endian float32 C-order `.npy` (format versions 1–3): magic `\x93NUMPY`, version, header
 * length (u16 for v1, u32 for v2/3), a Python-dict header, then the data.
 */
export function parseNpyFloat32(bytes: Uint8Array, name: string): { shape: number[]; data: Float32Array } {
  const magic = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59];
  if (bytes.length < 10 || magic.some((byte, index) => bytes[index] !== byte)) throw new Error(`${name}: not an .npy file`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const major = bytes[6]!;
  const headerLengthBytes = major === 1 ? view.getUint16(8, true) : view.getUint32(8, true);
  const headerStart = major === 1 ? 10 : 12;
  const header = new TextDecoder().decode(bytes.subarray(headerStart, headerStart + headerLengthBytes));
  const descr = /'descr'\s*:\s*'([^']+)'/.exec(header)?.[1];
  const fortranOrder = /'fortran_order'\s*:\s*(True|False)/.exec(header)?.[1];
  const shapeText = /'shape'\s*:\s*\(([^)]*)\)/.exec(header)?.[1];
  if (descr !== "<f4" || fortranOrder !== "False" || shapeText === undefined) throw new Error(`${name}: expected a little-endian float32 C-order array, header ${header.trim()}`);
  const shape = shapeText.split(",").map((part) => part.trim()).filter((part) => part.length > 0).map(Number);
  const elementCount = shape.reduce((product, dim) => product * dim, 1);
  const dataStart = headerStart + headerLengthBytes;
  if (bytes.length - dataStart !== elementCount * 4) throw new Error(`${name}: shape [${shape.join(", ")}] needs ${elementCount * 4} data bytes, file has ${bytes.length - dataStart}`);
  return { shape, data: new Float32Array(new Uint8Array(bytes.subarray(dataStart)).buffer) };
}

/** A safetensors tensor decoded to a JS typed array: floats upcast to float32, int64 as BigInt64Array. */
