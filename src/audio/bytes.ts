/** Joins encoder output chunks into one buffer: codecs emit a frame or a page at a time. */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  let totalBytes = 0;
  for (const part of parts) totalBytes += part.length;
  const joined = new Uint8Array(totalBytes);
  let offset = 0;
  for (const part of parts) {
    joined.set(part, offset);
    offset += part.length;
  }
  return joined;
}
