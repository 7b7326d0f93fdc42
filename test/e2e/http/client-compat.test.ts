/**
 * Client habits, through a real port: the request bodies a client written against vLLM-Omni or OpenAI sends,
 * and what it needs back. A pydantic client dumps its request model whole, so every field it leaves unset
 * arrives as an explicit null.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { pocketParamsSchema } from "../../../src/models/pocket/params.ts";
import { decodeWithFfmpeg } from "../../support/ffmpeg.ts";
import { ToneModel } from "../../support/tone-model.ts";
import { startTestServer, type TestServer } from "../../support/server.ts";
import { parseSse } from "../../support/sse.ts";
import { isJson, RecordingSocket } from "../../support/ws-client.ts";

const TEXT = "hello world this is a test";

/** What our request fields look like in a pydantic dump of vLLM-Omni's request model when nothing is set. */
const UNSET_SPEECH_FIELDS = {
  model: null,
  voice: null,
  instructions: null,
  response_format: null,
  sample_rate: null,
  speed: null,
  seed: null,
  ref_audio: null,
  ref_text: null,
  language: null,
  max_new_tokens: null,
  extra_params: null,
  word_timestamps: null,
};

function post(server: TestServer, path: string, body: unknown): Promise<Response> {
  return fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

async function openSession(server: TestServer, config: Record<string, unknown>, text: string): Promise<RecordingSocket> {
  const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/v1/audio/speech/stream`);
  await socket.opened;
  socket.send({ type: "session.config", ...config });
  socket.send({ type: "input.text", text });
  socket.send({ type: "input.done" });
  return socket;
}

/**
 * A pydantic dump of vLLM-Omni's OpenAICreateSpeechRequest with nothing set: its defaults (wav, speed 1.0,
 * stream false, word_timestamps false) and null for everything else, its other models' fields included.
 */
const PYDANTIC_DEFAULT_DUMP = {
  ...UNSET_SPEECH_FIELDS,
  response_format: "wav",
  speed: 1.0,
  stream_format: null,
  stream: false,
  task_type: null,
  ref_audio_2: null,
  ambient_sound: null,
  duration_seconds: null,
  x_vector_only_mode: null,
  speaker_embedding: null,
  initial_codec_chunk_frames: null,
  non_streaming_mode: null,
  word_timestamps: false,
};

/** What a client of vLLM-Omni's Qwen3-TTS, MOSS-TTSD and MOSS-SoundEffect sets, none of which a model here reads. */
const OTHER_MODELS_SETTINGS = {
  task_type: "CustomVoice",
  language: "English",
  instructions: "Speak cheerfully",
  x_vector_only_mode: false,
  non_streaming_mode: true,
  initial_codec_chunk_frames: 0,
  speaker_embedding: [0.25, -0.5, 1],
  ref_audio_2: "https://example.com/second-speaker.wav",
  ambient_sound: "rain on a tin roof",
  duration_seconds: 3.5,
};
/** The names X-Ignored-Fields gives them, in the schema's order. */
const OTHER_MODELS_IGNORED = ["instructions", "language", "task_type", "x_vector_only_mode", "non_streaming_mode", "initial_codec_chunk_frames", "speaker_embedding", "ref_audio_2", "ambient_sound", "duration_seconds"];

let server: TestServer;
// Pocket's own extra_params schema, so the test sees what the served model reads and what it ignores.
const adapter = new ToneModel({ paramsSchema: pocketParamsSchema });
beforeAll(async () => {
  server = await startTestServer(adapter);
});
afterAll(() => server.stop());

describe("an explicit null means the field is not set", () => {
  const cases: Record<string, Record<string, unknown>> = {
    "every optional field null": { input: TEXT, ...UNSET_SPEECH_FIELDS, stream: null, stream_format: null },
    "stream null, stream_format null": { input: TEXT, stream: null, stream_format: null },
  };
  for (const [name, body] of Object.entries(cases)) {
    test(`POST /v1/audio/speech, ${name}: the same audio as the bare request`, async () => {
      const bare = new Uint8Array(await (await post(server, "/v1/audio/speech", { input: TEXT })).arrayBuffer());
      const response = await post(server, "/v1/audio/speech", body);
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toBe("audio/wav");
      expect(new Uint8Array(await response.arrayBuffer())).toEqual(bare);
      // null is no way around the schema: a name in no schema is still a 400 naming it, and input is required.
      const unknown = await post(server, "/v1/audio/speech", { ...body, colour: null });
      expect(unknown.status).toBe(400);
      expect((await unknown.json()).error).toMatchObject({ param: "colour", message: "Unknown field 'colour'" });
      const noInput = await post(server, "/v1/audio/speech", { ...body, input: null });
      expect(noInput.status).toBe(400);
      expect((await noInput.json()).error.param).toBe("input");
    });
  }

  test("batch: null batch defaults and null item fields; a null item field leaves the batch default in force", async () => {
    const response = await post(server, "/v1/audio/speech/batch", {
      ...UNSET_SPEECH_FIELDS,
      voice: "high",
      items: [{ input: TEXT, ...UNSET_SPEECH_FIELDS }, { input: TEXT, ...UNSET_SPEECH_FIELDS, voice: "low" }],
    });
    expect(response.status).toBe(200);
    const body = await response.json();
    expect(body.results.map((result: any) => [result.status, result.media_type])).toEqual([
      ["success", "audio/wav"],
      ["success", "audio/wav"],
    ]);
    expect(adapter.jobs.slice(-2).map((job) => job.voice)).toEqual(["high", "low"]);
  });

  test("WebSocket session.config with every field null speaks with the defaults", async () => {
    const socket = await openSession(server, { ...UNSET_SPEECH_FIELDS, stream_audio: null, split_granularity: null }, "Hello there.");
    await socket.waitFor((received) => received.some(isJson("session.done")));
    expect(socket.json().find((message) => message.type === "audio.start")).toMatchObject({ format: "wav", sample_rate: 24000 });
    expect(socket.json().filter((message) => message.type === "error")).toEqual([]);
    socket.close();
  });
});

describe("vLLM-Omni's fields: accepted, and what the model cannot use is named in X-Ignored-Fields", () => {
  const bareAudio = async () => new Uint8Array(await (await post(server, "/v1/audio/speech", { input: TEXT })).arrayBuffer());

  test("a pydantic client's default dump is served as the bare request, with nothing ignored", async () => {
    const response = await post(server, "/v1/audio/speech", { input: TEXT, ...PYDANTIC_DEFAULT_DUMP });
    expect(response.status).toBe(200);
    expect(response.headers.get("x-ignored-fields")).toBeNull();
    expect(new Uint8Array(await response.arrayBuffer())).toEqual(await bareAudio());
  });

  test("Qwen3-TTS and MOSS fields and an unread extra_params key: 200, the same audio, each named as ignored", async () => {
    const response = await post(server, "/v1/audio/speech", { input: TEXT, ...PYDANTIC_DEFAULT_DUMP, ...OTHER_MODELS_SETTINGS, extra_params: { temperature: 0.7, top_k: 50 } });
    expect(response.status).toBe(200);
    expect(response.headers.get("x-ignored-fields")!.split(",")).toEqual([...OTHER_MODELS_IGNORED, "extra_params.top_k"]);
    const job = adapter.jobs.at(-1)!;
    expect(job.extraParams).toEqual({ temperature: 0.7 });
    expect(job.instructions).toBeUndefined();
    await response.arrayBuffer();
  });

  test("language Auto is what every model here does, so it is not named", async () => {
    const response = await post(server, "/v1/audio/speech", { input: TEXT, language: "Auto", task_type: "Base" });
    expect(response.headers.get("x-ignored-fields")).toBe("task_type");
    await response.arrayBuffer();
  });

  test("raw streams carry the header; SSE carries it and ignored_fields in speech.audio.done", async () => {
    const raw = await post(server, "/v1/audio/speech", { input: TEXT, stream_format: "audio", task_type: "Base", extra_params: { top_k: 5 } });
    expect(raw.status).toBe(200);
    expect(raw.headers.get("x-ignored-fields")).toBe("task_type,extra_params.top_k");
    await raw.arrayBuffer();
    const sse = await post(server, "/v1/audio/speech", { input: TEXT, stream: true, task_type: "Base", extra_params: { top_k: 5 } });
    expect(sse.headers.get("x-ignored-fields")).toBe("task_type,extra_params.top_k");
    const done = parseSse(await sse.text()).at(-1)!;
    expect(done.event).toBe("speech.audio.done");
    expect(done.data.ignored_fields).toEqual(["task_type", "extra_params.top_k"]);
  });

  test("batch: each result names what was ignored for it, from its own fields and the batch defaults", async () => {
    const { stream: _stream, stream_format: _streamFormat, ...batchDefaults } = PYDANTIC_DEFAULT_DUMP;
    const response = await post(server, "/v1/audio/speech/batch", {
      ...batchDefaults,
      task_type: "CustomVoice",
      items: [{ input: TEXT }, { input: TEXT, non_streaming_mode: false, extra_params: { top_k: 5 } }],
    });
    const body = await response.json();
    expect(body.results.map((result: any) => [result.status, result.ignored_fields])).toEqual([
      ["success", ["task_type"]],
      ["success", ["task_type", "non_streaming_mode", "extra_params.top_k"]],
    ]);
  });

  test("WebSocket: session.config takes the same fields; audio.done names what was ignored", async () => {
    const socket = await openSession(server, { ...OTHER_MODELS_SETTINGS, extra_params: { top_k: 5 } }, "Hello there.");
    await socket.waitFor((received) => received.some(isJson("session.done")));
    expect(socket.json().filter((message) => message.type === "error")).toEqual([]);
    expect(socket.json().find((message) => message.type === "audio.done").ignored_fields).toEqual([...OTHER_MODELS_IGNORED, "extra_params.top_k"]);
    socket.close();
  });

  test("the fields keep vLLM-Omni's types: a wrong one is a 400 naming it", async () => {
    const wrong: Record<string, unknown> = {
      task_type: "Clone",
      x_vector_only_mode: "yes",
      initial_codec_chunk_frames: -1,
      speaker_embedding: [1, "two"],
      duration_seconds: -2,
      ambient_sound: 7,
    };
    for (const [field, value] of Object.entries(wrong)) {
      const response = await post(server, "/v1/audio/speech", { input: TEXT, [field]: value });
      expect({ field, status: response.status }).toEqual({ field, status: 400 });
      const error = (await response.json()).error;
      expect(error.param).toBe(field);
      // Refused for its value, as a field the schema knows.
      expect(error.message).toContain(field);
      expect(error.message).not.toContain("Unknown field");
    }
  });
});

describe("speaker is another name for voice", () => {
  const lastVoice = () => adapter.jobs.at(-1)!.voice;

  test("POST /v1/audio/speech: speaker picks the voice, the same audio as voice", async () => {
    const bySpeaker = await post(server, "/v1/audio/speech", { input: TEXT, voice: null, speaker: "high" });
    expect(bySpeaker.status).toBe(200);
    expect(lastVoice()).toBe("high");
    const byVoice = await post(server, "/v1/audio/speech", { input: TEXT, voice: "high" });
    expect(new Uint8Array(await bySpeaker.arrayBuffer())).toEqual(new Uint8Array(await byVoice.arrayBuffer()));
    const agreeing = await post(server, "/v1/audio/speech", { input: TEXT, voice: "HIGH", speaker: "high" });
    expect(agreeing.status).toBe(200);
    await agreeing.arrayBuffer();
  });

  test("voice and speaker naming different voices is a 400 naming speaker", async () => {
    const response = await post(server, "/v1/audio/speech", { input: TEXT, voice: "low", speaker: "high" });
    expect(response.status).toBe(400);
    const error = (await response.json()).error;
    expect(error).toMatchObject({ param: "speaker", code: 400 });
    expect(error.message).toContain("another name for voice");
  });

  test("batch: an item's speaker overrides the batch's voice, and a batch-level speaker is a default", async () => {
    await (await post(server, "/v1/audio/speech/batch", { voice: "high", items: [{ input: TEXT, speaker: "low" }] })).json();
    expect(lastVoice()).toBe("low");
    await (await post(server, "/v1/audio/speech/batch", { speaker: "high", items: [{ input: TEXT }] })).json();
    expect(lastVoice()).toBe("high");
  });

  test("WebSocket session.config: speaker picks the voice", async () => {
    const socket = await openSession(server, { speaker: "high" }, "Hello there.");
    await socket.waitFor((received) => received.some(isJson("session.done")));
    expect(lastVoice()).toBe("high");
    socket.close();
  });
});

test("usage headers come under vLLM-Omni's names too, with the same values, and a browser may read them all", async () => {
  const response = await fetch(`${server.url}/v1/audio/speech`, {
    method: "POST",
    headers: { "content-type": "application/json", origin: "http://app.example" },
    body: JSON.stringify({ input: TEXT, task_type: "Base" }),
  });
  await response.arrayBuffer();
  const usage = ["Input-Tokens", "Output-Tokens", "Total-Tokens", "Input-Text-Tokens", "Input-Audio-Tokens"];
  const ours = usage.map((name) => response.headers.get(`X-${name}`));
  const vllmOmni = usage.map((name) => response.headers.get(`X-VLLM-OMNI-${name.toUpperCase()}`));
  expect(ours).toEqual(["6", "13", "19", "6", "0"]);
  expect(vllmOmni).toEqual(ours);
  const exposed = response.headers.get("access-control-expose-headers")!.toLowerCase().split(/\s*,\s*/);
  for (const name of usage) expect(exposed).toEqual(expect.arrayContaining([`x-${name}`.toLowerCase(), `x-vllm-omni-${name}`.toLowerCase()]));
  expect(exposed).toContain("x-ignored-fields");
});

test("stream_format decides streaming whatever stream says; stream alone means SSE", async () => {
  const deliveries: [Record<string, unknown>, string, "file" | "raw stream" | "sse"][] = [
    [{ stream: false, stream_format: "audio" }, "audio/wav", "raw stream"],
    [{ stream: true, stream_format: "audio" }, "audio/wav", "raw stream"],
    [{ stream: false, stream_format: "sse" }, "text/event-stream", "sse"],
    [{ stream: true }, "text/event-stream", "sse"],
    [{ stream: false }, "audio/wav", "file"],
  ];
  for (const [fields, contentType, delivery] of deliveries) {
    const response = await post(server, "/v1/audio/speech", { input: TEXT, ...PYDANTIC_DEFAULT_DUMP, ...fields });
    const bytes = new Uint8Array(await response.arrayBuffer());
    const dataSize = response.status === 200 && bytes.length >= 44 ? new DataView(bytes.buffer).getUint32(40, true) : undefined;
    // A raw WAV stream cannot know its size: its header says 0xFFFFFFFF; a file's says how much follows.
    const seen = contentType === "text/event-stream" ? "sse" : dataSize === 0xffffffff ? "raw stream" : dataSize === bytes.length - 44 ? "file" : "broken";
    expect({ fields, status: response.status, contentType: response.headers.get("content-type"), delivery: seen }).toEqual({ fields, status: 200, contentType, delivery });
  }
});

describe("SSE deltas join into what the format says", () => {
  const deltasOf = async (body: Record<string, unknown>) => {
    const events = parseSse(await (await post(server, "/v1/audio/speech", { input: TEXT, seed: 11, ...body })).text());
    return events.filter((event) => event.event === "speech.audio.delta").map((event) => event.data);
  };

  test("wav (the default): the first delta opens with the 44-byte streaming header, every delta says wav, the joined deltas are the raw wav stream and play; pcm deltas stay plain pcm16", async () => {
    const deltas = await deltasOf({ stream: true });
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.map((delta) => delta.response_format)).toEqual(deltas.map(() => "wav"));
    const joined = new Uint8Array(Buffer.concat(deltas.map((delta) => Buffer.from(delta.audio, "base64"))));
    const header = new DataView(joined.buffer, 0, 44);
    expect(new TextDecoder().decode(joined.subarray(0, 4))).toBe("RIFF");
    expect(new TextDecoder().decode(joined.subarray(8, 12))).toBe("WAVE");
    expect([header.getUint32(4, true), header.getUint32(40, true), header.getUint32(24, true)]).toEqual([0xffffffff, 0xffffffff, 24000]);
    // The header is in the first delta only; the others are pcm16.
    expect(Buffer.from(deltas[1].audio, "base64").subarray(0, 4).toString("latin1")).not.toBe("RIFF");
    const rawStream = new Uint8Array(await (await post(server, "/v1/audio/speech", { input: TEXT, seed: 11, stream_format: "audio" })).arrayBuffer());
    expect(joined).toEqual(rawStream);
    const decoded = decodeWithFfmpeg(joined);
    expect({ rateHz: decoded.sampleRateHz, samples: decoded.samples.length }).toEqual({ rateHz: 24000, samples: (joined.length - 44) / 2 });

    // pcm: plain pcm16 deltas that say pcm, joined the same bytes as the pcm file (and as the wav's samples).
    const pcmDeltas = await deltasOf({ stream_format: "sse", response_format: "pcm" });
    expect(pcmDeltas.map((delta) => delta.response_format)).toEqual(pcmDeltas.map(() => "pcm"));
    const joinedPcm = new Uint8Array(Buffer.concat(pcmDeltas.map((delta) => Buffer.from(delta.audio, "base64"))));
    const file = new Uint8Array(await (await post(server, "/v1/audio/speech", { input: TEXT, seed: 11, response_format: "pcm" })).arrayBuffer());
    expect(joinedPcm).toEqual(file);
    expect(joined.subarray(44)).toEqual(file);
  });
});

describe("seed is an int64, exact beyond 2^53", () => {
  /** JSON.stringify cannot write a bigint: the body is written as a pydantic client writes an int. */
  const postSeed = (path: string, seed: string, body: Record<string, unknown> = { input: TEXT, response_format: "pcm" }) =>
    fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: `${JSON.stringify(body).slice(0, -1)},"seed":${seed}}` });
  const audioFor = async (seed: string) => {
    const response = await postSeed("/v1/audio/speech", seed);
    expect({ seed, status: response.status }).toEqual({ seed, status: 200 });
    return new Uint8Array(await response.arrayBuffer());
  };

  test("two seeds above 2^53 a double cannot tell apart speak differently; the same one twice gives the same bytes", async () => {
    const twoTo53 = await audioFor("9007199254740992");
    const next = await audioFor("9007199254740993");
    expect(adapter.jobs.at(-1)!.seed).toBe(9007199254740993n);
    expect(next).not.toEqual(twoTo53);
    expect(await audioFor("9007199254740993")).toEqual(next);
    expect(await audioFor("9223372036854775807")).toEqual(await audioFor("9223372036854775807"));
    expect(adapter.jobs.at(-1)!.seed).toBe(2n ** 63n - 1n);
    await audioFor("-9223372036854775808");
    expect(adapter.jobs.at(-1)!.seed).toBe(-(2n ** 63n));
    // A seed a double holds keeps its audio: small seeds speak as they always did.
    expect(await audioFor("42")).toEqual(await audioFor("42.0"));
  });

  test("outside int64 is a 400 naming seed", async () => {
    for (const seed of ["9223372036854775808", "-9223372036854775809", "1e30", "1.5"]) {
      const response = await postSeed("/v1/audio/speech", seed);
      expect({ seed, status: response.status }).toEqual({ seed, status: 400 });
      const error = (await response.json()).error;
      expect(error.param).toBe("seed");
      expect(error.message).toContain("-2^63 to 2^63 - 1");
    }
  });

  test("batch items and defaults and WebSocket session.config carry the exact seed", async () => {
    const batch = await postSeed("/v1/audio/speech/batch", "9007199254740993", { items: [{ input: TEXT }] });
    expect((await batch.json()).results[0].status).toBe("success");
    expect(adapter.jobs.at(-1)!.seed).toBe(9007199254740993n);

    const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/v1/audio/speech/stream`);
    await socket.opened;
    socket.sendRaw('{"type":"session.config","seed":9223372036854775807}');
    socket.send({ type: "input.text", text: "Hello there." });
    socket.send({ type: "input.done" });
    await socket.waitFor((received) => received.some(isJson("session.done")));
    expect(adapter.jobs.at(-1)!.seed).toBe(2n ** 63n - 1n);
    socket.close();
  });
});
