/**
 * Does a voice encode hold up the streams that are playing? N raw pcm streams play; once they are running, one
 * request clones a voice from a long ref_audio. Per stream: the longest gap between chunks before the encode
 * and while it runs, and whether a player with a 200 ms jitter buffer would have run dry.
 *
 *   bun run voxedge serve --model /tmp/pocket-full --port 8123 &
 *   bun bench/encode-during-playback.ts --url http://127.0.0.1:8123 --streams 4 --seconds 29.5
 */
import { parseArgs } from "node:util";
import { encodeWav } from "../src/audio/wav.ts";

const { values } = parseArgs({ options: { url: { type: "string", default: "http://127.0.0.1:8123" }, streams: { type: "string", default: "4" }, seconds: { type: "string", default: "29.5" }, label: { type: "string", default: "" } } });
const streamCount = Number(values.streams);
const rateHz = 24_000;
const clip = new Float32Array(Math.round(Number(values.seconds) * rateHz));
for (let index = 0; index < clip.length; index++) clip[index] = 0.3 * Math.sin((2 * Math.PI * 180 * index) / rateHz) * (1 + 0.5 * Math.sin(index / 3000));
const refAudio = `data:audio/wav;base64,${Buffer.from(encodeWav(clip, rateHz)).toString("base64")}`;
// The playing streams clone a short voice, encoded once (prompts are cached by content) before they start.
const shortClip = new Float32Array(3 * rateHz);
for (let index = 0; index < shortClip.length; index++) shortClip[index] = 0.3 * Math.sin((2 * Math.PI * 220 * index) / rateHz);
const playingVoice = `data:audio/wav;base64,${Buffer.from(encodeWav(shortClip, rateHz)).toString("base64")}`;
const text = "The quick brown fox jumps over the lazy dog while the morning sun rises slowly above the quiet hills and the river keeps running toward the distant sea.";

interface Arrival {
  atMs: number;
  audioSeconds: number;
}

async function playStream(seed: number, arrivals: Arrival[]): Promise<void> {
  const response = await fetch(`${values.url}/v1/audio/speech`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input: text, stream_format: "audio", response_format: "pcm", seed, max_new_tokens: 250, ref_audio: playingVoice }),
  });
  if (response.status !== 200) throw new Error(`stream ${seed}: ${response.status} ${await response.text()}`);
  const reader = response.body!.getReader();
  let bytes = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    bytes += value.byteLength;
    arrivals.push({ atMs: performance.now(), audioSeconds: bytes / 2 / 24_000 });
  }
}

const warm = await fetch(`${values.url}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "Hi.", ref_audio: playingVoice, max_new_tokens: 2 }) });
if (warm.status !== 200) throw new Error(`warm-up: ${warm.status} ${await warm.text()}`);
await warm.arrayBuffer();
const arrivalsByStream = Array.from({ length: streamCount }, () => [] as Arrival[]);
const playing = arrivalsByStream.map((arrivals, index) => playStream(index + 1, arrivals));
// Let every stream reach its steady pace first.
await Bun.sleep(2000);
const encodeStartMs = performance.now();
const cloned = await fetch(`${values.url}/v1/audio/speech`, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ input: "Hello.", ref_audio: refAudio, max_new_tokens: 10, seed: 9 }),
});
await cloned.arrayBuffer();
const encodeEndMs = performance.now();
await Promise.all(playing);

const maxGapMs = (arrivals: Arrival[], fromMs: number, toMs: number) => {
  let longest = 0;
  for (let index = 1; index < arrivals.length; index++) {
    const { atMs } = arrivals[index]!;
    if (atMs < fromMs || arrivals[index - 1]!.atMs > toMs) continue;
    longest = Math.max(longest, atMs - arrivals[index - 1]!.atMs);
  }
  return longest;
};
/** A player that starts once 200 ms are buffered and plays in real time: does it ever run dry? */
const ranDry = (arrivals: Arrival[]) => {
  const start = arrivals.find((arrival) => arrival.audioSeconds >= 0.2);
  if (!start) return false;
  // Dry when, by the time a chunk arrives, the player has played past everything received before it.
  return arrivals.some((arrival, index) => index > 0 && arrival.atMs > start.atMs && (arrival.atMs - start.atMs) / 1000 > arrivals[index - 1]!.audioSeconds);
};

const before = arrivalsByStream.map((arrivals) => maxGapMs(arrivals, encodeStartMs - 2500, encodeStartMs));
const during = arrivalsByStream.map((arrivals) => maxGapMs(arrivals, encodeStartMs, encodeEndMs));
const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!;
console.log(`| label | streams | clone request ms | longest gap before, median / max ms | longest gap during the encode, median / max ms | ran dry |`);
console.log(`|---|---|---|---|---|---|`);
console.log(`| ${values.label} | ${streamCount} | ${(encodeEndMs - encodeStartMs).toFixed(0)} (${cloned.status}) | ${median(before).toFixed(0)} / ${Math.max(...before).toFixed(0)} | ${median(during).toFixed(0)} / ${Math.max(...during).toFixed(0)} | ${arrivalsByStream.filter(ranDry).length} / ${streamCount} |`);
