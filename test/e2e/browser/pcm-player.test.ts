/**
 * The playground's AudioWorklet player and pure helpers, run outside a browser: what goes out is the
 * stream as sent, whatever the chunking; the jitter buffer and underruns behave as the page reports them.
 */
import { describe, expect, test } from "bun:test";
// @ts-expect-error plain browser modules, without type declarations
import { MAX_BUFFER_SECONDS, PcmPlayer } from "../../../public/pcm-player.js";
// @ts-expect-error plain browser modules, without type declarations
import { apiSnippets, llmPieces, sentenceAt, waveformPeaks, wavFile } from "../../../public/playground-lib.js";
import { decodeWav } from "../../../src/audio/wav.ts";

const BLOCK = 128;

function tone(length: number, period = 50): Int16Array {
  return Int16Array.from({ length }, (_, index) => Math.round(12000 * Math.sin((2 * Math.PI * index) / period)));
}

function chunked(samples: Int16Array, sizes: number[]): Int16Array[] {
  const chunks: Int16Array[] = [];
  let offset = 0;
  for (let index = 0; offset < samples.length; index += 1) {
    const size = sizes[index % sizes.length]!;
    chunks.push(samples.slice(offset, offset + size));
    offset += size;
  }
  return chunks;
}

/** Renders blocks until the player has drained (or `maxBlocks`), returning everything it output. */
function playOut(player: PcmPlayer, maxBlocks = 10_000): Float32Array {
  const blocks: Float32Array[] = [];
  for (let count = 0; count < maxBlocks && player.state !== "drained"; count += 1) {
    const block = new Float32Array(BLOCK);
    player.render(block);
    blocks.push(block);
  }
  const output = new Float32Array(blocks.length * BLOCK);
  blocks.forEach((block, index) => output.set(block, index * BLOCK));
  return output;
}

describe("the playground's worklet player", () => {
  test("chunk borders are invisible: any chunking plays the same samples as one chunk", () => {
    const samples = tone(9000);
    const whole = new PcmPlayer(24000, 24000);
    whole.push(samples);
    whole.end();
    const reference = playOut(whole);

    const pieces = new PcmPlayer(24000, 24000);
    for (const chunk of chunked(samples, [1920, 7, 333, 1])) pieces.push(chunk);
    pieces.end();
    expect(playOut(pieces)).toEqual(reference);
    expect(pieces.samplesPlayed).toBe(samples.length);
    expect(pieces.underruns).toBe(0);
  });

  test("at equal rates the output is the input (one sample late: interpolation needs the next one), after the fade-in", () => {
    const samples = tone(4000);
    const player = new PcmPlayer(24000, 24000);
    player.push(samples);
    player.end();
    const output = playOut(player);
    const expected = Float32Array.from(samples, (value) => value / 32768);
    for (let index = 64; index < samples.length; index += 1) expect(output[index]).toBeCloseTo(expected[index - 1]!, 6);
  });

  test("converting 24 kHz to 48 kHz is continuous across chunk borders (no step larger than the signal's own)", () => {
    const samples = tone(6000, 120);
    const player = new PcmPlayer(24000, 48000);
    for (const chunk of chunked(samples, [480, 97])) player.push(chunk);
    player.end();
    const output = playOut(player);
    let largestStep = 0;
    for (let index = 200; index < 11_000; index += 1) largestStep = Math.max(largestStep, Math.abs(output[index]! - output[index - 1]!));
    const signalStep = (12000 / 32768) * ((2 * Math.PI) / 120) / 2;
    expect(largestStep).toBeLessThan(signalStep * 1.1);
    expect(player.samplesPlayed).toBe(samples.length);
  });

  test("waits for the jitter buffer, then plays; running dry mid-stream is one underrun, a fade (not a click) and a larger buffer", () => {
    const player = new PcmPlayer(24000, 24000, 0.06);
    player.push(tone(1000));
    const block = new Float32Array(BLOCK);
    player.render(block);
    expect(player.state).toBe("waiting");
    expect(Math.max(...block.map(Math.abs))).toBe(0);
    player.push(tone(1000));
    for (let count = 0; count < 20; count += 1) player.render(block);
    expect(player.underruns).toBe(1);
    expect(player.state).toBe("waiting");
    expect(player.samplesPlayed).toBe(2000);
    // After running dry the buffer waits for twice as much before it plays again.
    expect(player.startSamples).toBe(2 * 1440);
    player.push(tone(2000));
    player.render(block);
    expect(player.state).toBe("waiting");
    player.push(tone(1000));
    player.render(block);
    expect(player.state).toBe("playing");
    player.end();
    playOut(player);
    expect(player.state).toBe("drained");
    expect(player.underruns).toBe(1);
    expect(player.samplesPlayed).toBe(5000);
  });

  test("the buffer's target stops growing at MAX_BUFFER_SECONDS", () => {
    const player = new PcmPlayer(24000, 24000, 0.06);
    const block = new Float32Array(BLOCK);
    for (let spell = 0; spell < 8; spell += 1) {
      player.push(tone(player.startSamples));
      for (let count = 0; count < 400 && player.state !== "waiting"; count += 1) player.render(block);
      player.render(block);
      for (let count = 0; count < 400 && player.state === "playing"; count += 1) player.render(block);
    }
    expect(player.underruns).toBe(8);
    expect(player.startSamples).toBe(MAX_BUFFER_SECONDS * 24000);
  });

  test("a short stream that ends below the jitter buffer still plays; stop drops what is queued", () => {
    const short = new PcmPlayer(24000, 24000, 0.5);
    short.push(tone(300));
    short.end();
    playOut(short);
    expect(short.samplesPlayed).toBe(300);
    expect(short.underruns).toBe(0);

    const stopped = new PcmPlayer(24000, 24000);
    stopped.push(tone(24000));
    const block = new Float32Array(BLOCK);
    for (let count = 0; count < 10; count += 1) stopped.render(block);
    stopped.stop();
    stopped.push(tone(100));
    stopped.render(block);
    expect(stopped.state).toBe("stopped");
    expect(Math.max(...block.map(Math.abs))).toBe(0);
    expect(stopped.queue.length).toBe(0);
  });
});

describe("the playground's helpers", () => {
  test("the WAV download is exactly the pcm16 received", () => {
    const chunks = chunked(tone(5000), [1920, 77]);
    const wav = decodeWav(wavFile(chunks, 24000));
    expect(wav.sampleRateHz).toBe(24000);
    expect(Array.from(wav.channels[0]!, (value) => Math.round(value * 32768))).toEqual(Array.from(tone(5000)));
  });

  test("text typed at a model's pace comes in small pieces that join back to the text", () => {
    const text = "Hello there, general Kenobi!  How are you today?\n";
    const pieces: string[] = llmPieces(text);
    expect(pieces.join("")).toBe(text);
    expect(Math.max(...pieces.map((piece) => piece.trim().length))).toBeLessThanOrEqual(4);
  });

  test("the sentence being spoken is the last one that started at or before the sample played", () => {
    const starts = [{ startSample: 0 }, { startSample: 1000 }, { startSample: 2500 }];
    expect([0, 999, 1000, 2499, 2500, 99999].map((played) => sentenceAt(starts, played))).toEqual([0, 0, 1, 1, 2, 2]);
    expect(sentenceAt([], 10)).toBe(-1);
  });

  test("waveform peaks follow the signal's envelope", () => {
    const loud = tone(1000);
    const quiet = Int16Array.from(tone(1000), (value) => value / 10);
    const peaks: { min: number; max: number }[] = waveformPeaks([loud, quiet], 10);
    expect(peaks[0]!.max).toBeGreaterThan(0.3);
    expect(peaks[9]!.max).toBeLessThan(0.05);
    expect(peaks[9]!.max).toBeGreaterThan(0);
  });

  test("the snippets carry the current settings as valid requests", () => {
    const settings = { input: "It's a test.", voice: "alba", responseFormat: "mp3", sampleRate: 16000, speed: 1.25 };
    const { curl, openai, websocket } = apiSnippets(settings, "http://127.0.0.1:8123");
    const body = /-d '(.*)' \\/.exec(curl.replaceAll(`'"'"'`, "'"))![1]!;
    expect(JSON.parse(body)).toEqual({ model: "tts-1", input: "It's a test.", voice: "alba", response_format: "mp3", sample_rate: 16000, speed: 1.25 });
    expect(curl).toContain("http://127.0.0.1:8123/v1/audio/speech");
    expect(curl).toContain("-o speech.mp3");
    expect(openai).toContain('baseURL: "http://127.0.0.1:8123/v1"');
    expect(openai).toContain('"speed": 1.25');
    expect(websocket).toContain('"ws://127.0.0.1:8123/v1/audio/speech/stream"');
    expect(websocket).toContain('"stream_audio":true');
    expect(websocket).toContain('"sample_rate":16000');
    // Every line is valid JavaScript once play() exists.
    expect(() => new Function("WebSocket", "play", websocket)).not.toThrow();
    expect(curl).not.toContain("Authorization");
  });

  test("with an API key the snippets read it from the environment, never spelling it out", () => {
    const { curl, openai, websocket } = apiSnippets({ input: "Hi.", voice: "default", responseFormat: "wav", speed: 1, withApiKey: true }, "http://127.0.0.1:8123");
    expect(curl).toContain('-H "Authorization: Bearer $VOXEDGE_API_KEY"');
    expect(openai).toContain("process.env.VOXEDGE_API_KEY");
    expect(websocket).toContain("?api_key=${encodeURIComponent(VOXEDGE_API_KEY)}");
    expect(() => new Function("WebSocket", "play", "VOXEDGE_API_KEY", websocket)).not.toThrow();
  });
});
