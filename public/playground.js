/**
 * The playground: speaks over the WebSocket route with stream_audio, playing pcm16 through an AudioWorklet
 * as it arrives; shows the live numbers, the sentence being spoken and a waveform; uploads, records and
 * deletes voices; makes files; writes the API calls for the current settings.
 *
 * Tests (and anyone curious) read the playback state from window.voxedgePlayground.
 */
import { apiSnippets, llmPieces, sentenceAt, waveformPeaks, wavFile } from "./playground-lib.js";

const $ = (id) => document.getElementById(id);

/** Seconds of audio the worklet holds before it starts playing, and again after an underrun. */
const JITTER_BUFFER_SECONDS = 0.06;
/** A language model writes ~40 tokens a second; one piece per token. */
const TYPING_INTERVAL_MS = 25;

const playground = {
  state: "idle",
  samplesPlayed: 0,
  firstAudioMs: null,
  underruns: 0,
  lastError: null,
  /** Samples played when the server's session.done arrived (null until it does). */
  samplesPlayedAtSessionDone: null,
  samplesReceived: 0,
  sampleRate: null,
  /** The loudest sample the worklet has put out (0..1), measured after it, on the way to the speakers. */
  peakLevel: 0,
  sentences: [],
};
window.voxedgePlayground = playground;

const server = { model: null, uploaded: [] };

/** Requests relative to the page, so the playground works behind a reverse proxy's path prefix too. */
const endpoint = (path) => new URL(path, location.href);

function authHeaders() {
  const key = $("api-key").value.trim();
  return key ? { authorization: `Bearer ${key}` } : {};
}

async function errorMessage(response) {
  const body = await response.json().catch(() => null);
  return body?.error?.message ?? `${response.status} ${response.statusText}`;
}

async function getJson(path) {
  const response = await fetch(endpoint(path), { headers: authHeaders() });
  if (!response.ok) throw Object.assign(new Error(await errorMessage(response)), { status: response.status });
  return response.json();
}

// ---- server facts: model, voices ----

async function loadModel() {
  const models = await getJson("v1/models");
  server.model = models.data[0];
  $("model").textContent = `${server.model.root ?? server.model.id}: ${server.model.description}`;
  const rates = $("sample-rate");
  rates.replaceChildren(new Option(`model's own (${server.model.sample_rate} Hz)`, ""));
  for (const rate of server.model.supported_sample_rates ?? []) rates.append(new Option(`${rate} Hz`, String(rate)));
  const cloning = server.model.supports_cloning === true;
  $("clone-inline").disabled = !cloning;
  $("clone-note").textContent = cloning ? "" : "This model does not clone voices, so uploaded voices and clips are refused when spoken.";
}

async function loadVoices(select) {
  const listing = await getJson("v1/audio/voices");
  server.uploaded = listing.uploaded_voices ?? [];
  const picker = $("voice");
  const keep = select ?? picker.value;
  picker.replaceChildren(new Option("default", "default"), ...listing.voices.map((name) => new Option(name, name)));
  picker.value = [...picker.options].some((option) => option.value === keep?.toLowerCase()) ? keep.toLowerCase() : "default";
  const list = $("voice-list");
  list.replaceChildren(
    ...server.uploaded.map((voice) => {
      const item = document.createElement("li");
      const label = document.createElement("span");
      label.textContent = `${voice.name}${voice.consent ? ` — consent ${voice.consent}` : ""}`;
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "secondary";
      remove.textContent = `Delete ${voice.name}`;
      remove.onclick = () => deleteVoice(voice.name);
      item.append(label, remove);
      return item;
    }),
  );
  $("voice-list-note").textContent = server.uploaded.length === 0 ? "None yet." : "";
  renderSnippets();
}

// ---- the voice sample: a picked file or a recording ----

let sampleBlob = null;
let sampleName = null;

function setSample(blob, name) {
  sampleBlob = blob;
  sampleName = name;
  const preview = $("sample-preview");
  if (preview.src) URL.revokeObjectURL(preview.src);
  preview.hidden = blob === null;
  if (blob) preview.src = URL.createObjectURL(blob);
  $("sample-note").textContent = blob ? `${name}, ${(blob.size / 1024).toFixed(0)} KiB` : "A clip of 1 to 30 seconds: pick a file, or record one from the microphone.";
  if (blob && !$("voice-name").value) $("voice-name").value = name.replace(/\.[^.]+$/, "").slice(0, 64);
}

$("voice-sample").onchange = () => {
  const file = $("voice-sample").files?.[0];
  setSample(file ?? null, file?.name ?? null);
};

let recorder = null;
$("record").onclick = async () => {
  if (recorder) {
    recorder.stop();
    return;
  }
  $("voice-error").textContent = "";
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false } });
  } catch (error) {
    $("voice-error").textContent = `The microphone is not available: ${error.message}`;
    return;
  }
  // webm/opus where the browser records it (Chromium, Firefox); Safari records mp4/aac. The server takes both.
  const mimeType = ["audio/webm;codecs=opus", "audio/webm", "audio/mp4"].find((type) => MediaRecorder.isTypeSupported?.(type));
  recorder = new MediaRecorder(stream, mimeType ? { mimeType } : undefined);
  const parts = [];
  recorder.ondataavailable = (event) => parts.push(event.data);
  recorder.onstop = () => {
    for (const track of stream.getTracks()) track.stop();
    const type = recorder.mimeType || mimeType || "audio/webm";
    setSample(new Blob(parts, { type }), `recording.${type.includes("mp4") ? "m4a" : "webm"}`);
    recorder = null;
    $("record").textContent = "Record";
  };
  recorder.start();
  $("record").textContent = "Finish recording";
};

$("upload").onclick = async () => {
  $("voice-error").textContent = "";
  $("voice-status").textContent = "";
  const name = $("voice-name").value.trim();
  const consentId = $("consent-id").value.trim();
  if (!sampleBlob) return void ($("voice-error").textContent = "Pick a voice sample or record one first.");
  if (!name) return void ($("voice-error").textContent = "Give the voice a name.");
  if (!consentId) return void ($("voice-error").textContent = "Enter the consent ID.");
  if (!$("consent").checked) return void ($("voice-error").textContent = "Confirm the speaker's consent first.");
  const form = new FormData();
  form.append("name", name);
  form.append("consent", consentId);
  form.append("audio_sample", sampleBlob, sampleName ?? "sample.wav");
  $("upload").disabled = true;
  $("voice-status").textContent = "Uploading…";
  try {
    const response = await fetch(endpoint("v1/audio/voices"), { method: "POST", body: form, headers: authHeaders() });
    if (!response.ok) {
      $("voice-status").textContent = "";
      $("voice-error").textContent = await errorMessage(response);
      return;
    }
    const { voice } = await response.json();
    await loadVoices(voice.name);
    $("voice-status").textContent = `Uploaded ${voice.name}; it is now the selected voice.`;
  } catch (error) {
    $("voice-status").textContent = "";
    $("voice-error").textContent = error.message;
  } finally {
    $("upload").disabled = false;
  }
};

async function deleteVoice(name) {
  $("voice-error").textContent = "";
  const response = await fetch(endpoint(`v1/audio/voices/${encodeURIComponent(name)}`), { method: "DELETE", headers: authHeaders() });
  if (!response.ok) {
    $("voice-error").textContent = await errorMessage(response);
    return;
  }
  await loadVoices();
  $("voice-status").textContent = `Deleted ${name}.`;
}

// ---- speaking: WebSocket in, AudioWorklet out ----

let audioContext = null;
let workletReady = null;
let session = null;

/**
 * The context is made and resumed inside the click that asked for sound, as Safari and iOS require; the
 * worklet module loads once.
 */
function audioOutput() {
  // iOS plays Web Audio as "ambient" (muted by the silent switch) unless told this page is for listening.
  if (navigator.audioSession && navigator.audioSession.type !== "playback") navigator.audioSession.type = "playback";
  audioContext ??= new AudioContext({ latencyHint: "interactive" });
  const resumed = audioContext.resume();
  workletReady ??= audioContext.audioWorklet.addModule(endpoint("playground/pcm-player.js"));
  return Promise.all([resumed, workletReady]).then(() => audioContext);
}

function setState(state) {
  playground.state = state;
  $("state").textContent = state;
  const active = state === "connecting" || state === "playing";
  $("speak").disabled = active;
  $("stop").disabled = !active;
  $("download").disabled = active || playground.samplesReceived === 0;
}

function showSpeakError(message) {
  playground.lastError = message;
  $("speak-error").textContent = message;
}

function readAsDataUrl(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

function sessionConfig() {
  const config = { type: "session.config", voice: $("voice").value, response_format: "pcm", stream_audio: true };
  // Named even for "the model's own": pcm on its own means OpenAI's 24 kHz, whatever the model makes.
  const rate = Number($("sample-rate").value) || server.model?.sample_rate;
  if (rate) config.sample_rate = rate;
  return config;
}

function socketUrl() {
  const url = endpoint("v1/audio/speech/stream");
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  // Browsers cannot set headers on a WebSocket; the key goes in the query, as the server accepts it there.
  const key = $("api-key").value.trim();
  if (key) url.searchParams.set("api_key", key);
  return url;
}

$("speak").onclick = () => {
  const text = $("text").value;
  if (!text.trim()) return showSpeakError("Type something to speak first.");
  // Nothing may be awaited before the context is resumed: the click's user activation must still hold.
  const output = audioOutput();
  void speak(text, output);
};

async function speak(text, output) {
  session?.finish("replaced");
  Object.assign(playground, { samplesPlayed: 0, firstAudioMs: null, underruns: 0, lastError: null, samplesPlayedAtSessionDone: null, samplesReceived: 0, sampleRate: null, peakLevel: 0, sentences: [] });
  $("speak-error").textContent = "";
  $("sentences").replaceChildren();
  for (const id of ["first-audio", "rtf", "buffered", "jitter", "played"]) $(id).textContent = "–";
  $("underruns").textContent = "0";
  setState("connecting");
  const config = sessionConfig();
  try {
    if ($("clone-inline").checked) {
      if (!sampleBlob) throw new Error("Pick a voice sample or record one to clone from.");
      config.ref_audio = await readAsDataUrl(sampleBlob);
    }
    await output;
  } catch (error) {
    showSpeakError(error.message);
    setState("error");
    return;
  }
  session = new SpeakSession(text, config, audioContext);
}

class SpeakSession {
  startedAt = performance.now();
  chunks = [];
  node = null;
  socket;
  ended = false;
  sessionDone = false;
  current = null;
  analyser = null;
  levels = null;

  constructor(text, config, context) {
    this.text = text;
    this.context = context;
    this.socket = new WebSocket(socketUrl());
    this.socket.binaryType = "arraybuffer";
    this.socket.onopen = () => this.send(config);
    this.socket.onmessage = (event) => this.receive(event.data);
    this.socket.onclose = (event) => this.closed(event);
  }

  send(config) {
    this.socket.send(JSON.stringify(config));
    if (!$("typed").checked) {
      this.socket.send(JSON.stringify({ type: "input.text", text: this.text }));
      this.socket.send(JSON.stringify({ type: "input.done" }));
      return;
    }
    // Pieces as a language model writes them: each sentence is spoken as soon as its last piece is in.
    const pieces = llmPieces(this.text);
    let next = 0;
    const timer = setInterval(() => {
      if (this.ended || this.socket.readyState !== WebSocket.OPEN) return clearInterval(timer);
      if (next < pieces.length) {
        this.socket.send(JSON.stringify({ type: "input.text", text: pieces[next] }));
        next += 1;
        return;
      }
      clearInterval(timer);
      this.socket.send(JSON.stringify({ type: "input.done" }));
    }, TYPING_INTERVAL_MS);
  }

  receive(data) {
    if (this.ended) return;
    if (typeof data !== "string") return this.audio(new Int16Array(data, 0, data.byteLength >> 1));
    const message = JSON.parse(data);
    if (message.type === "audio.start") this.sentenceStarts(message);
    else if (message.type === "audio.done") this.sentenceEnds(message);
    else if (message.type === "session.done") {
      this.sessionDone = true;
      playground.samplesPlayedAtSessionDone = playground.samplesPlayed;
      this.node?.port.postMessage({ type: "end" });
      // Everything flushed has been spoken: the server closes the socket once we say we are done.
      this.socket.send(JSON.stringify({ type: "session.close" }));
      if (!this.node) this.finish("done");
    } else if (message.type === "error") {
      showSpeakError(message.message);
      // An error before any audio ends the utterance; one after it ends one sentence and the rest plays.
      if (playground.samplesReceived === 0 && !this.sessionDone) this.finish("error");
    }
  }

  sentenceStarts(message) {
    if (!this.node) {
      playground.sampleRate = message.sample_rate;
      this.node = new AudioWorkletNode(this.context, "pcm-player", { numberOfInputs: 0, outputChannelCount: [1] });
      this.node.port.onmessage = ({ data }) => this.progress(data);
      this.node.port.postMessage({ type: "format", sampleRate: message.sample_rate, startSeconds: JITTER_BUFFER_SECONDS });
      this.node.connect(this.context.destination);
      // A tap on what actually goes to the speakers, for the level the page reports.
      this.analyser = new AnalyserNode(this.context, { fftSize: 2048 });
      this.levels = new Float32Array(this.analyser.fftSize);
      this.node.connect(this.analyser);
    }
    const sentence = { index: playground.sentences.length, text: message.sentence_text, startSample: playground.samplesReceived, startedAt: performance.now(), firstAudioMs: null, doneMs: null, samples: 0, element: document.createElement("li") };
    sentence.element.textContent = message.sentence_text;
    const figures = document.createElement("div");
    figures.className = "figures";
    sentence.figures = figures;
    sentence.element.append(figures);
    $("sentences").append(sentence.element);
    playground.sentences.push(sentence);
    this.current = sentence;
  }

  audio(samples) {
    const sentence = this.current;
    if (!this.node || samples.length === 0) return;
    const now = performance.now();
    if (playground.firstAudioMs === null) {
      playground.firstAudioMs = Math.round(now - this.startedAt);
      $("first-audio").textContent = `${playground.firstAudioMs} ms`;
      setState("playing");
    }
    if (sentence && sentence.firstAudioMs === null) sentence.firstAudioMs = Math.round(now - sentence.startedAt);
    if (sentence) sentence.samples += samples.length;
    this.chunks.push(samples);
    playground.samplesReceived += samples.length;
    // Generation time over audio made: below 1 the server makes audio faster than it plays.
    const rtf = (now - this.startedAt) / 1000 / (playground.samplesReceived / playground.sampleRate);
    $("rtf").textContent = rtf.toFixed(2);
    // Copied, not transferred: the page keeps every chunk for the waveform and the WAV download.
    this.node.port.postMessage({ type: "pcm", samples });
  }

  sentenceEnds(message) {
    const sentence = this.current;
    if (!sentence) return;
    sentence.doneMs = Math.round(performance.now() - sentence.startedAt);
    const seconds = sentence.samples / playground.sampleRate;
    const parts = [`first audio ${sentence.firstAudioMs ?? "–"} ms`, `${seconds.toFixed(2)} s of audio`];
    if (seconds > 0) parts.push(`RTF ${(sentence.doneMs / 1000 / seconds).toFixed(2)}`);
    if (message.error) parts.push(`error: ${message.error}`);
    sentence.figures.textContent = parts.join(" · ");
  }

  progress({ state, samplesPlayed, bufferedSamples, targetSamples, underruns }) {
    if (this.ended) return;
    playground.samplesPlayed = samplesPlayed;
    playground.underruns = underruns;
    if (this.analyser) {
      this.analyser.getFloatTimeDomainData(this.levels);
      for (const value of this.levels) playground.peakLevel = Math.max(playground.peakLevel, Math.abs(value));
    }
    const ms = (samples) => Math.round((samples / playground.sampleRate) * 1000);
    $("underruns").textContent = String(underruns);
    $("buffered").textContent = `${ms(bufferedSamples)} ms`;
    $("jitter").textContent = `${ms(targetSamples)} ms`;
    $("played").textContent = `${(samplesPlayed / playground.sampleRate).toFixed(1)} s`;
    const speaking = sentenceAt(playground.sentences, samplesPlayed);
    playground.sentences.forEach((sentence, index) => {
      if (index === speaking) {
        if (sentence.element.getAttribute("aria-current") !== "true") {
          sentence.element.setAttribute("aria-current", "true");
          sentence.element.scrollIntoView?.({ block: "nearest" });
        }
      } else sentence.element.removeAttribute("aria-current");
    });
    drawWaveform(this.chunks, samplesPlayed);
    if (state === "drained" && this.sessionDone) this.finish("done");
  }

  /** Ends the utterance here: the socket closes, so the server stops generating at its next tick. */
  finish(state) {
    if (this.ended) return;
    this.ended = true;
    if (this.socket.readyState === WebSocket.CONNECTING || this.socket.readyState === WebSocket.OPEN) this.socket.close(1000, state);
    if (this.node) {
      this.node.port.postMessage({ type: "stop" });
      this.node.disconnect();
      this.analyser?.disconnect();
    }
    for (const sentence of playground.sentences) sentence.element.removeAttribute("aria-current");
    recording = { chunks: this.chunks, sampleRate: playground.sampleRate };
    drawWaveform(this.chunks, playground.samplesPlayed);
    setState(state === "error" ? "error" : "done");
  }

  closed(event) {
    if (this.ended) return;
    if (this.sessionDone) {
      // The server closed after session.close; the worklet plays out what it holds, then reports drained.
      if (!this.node) this.finish("done");
      return;
    }
    showSpeakError(playground.lastError ?? `The connection closed (${event.code}${event.reason ? `: ${event.reason}` : ""}).`);
    this.finish("error");
  }
}

$("stop").onclick = () => session?.finish("stopped");

// ---- what was played: waveform and WAV ----

let recording = null;
let drawPending = false;

function drawWaveform(chunks, played) {
  if (drawPending) return;
  drawPending = true;
  requestAnimationFrame(() => {
    drawPending = false;
    const canvas = $("waveform");
    const width = Math.max(1, Math.round(canvas.clientWidth * devicePixelRatio));
    const height = Math.max(1, Math.round(canvas.clientHeight * devicePixelRatio));
    if (canvas.width !== width || canvas.height !== height) Object.assign(canvas, { width, height });
    const draw = canvas.getContext("2d");
    draw.clearRect(0, 0, width, height);
    const total = chunks.reduce((sum, chunk) => sum + chunk.length, 0);
    if (total === 0) return;
    const peaks = waveformPeaks(chunks, width);
    const playedColumns = Math.round((played / total) * width);
    const style = getComputedStyle(document.documentElement);
    for (let column = 0; column < width; column += 1) {
      const { min, max } = peaks[column];
      draw.fillStyle = column < playedColumns ? style.getPropertyValue("--accent") : style.getPropertyValue("--line");
      const top = ((1 - max) / 2) * height;
      draw.fillRect(column, top, 1, Math.max(1, ((max - min) / 2) * height));
    }
  });
}

$("download").onclick = () => {
  if (!recording || recording.chunks.length === 0) return;
  const url = URL.createObjectURL(new Blob([wavFile(recording.chunks, recording.sampleRate)], { type: "audio/wav" }));
  const link = document.createElement("a");
  link.href = url;
  link.download = "voxedge.wav";
  link.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
};

// ---- files: speed and format apply here ----

$("make-file").onclick = async () => {
  $("file-error").textContent = "";
  $("file-status").textContent = "Making the file…";
  const started = performance.now();
  const settings = currentSettings();
  const body = { input: settings.input, voice: settings.voice, response_format: settings.responseFormat, speed: settings.speed };
  if (settings.sampleRate) body.sample_rate = settings.sampleRate;
  const response = await fetch(endpoint("v1/audio/speech"), { method: "POST", headers: { "content-type": "application/json", ...authHeaders() }, body: JSON.stringify(body) });
  if (!response.ok) {
    $("file-status").textContent = "";
    $("file-error").textContent = await errorMessage(response);
    return;
  }
  const blob = await response.blob();
  const player = $("file-player");
  if (player.src) URL.revokeObjectURL(player.src);
  player.src = URL.createObjectURL(blob);
  player.hidden = settings.responseFormat === "pcm";
  $("file-status").textContent = `${settings.responseFormat}, ${(blob.size / 1024).toFixed(0)} KiB in ${Math.round(performance.now() - started)} ms (${response.headers.get("x-output-tokens") ?? "?"} frames).`;
};

// ---- the API panel ----

function currentSettings() {
  return {
    input: $("text").value,
    voice: $("voice").value,
    responseFormat: $("format").value,
    sampleRate: Number($("sample-rate").value) || server.model?.sample_rate,
    speed: Number($("speed").value) || 1,
    withApiKey: $("api-key").value.trim() !== "",
  };
}

function renderSnippets() {
  const origin = new URL(".", location.href).href.replace(/\/$/, "");
  const snippets = apiSnippets(currentSettings(), origin);
  $("snippet-curl").textContent = snippets.curl;
  $("snippet-openai").textContent = snippets.openai;
  $("snippet-websocket").textContent = snippets.websocket;
}

for (const id of ["text", "voice", "format", "sample-rate", "speed", "api-key"]) $(id).addEventListener("input", renderSnippets);
$("api-key").addEventListener("change", () => void start());
$("server-form").addEventListener("submit", (event) => {
  event.preventDefault();
  void start();
});

async function start() {
  try {
    await loadModel();
    await loadVoices();
  } catch (error) {
    if (error.status === 401) {
      // The server wants a key: show where it goes.
      $("model").textContent = `${error.message}. Enter the API key under Server.`;
      $("server-form").closest("details").open = true;
      $("api-key").focus();
    } else $("model").textContent = `The server did not answer: ${error.message}`;
  }
  renderSnippets();
}

renderSnippets();
await start();
