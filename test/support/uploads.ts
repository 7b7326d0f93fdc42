/** Upload fixtures: tones as WAV files and multipart bodies shaped like a browser's. */
import { encodeWav } from "../../src/audio/wav.ts";

export function sine(seconds: number, frequencyHz: number, sampleRateHz = 16000): Float32Array {
  const samples = new Float32Array(Math.round(seconds * sampleRateHz));
  for (let i = 0; i < samples.length; i++) samples[i] = 0.4 * Math.sin((2 * Math.PI * frequencyHz * i) / sampleRateHz);
  return samples;
}

export function wavFile(seconds = 2, frequencyHz = 300, name = "voice.wav", type = "audio/wav"): File {
  return new File([encodeWav(sine(seconds, frequencyHz), 16000) as Uint8Array<ArrayBuffer>], name, { type });
}

/**
 * multipart/form-data written by hand, so each file part carries exactly the Content-Type a browser
 * would send (Bun's FormData serialiser replaces it with a guess from the file name).
 */
export async function multipartBody(fields: Record<string, string | File>): Promise<{ body: Uint8Array; contentType: string }> {
  const boundary = `----voxedge${crypto.randomUUID()}`;
  const encoder = new TextEncoder();
  const parts: Uint8Array[] = [];
  for (const [key, value] of Object.entries(fields)) {
    if (typeof value === "string") {
      parts.push(encoder.encode(`--${boundary}\r\nContent-Disposition: form-data; name="${key}"\r\n\r\n${value}\r\n`));
    } else {
      parts.push(encoder.encode(`--${boundary}\r\nContent-Disposition: form-data; name="${key}"; filename="${value.name}"\r\nContent-Type: ${value.type || "application/octet-stream"}\r\n\r\n`));
      parts.push(new Uint8Array(await value.arrayBuffer()));
      parts.push(encoder.encode("\r\n"));
    }
  }
  parts.push(encoder.encode(`--${boundary}--\r\n`));
  return { body: new Uint8Array(Buffer.concat(parts)), contentType: `multipart/form-data; boundary=${boundary}` };
}
