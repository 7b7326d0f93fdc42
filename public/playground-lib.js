/**
 * The playground's pure parts: WAV files, snippets, text pacing, the spoken-sentence lookup, waveform peaks, the
 * page engine's float frames as pcm16 and its load progress.
 */

/** A 16-bit mono WAV file of the given pcm16 chunks. */
export function wavFile(chunks, sampleRate) {
  const dataBytes = chunks.reduce((sum, chunk) => sum + chunk.byteLength, 0);
  const bytes = new Uint8Array(44 + dataBytes);
  const view = new DataView(bytes.buffer);
  const ascii = (offset, text) => {
    for (let index = 0; index < text.length; index += 1) bytes[offset + index] = text.charCodeAt(index);
  };
  ascii(0, "RIFF");
  view.setUint32(4, 36 + dataBytes, true);
  ascii(8, "WAVE");
  ascii(12, "fmt ");
  view.setUint32(16, 16, true);
  view.setUint16(20, 1, true);
  view.setUint16(22, 1, true);
  view.setUint32(24, sampleRate, true);
  view.setUint32(28, sampleRate * 2, true);
  view.setUint16(32, 2, true);
  view.setUint16(34, 16, true);
  ascii(36, "data");
  view.setUint32(40, dataBytes, true);
  let offset = 44;
  for (const chunk of chunks) {
    // Little-endian int16 as sent; copied byte for byte, so the file is exactly what was heard.
    bytes.set(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength), offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

/**
 * Float samples (−1..1) as pcm16, what the worklet and the WAV download take: clamped, scaled by 32767 and
 * rounded half away from zero, as the server makes its pcm (src/audio/wav.ts floatToInt16), so the page
 * engine's audio and the server's are the same integers.
 * @param {Float32Array} samples
 * @returns {Int16Array}
 */
export function pcm16FromFloat(samples) {
  const pcm = new Int16Array(samples.length);
  for (let index = 0; index < samples.length; index += 1) {
    const scaled = Math.max(-1, Math.min(1, samples[index])) * 32767;
    pcm[index] = scaled < 0 ? -Math.round(-scaled) : Math.round(scaled);
  }
  return pcm;
}

/**
 * The page engine's load so far, from the latest progress of each file seen (`{loadedBytes, totalBytes,
 * from}` by file name). The total grows as the loader reaches more files: it is the sum over those seen.
 * @param {Map<string, { loadedBytes: number, totalBytes: number, from: "cache" | "server" | "hub" }>} files
 * @returns {{ loadedBytes: number, totalBytes: number, cachedBytes: number, fetchedBytes: number, percent: number }}
 */
export function loadProgress(files) {
  let loadedBytes = 0;
  let totalBytes = 0;
  let cachedBytes = 0;
  for (const file of files.values()) {
    loadedBytes += file.loadedBytes;
    totalBytes += file.totalBytes;
    if (file.from === "cache") cachedBytes += file.loadedBytes;
  }
  const percent = totalBytes > 0 ? Math.min(100, Math.floor((loadedBytes / totalBytes) * 100)) : 0;
  return { loadedBytes, totalBytes, cachedBytes, fetchedBytes: loadedBytes - cachedBytes, percent };
}

/**
 * Text cut as a language model emits it: word pieces of one to four characters with the spaces they
 * carry, so a sentence completes a piece at a time.
 */
export function llmPieces(text) {
  const pieces = [];
  for (const word of text.match(/\s*\S+/g) ?? []) {
    for (let offset = 0; offset < word.length; offset += 4) pieces.push(word.slice(offset, offset + 4));
  }
  const trailing = /\s+$/.exec(text)?.[0];
  if (trailing) pieces.push(trailing);
  return pieces;
}

/** Index of the sentence whose audio holds sample `played` (sentences: [{startSample}] in order), or -1. */
export function sentenceAt(sentences, played) {
  let found = -1;
  for (let index = 0; index < sentences.length; index += 1) {
    if (sentences[index].startSample <= played) found = index;
    else break;
  }
  return found;
}

/** Min/max of each of `columns` equal spans of pcm16 chunks, in −1..1, for drawing a waveform. */
export function waveformPeaks(chunks, columns) {
  const total = chunks.reduce((sum, chunk) => sum + chunk.length, 0);
  const peaks = Array.from({ length: columns }, () => ({ min: 0, max: 0 }));
  if (total === 0) return peaks;
  let position = 0;
  for (const chunk of chunks) {
    for (let index = 0; index < chunk.length; index += 1, position += 1) {
      const column = Math.min(columns - 1, Math.floor((position * columns) / total));
      const value = chunk[index] / 32768;
      const peak = peaks[column];
      if (value < peak.min) peak.min = value;
      if (value > peak.max) peak.max = value;
    }
  }
  return peaks;
}

const shellQuote = (text) => `'${text.replaceAll("'", `'"'"'`)}'`;

/**
 * The exact requests the page would make for `settings` ({input, voice, responseFormat, sampleRate, speed,
 * withApiKey}),
 * against the server at `origin`: a curl file download, the `openai` npm client, and the WebSocket stream.
 */
export function apiSnippets(settings, origin) {
  const file = { model: "tts-1", input: settings.input, voice: settings.voice, response_format: settings.responseFormat };
  if (settings.sampleRate) file.sample_rate = settings.sampleRate;
  if (settings.speed !== 1) file.speed = settings.speed;
  const extension = settings.responseFormat === "opus" ? "ogg" : settings.responseFormat;
  // The key itself never goes into a snippet someone may paste elsewhere: it is read from the environment.
  const curl = [
    `curl -s ${origin}/v1/audio/speech \\`,
    ...(settings.withApiKey ? [`  -H "Authorization: Bearer $VOXEDGE_API_KEY" \\`] : []),
    `  -H 'content-type: application/json' \\`,
    `  -d ${shellQuote(JSON.stringify(file))} \\`,
    `  -o speech.${extension}`,
  ].join("\n");
  const openai = [
    `import OpenAI from "openai";`,
    `const client = new OpenAI({ baseURL: ${JSON.stringify(`${origin}/v1`)}, apiKey: process.env.VOXEDGE_API_KEY ?? "unused" });`,
    `const speech = await client.audio.speech.create(${JSON.stringify(file, null, 2)});`,
    `await Bun.write("speech.${extension}", await speech.arrayBuffer());`,
  ].join("\n");
  const config = { type: "session.config", voice: settings.voice, response_format: "pcm", stream_audio: true };
  if (settings.sampleRate) config.sample_rate = settings.sampleRate;
  const websocket = [
    settings.withApiKey
      ? `const socket = new WebSocket(\`${origin.replace(/^http/, "ws")}/v1/audio/speech/stream?api_key=\${encodeURIComponent(VOXEDGE_API_KEY)}\`);`
      : `const socket = new WebSocket(${JSON.stringify(`${origin.replace(/^http/, "ws")}/v1/audio/speech/stream`)});`,
    `socket.binaryType = "arraybuffer";`,
    `socket.onopen = () => {`,
    `  socket.send(JSON.stringify(${JSON.stringify(config)}));`,
    `  socket.send(JSON.stringify({ type: "input.text", text: ${JSON.stringify(settings.input)} }));`,
    `  socket.send(JSON.stringify({ type: "input.done" }));`,
    `};`,
    `socket.onmessage = (event) => {`,
    `  if (typeof event.data !== "string") return play(new Int16Array(event.data)); // pcm16, audio.start's sample_rate`,
    `  const message = JSON.parse(event.data); // audio.start, audio.done, session.done, error`,
    `  if (message.type === "session.done") socket.send(JSON.stringify({ type: "session.close" }));`,
    `};`,
  ].join("\n");
  return { curl, openai, websocket };
}
