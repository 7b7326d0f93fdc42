/**
 * SSML on the routes: a break tag in plain text is real silence of the asked length between the parts, on the
 * speech route and the WebSocket; a <speak> document's say-as, sub and sentence bounds reach the model as
 * words; an element we do not read is dropped with its text kept and named in X-Ignored-Fields; malformed
 * SSML and impossible breaks are 400s before any audio.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ToneModel } from "../support/tone-model.ts";
import { startTestServer, type TestServer } from "../support/server.ts";
import { isJson, RecordingSocket } from "../support/ws-client.ts";

const RATE = 24000;
const post = (url: string, body: unknown) => fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

function samplesOf(bytes: ArrayBuffer): Int16Array {
  return new Int16Array(bytes);
}

/** The longest run of exact zeros. */
function longestSilence(samples: Int16Array): number {
  let longest = 0;
  let run = 0;
  for (const sample of samples) {
    run = sample === 0 ? run + 1 : 0;
    longest = Math.max(longest, run);
  }
  return longest;
}

describe("SSML", () => {
  let server: TestServer;
  const model = new ToneModel();
  beforeAll(async () => {
    server = await startTestServer(model);
  });
  afterAll(() => server.stop());
  const speech = (input: string, extra: Record<string, unknown> = {}) => post(`${server.url}/v1/audio/speech`, { input, response_format: "pcm", seed: 3, ...extra });

  for (const [tag, ms] of [['<break time="500ms"/>', 500], ['<break time="1.5s"/>', 1500], ['<break strength="strong"/>', 750], ["<break/>", 500]] as const) {
    test(`${tag} between two sentences: their audio with exactly ${ms} ms of silence between, the same seed the same bytes`, async () => {
      const first = samplesOf(await (await speech("The first part.")).arrayBuffer());
      const second = samplesOf(await (await speech("The second part.")).arrayBuffer());
      const response = await speech(`The first part. ${tag} The second part.`);
      expect(response.status).toBe(200);
      const whole = samplesOf(await response.arrayBuffer());
      const silence = (ms * RATE) / 1000;
      expect(whole.length).toBe(first.length + silence + second.length);
      expect([...whole.subarray(0, first.length)]).toEqual([...first]);
      expect(whole.subarray(first.length, first.length + silence).every((sample) => sample === 0)).toBe(true);
      expect([...whole.subarray(first.length + silence)]).toEqual([...second]);
      expect(model.jobs.slice(-2).map((job) => job.text)).toEqual(["The first part.", "The second part."]);
    });
  }

  test("a break in a WAV file and in an SSE stream: the same silence", async () => {
    const wav = await speech('One. <break time="250ms"/> Two.', { response_format: "wav" });
    expect(wav.status).toBe(200);
    const samples = new Int16Array((await wav.arrayBuffer()).slice(44));
    expect(longestSilence(samples)).toBeGreaterThanOrEqual(0.25 * RATE);
    const sse = await speech('One. <break time="250ms"/> Two.', { stream_format: "sse" });
    expect(sse.status).toBe(200);
    expect(await sse.text()).toContain("speech.audio.done");
  });

  test("a <speak> document: say-as, sub and sentence bounds read as words; prosody rate as the speed", async () => {
    const document = `<speak><p><s>Call <say-as interpret-as="telephone">555-0199</say-as></s><s>Your code is <say-as interpret-as="characters">AB12</say-as></s></p><p>I use <sub alias="World Wide Web Consortium">W3C</sub> rules, the <say-as interpret-as="ordinal">3</say-as> time</p></speak>`;
    const response = await speech(document);
    expect(response.status).toBe(200);
    await response.arrayBuffer();
    expect(model.jobs.at(-1)!.text.replace(/\s+/g, " ").trim()).toBe("Call five five five, zero one nine nine. Your code is A B one two. I use World Wide Web Consortium rules, the third time.");

    const normal = samplesOf(await (await speech("<speak>Hello there, friend.</speak>")).arrayBuffer());
    const fast = samplesOf(await (await speech('<speak><prosody rate="200%">Hello there, friend.</prosody></speak>')).arrayBuffer());
    expect(Math.abs(fast.length - normal.length / 2)).toBeLessThan(RATE * 0.02);
  });

  test("an element we do not read: its text kept, and named in X-Ignored-Fields", async () => {
    const response = await speech('<speak>This is <emphasis level="strong">very</emphasis> <phoneme alphabet="ipa" ph="x">good</phoneme>.</speak>');
    expect(response.status).toBe(200);
    await response.arrayBuffer();
    expect(model.jobs.at(-1)!.text.replace(/\s+/g, " ").trim()).toBe("This is very good.");
    expect(response.headers.get("x-ignored-fields")?.split(",")).toEqual(expect.arrayContaining(["<emphasis>", "<phoneme>"]));
  });

  for (const [input, message] of [
    ["<speak>Hello <break time='1s'></speak>", /SSML is not well-formed at line 1, column \d+/],
    ['Wait <break time="soon"/> now.', /break time "soon" is not a time/],
    ['Wait <break time="60s"/> now.', /longer than 10 s/],
    ['Wait <break strength="huge"/> now.', /break strength "huge" is not one of/],
    ['<speak><break time="1s"/></speak>', /nothing to say/],
  ] as const) {
    test(`${JSON.stringify(input)}: a 400 naming what is wrong, before any audio`, async () => {
      const response = await speech(input);
      expect(response.status).toBe(400);
      const body = (await response.json()) as { error: { message: string; param: string } };
      expect(body.error.message).toMatch(message);
      expect(body.error.param).toBe("input");
    });
  }

  test("SSML tags in plain text (a document streamed in sentences): dropped, their words kept, a sub's alias read", async () => {
    const response = await speech('Call <emphasis>now</emphasis>, <sub alias="World Wide Web Consortium">W3C</sub> said.');
    expect(response.status).toBe(200);
    await response.arrayBuffer();
    expect(model.jobs.at(-1)!.text).toBe("Call now, World Wide Web Consortium said.");
  });

  test("the WebSocket route: a break inside a streamed sentence is silence in that sentence's audio", async () => {
    const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/v1/audio/speech/stream`);
    await socket.opened;
    socket.send({ type: "session.config", voice: "low", response_format: "pcm", stream_audio: false });
    const text = 'Wait for it <break time="400ms"/> and here it is.';
    for (let at = 0; at < text.length; at += 4) socket.send({ type: "input.text", text: text.slice(at, at + 4) });
    socket.send({ type: "input.done" });
    await socket.waitFor((received) => received.some(isJson("session.done")));
    const audio = socket.received.filter((entry) => entry.kind === "binary").map((entry) => (entry.kind === "binary" ? entry.bytes : new Uint8Array()));
    const bytes = new Uint8Array(audio.reduce((sum, chunk) => sum + chunk.length, 0));
    let at = 0;
    for (const chunk of audio) {
      bytes.set(chunk, at);
      at += chunk.length;
    }
    expect(longestSilence(new Int16Array(bytes.buffer))).toBeGreaterThanOrEqual(0.4 * RATE);
    socket.close();
  });
});
