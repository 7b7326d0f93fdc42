/** Joins chunks into one array: codecs emit a frame or a page at a time, models a frame at a time. */
function concatInto<T extends Uint8Array | Float32Array>(parts: readonly T[], joined: T): T {
  let offset = 0;
  for (const part of parts) {
    joined.set(part, offset);
    offset += part.length;
  }
  return joined;
}

const totalLength = (parts: readonly { length: number }[]) => parts.reduce((sum, part) => sum + part.length, 0);

export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  return concatInto(parts, new Uint8Array(totalLength(parts)));
}

/** A single part is returned as it is, without a copy. */
export function concatFloat32(parts: readonly Float32Array[]): Float32Array {
  if (parts.length === 1) return parts[0]!;
  return concatInto(parts, new Float32Array(totalLength(parts)));
}
