/**
 * The playground: speaks through one of two engines, this server (the WebSocket route with stream_audio) or
 * this browser (the same Pocket TTS pipeline in a worker, browser-engine.js, loaded from the model files
 * route), playing pcm16 through an AudioWorklet as it arrives; shows the live numbers, the sentence being
 * spoken and a waveform; uploads, records and deletes voices, or clones them in the page; makes files;
 * writes the API calls for the current settings.
 *
 * Tests (and anyone curious) read the playback state from window.voxedgePlayground.
 */
import { BrowserEngine } from "./browser-engine.js";
import { apiSnippets, llmPieces, loadProgress, pcm16FromFloat, sentenceAt, waveformPeaks, wavFile } from "./playground-lib.js";

const $ = (id) => document.getElementById(id);

/** Seconds of audio the worklet holds before it starts playing, and again after an underrun. */
const JITTER_BUFFER_SECONDS = 0.06;
/** A language model writes ~40 tokens a second; one piece per token. */
const TYPING_INTERVAL_MS = 25;
/** The clip lengths the page clones from, as the Voices panel asks for. */
const MIN_CLIP_SECONDS = 1;
const MAX_CLIP_SECONDS = 30;

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
  /** Which engine speaks: "server" or "browser" (the model in this page). */
  engine: "server",
  /** The page engine's EngineInfo once loaded (browser-engine.js), else null. */
  engineInfo: null,
  /** The page engine's load: its state and bytes so far (cachedBytes read from Cache Storage, fetchedBytes downloaded). */
  engineLoad: { state: "idle", loadedBytes: 0, totalBytes: 0, cachedBytes: 0, fetchedBytes: 0, error: null },
  /** The page engine's SpeakStats for the last utterance it finished. */
  speakStats: null,
  /** What made the last utterance: {engine: "server"} or {engine: "browser", executionProvider, decoder}. */
  ranOn: null,
  /** Times the last utterance found the server at capacity and tried again after its retry_after. */
  busyRetries: 0,
};
window.voxedgePlayground = playground;

const server = { model: null, voices: [], uploaded: [] };
/** The page engine, made when "This browser" is first chosen. */
/** `loading`: settles when the load in progress ends, whether the model is then ready or not. */
const pageEngine = { engine: null, state: "idle", error: null, loading: Promise.resolve() };
/** Counts Speak presses (and what cancels one waiting for the page's model): a wait that ended stale speaks nothing. */
let speakAttempt = 0;
/** Voices cloned in this page: the engine's voiceId → the name shown. */
const pageVoices = new Map();

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
  applyEngineControls();
}

/** The controls that mean something only to one engine, for the current choice. */
function applyEngineControls() {
  const inPage = playground.engine === "browser";
  const cloning = server.model?.supports_cloning === true;
  $("clone-inline").disabled = inPage || !cloning;
  $("clone-note").textContent = inPage || cloning || !server.model ? "" : "This model does not clone voices, so uploaded voices and clips are refused when spoken.";
  $("typed").disabled = inPage;
  $("sample-rate").disabled = inPage;
  $("browser-engine").hidden = !inPage;
  $("clone-page").hidden = !inPage;
  $("clone-page-note").hidden = !inPage;
}

/** The voice picker for the current engine: the server's voices, or the page model's and those cloned here. */
function renderVoiceOptions(select) {
  const picker = $("voice");
  const keep = select ?? picker.value;
  const options =
    playground.engine === "browser"
      ? [...(playground.engineInfo?.voices ?? []).map((name) => new Option(name, name)), ...[...pageVoices].map(([voiceId, name]) => new Option(`cloned in this page: ${name}`, voiceId))]
      : server.voices.map((name) => new Option(name, name));
  picker.replaceChildren(new Option("default", "default"), ...options);
  picker.value = [...picker.options].some((option) => option.value === keep?.toLowerCase()) ? keep.toLowerCase() : "default";
}

async function loadVoices(select) {
  const listing = await getJson("v1/audio/voices");
  server.voices = listing.voices;
  server.uploaded = listing.uploaded_voices ?? [];
  if (playground.engine === "server") renderVoiceOptions(select);
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
    $("voice-status").textContent = playground.engine === "server" ? `Uploaded ${voice.name}; it is now the selected voice.` : `Uploaded ${voice.name} to the server; choose This server to speak with it.`;
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

// ---- the engine: this server, or the model in this page ----

for (const radio of document.querySelectorAll('input[name="engine"]')) radio.addEventListener("change", () => chooseEngine(radio.value));
// Where the page engine runs, or where its files come from, changed: the model loads again with the new choice.
for (const id of ["engine-ep-choice", "engine-source"]) $(id).addEventListener("change", () => {
  if (playground.engine === "browser" && pageEngine.state !== "loading") void loadPageEngine();
});

/** @param {"server" | "browser"} choice */
function chooseEngine(choice) {
  session?.finish("stopped");
  cancelWaitingSpeak();
  playground.engine = choice;
  applyEngineControls();
  renderVoiceOptions();
  renderSnippets();
  if (choice === "browser" && (pageEngine.state === "idle" || pageEngine.state === "error")) void loadPageEngine();
}

const megabytes = (bytes) => `${(bytes / 1e6).toFixed(2)} MB`;

function showLoadProgress(files) {
  const progress = loadProgress(files);
  Object.assign(playground.engineLoad, { loadedBytes: progress.loadedBytes, totalBytes: progress.totalBytes, cachedBytes: progress.cachedBytes, fetchedBytes: progress.fetchedBytes });
  const bar = $("engine-progress");
  bar.setAttribute("aria-valuenow", String(progress.percent));
  bar.setAttribute("aria-valuetext", `${megabytes(progress.loadedBytes)} of ${megabytes(progress.totalBytes)}`);
  bar.firstElementChild.style.width = `${progress.percent}%`;
  $("engine-status").textContent = `Loading the model into this page: ${megabytes(progress.loadedBytes)} of ${megabytes(progress.totalBytes)} (${megabytes(progress.fetchedBytes)} downloaded, ${megabytes(progress.cachedBytes)} from the browser's cache)…`;
}

/** Loads the served model into this page: its files from the server (or the browser's cache), then the sessions. */
async function loadPageEngine() {
  $("engine-error").textContent = "";
  $("engine-info").hidden = true;
  if (!server.model) {
    // start() loads it again once the server answers.
    pageEngine.state = "error";
    pageEngine.error = "the server has not said which model it serves yet";
    Object.assign(playground.engineLoad, { state: "error", error: pageEngine.error });
    $("engine-error").textContent = `The model did not load in this page: ${pageEngine.error}.`;
    return;
  }
  pageEngine.engine ??= new BrowserEngine(endpoint("playground/engine.js").href);
  pageEngine.state = "loading";
  let loadEnded = () => {};
  pageEngine.loading = new Promise((resolve) => (loadEnded = resolve));
  Object.assign(playground.engineLoad, { state: "loading", loadedBytes: 0, totalBytes: 0, cachedBytes: 0, fetchedBytes: 0, error: null });
  /** @type {Map<string, import("./browser-engine.js").FileProgress>} */
  const files = new Map();
  showLoadProgress(files);
  $("engine-status").textContent = `Loading ${server.model.id} into this page…`;
  const apiKey = $("api-key").value.trim();
  try {
    const choices = { ep: /** @type {"auto" | "wasm" | "webgpu"} */ ($("engine-ep-choice").value), source: /** @type {"server" | "hub"} */ ($("engine-source").value) };
    const info = await pageEngine.engine.load({ model: server.model.id, ...choices, ...(apiKey ? { apiKey } : {}) }, (progress) => {
      files.set(progress.file, progress);
      showLoadProgress(files);
    });
    pageEngine.state = "ready";
    playground.engineInfo = info;
    // The engine's totals, not the progress events', are what the load read.
    Object.assign(playground.engineLoad, { state: "ready", cachedBytes: info.cachedBytes, fetchedBytes: info.fetchedBytes });
    showEngineInfo(info);
  } catch (error) {
    pageEngine.state = "error";
    pageEngine.error = error.message;
    Object.assign(playground.engineLoad, { state: "error", error: error.message });
    $("engine-status").textContent = "";
    $("engine-error").textContent = `The model did not load in this page: ${error.message}`;
  }
  if (playground.engine === "browser") renderVoiceOptions();
  loadEnded();
}

/** @param {import("./browser-engine.js").EngineInfo} info */
function showEngineInfo(info) {
  const bar = $("engine-progress");
  bar.setAttribute("aria-valuenow", "100");
  bar.firstElementChild.style.width = "100%";
  const source = info.fetchedBytes === 0 ? "all from the browser's cache" : info.cachedBytes === 0 ? "all downloaded" : "part downloaded, part from the browser's cache";
  $("engine-status").textContent = `Ready: ${info.model} runs in this page (${source}).${info.crossOriginIsolated ? "" : " The page is not cross-origin isolated, so it runs on one thread."}`;
  $("engine-ep").textContent = info.executionProvider;
  $("engine-decoder").textContent = info.decoder;
  $("engine-threads").textContent = String(info.threads);
  $("engine-load").textContent = `${info.loadSeconds.toFixed(1)} s`;
  $("engine-fetched").textContent = megabytes(info.fetchedBytes);
  $("engine-cached").textContent = megabytes(info.cachedBytes);
  $("engine-info").hidden = false;
}

/**
 * The clip as the page engine clones from it: decoded by the browser (decodeAudioData resamples to its
 * context's rate), then rendered to one channel, which down-mixes as speakers do ((L + R) / 2).
 * @param {Blob} blob
 * @param {number} sampleRateHz
 * @returns {Promise<Float32Array>}
 */
async function monoSamples(blob, sampleRateHz) {
  const decoded = await new OfflineAudioContext(1, 1, sampleRateHz).decodeAudioData(await blob.arrayBuffer());
  const mono = new OfflineAudioContext(1, Math.max(1, Math.round(decoded.duration * sampleRateHz)), sampleRateHz);
  const source = new AudioBufferSourceNode(mono, { buffer: decoded });
  source.connect(mono.destination);
  source.start();
  // A copy: the engine takes its buffer, which must not be the rendered AudioBuffer's own.
  return (await mono.startRendering()).getChannelData(0).slice();
}

$("clone-page").onclick = async () => {
  $("voice-error").textContent = "";
  $("voice-status").textContent = "";
  const info = playground.engineInfo;
  if (pageEngine.state !== "ready" || !info) return void ($("voice-error").textContent = "Wait for the model to load in this page first.");
  if (!info.supportsCloning) return void ($("voice-error").textContent = "This model cannot clone voices (its bundle has no Mimi encoder).");
  if (!sampleBlob) return void ($("voice-error").textContent = "Pick a voice sample or record one first.");
  if (!$("consent").checked) return void ($("voice-error").textContent = "Confirm the speaker's consent first.");
  const name = $("voice-name").value.trim() || sampleName || "clip";
  $("clone-page").disabled = true;
  $("voice-status").textContent = "Cloning in this page…";
  try {
    let samples;
    try {
      samples = await monoSamples(sampleBlob, info.sampleRateHz);
    } catch (error) {
      throw new Error(`This browser could not decode the clip: ${error.message || error.name}`);
    }
    const seconds = samples.length / info.sampleRateHz;
    if (seconds < MIN_CLIP_SECONDS || seconds > MAX_CLIP_SECONDS) throw new Error(`The clip is ${seconds.toFixed(1)} s long; clone from ${MIN_CLIP_SECONDS} to ${MAX_CLIP_SECONDS} seconds.`);
    const { voiceId } = await /** @type {BrowserEngine} */ (pageEngine.engine).clone(samples);
    pageVoices.set(voiceId, name);
    renderVoiceOptions(voiceId);
    renderSnippets();
    $("voice-status").textContent = `Cloned ${name} in this page from ${seconds.toFixed(1)} s of audio; it is now the selected voice. Nothing was sent to the server.`;
  } catch (error) {
    $("voice-status").textContent = "";
    $("voice-error").textContent = error.message;
  } finally {
    $("clone-page").disabled = false;
  }
};

// ---- speaking: the server's WebSocket or the page engine in, AudioWorklet out ----

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
  const active = state === "connecting" || state === "waiting" || state === "playing";
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
  Object.assign(playground, { samplesPlayed: 0, firstAudioMs: null, underruns: 0, lastError: null, samplesPlayedAtSessionDone: null, samplesReceived: 0, sampleRate: null, peakLevel: 0, sentences: [], speakStats: null, ranOn: null, busyRetries: 0 });
  $("speak-error").textContent = "";
  $("sentences").replaceChildren();
  for (const id of ["first-audio", "rtf", "buffered", "jitter", "played", "ran-on"]) $(id).textContent = "–";
  $("underruns").textContent = "0";
  const attempt = ++speakAttempt;
  setState("connecting");
  let source;
  try {
    if (playground.engine === "browser" && pageEngine.state === "loading") await waitForPageEngine();
    // Stopped, or the engine changed, while it waited.
    if (attempt !== speakAttempt) return;
    source = playground.engine === "browser" ? pageSpeech(text) : await serverStream(text);
    await output;
  } catch (error) {
    if (attempt !== speakAttempt) return;
    showSpeakError(error.message);
    setState("error");
    return;
  }
  playground.ranOn = source.ranOn;
  $("ran-on").textContent = ranOnText(source.ranOn);
  session = new SpeakSession(audioContext, source);
}

/** @param {{ engine: "server" } | { engine: "browser", executionProvider: string, decoder: string }} ranOn */
function ranOnText(ranOn) {
  return ranOn.engine === "server" ? "this server" : `this browser (${ranOn.executionProvider}, ${ranOn.decoder} decoder)`;
}

async function serverStream(text) {
  const config = sessionConfig();
  if ($("clone-inline").checked) {
    if (!sampleBlob) throw new Error("Pick a voice sample or record one to clone from.");
    config.ref_audio = await readAsDataUrl(sampleBlob);
  }
  return new ServerStream(text, config);
}

/**
 * Speak was pressed while the model is still loading into this page: the button says why nothing plays yet,
 * the engine panel shows the load's progress, and the speech starts once the load has ended (a load that
 * failed is then the speech's error). A load started again meanwhile (a new source or device) is waited for too.
 */
async function waitForPageEngine() {
  setState("waiting");
  $("speak").textContent = "Waiting for the model to load…";
  try {
    while (pageEngine.state === "loading") await pageEngine.loading;
  } finally {
    $("speak").textContent = "Speak";
  }
}

/** Stop, or another engine chosen, while a speech waits for the page's model: it will not start. */
function cancelWaitingSpeak() {
  if (playground.state !== "waiting") return;
  speakAttempt++;
  $("speak").textContent = "Speak";
  setState("idle");
}

function pageSpeech(text) {
  if (pageEngine.state !== "ready") throw new Error(pageEngine.state === "error" ? `The model did not load in this page: ${pageEngine.error}` : "The model is still loading in this page.");
  const voice = $("voice").value;
  /** @type {{ voice?: string, voiceId?: string }} */
  const choice = pageVoices.has(voice) ? { voiceId: voice } : voice === "default" ? {} : { voice };
  return new PageSpeech(pageEngine.engine, text, choice);
}

/**
 * One utterance's playback, whichever engine makes it: the worklet it plays through, the sentences, the
 * live numbers, the waveform and what Download WAV saves. Its `source` (ServerStream or PageSpeech) feeds it
 * pcm16 and sentence boundaries, and is stopped when the utterance ends.
 */
class SpeakSession {
  startedAt = performance.now();
  chunks = [];
  node = null;
  ended = false;
  /** Every sentence has been made (the server's session.done, or the page engine's last frame). */
  sessionDone = false;
  current = null;
  analyser = null;
  levels = null;

  /**
   * @param {AudioContext} context
   * @param {{ start(session: SpeakSession): void, stop(state: string): void }} source
   */
  constructor(context, source) {
    this.context = context;
    this.source = source;
    source.start(this);
  }

  /** @param {string} text @param {number} sampleRate */
  sentenceStarts(text, sampleRate) {
    if (!this.node) {
      playground.sampleRate = sampleRate;
      this.node = new AudioWorkletNode(this.context, "pcm-player", { numberOfInputs: 0, outputChannelCount: [1] });
      this.node.port.onmessage = ({ data }) => this.progress(data);
      this.node.port.postMessage({ type: "format", sampleRate, startSeconds: JITTER_BUFFER_SECONDS });
      this.node.connect(this.context.destination);
      // A tap on what actually goes to the speakers, for the level the page reports.
      this.analyser = new AnalyserNode(this.context, { fftSize: 2048 });
      this.levels = new Float32Array(this.analyser.fftSize);
      this.node.connect(this.analyser);
    }
    const sentence = { index: playground.sentences.length, text, startSample: playground.samplesReceived, startedAt: performance.now(), firstAudioMs: null, doneMs: null, samples: 0, element: document.createElement("li") };
    sentence.element.textContent = text;
    const figures = document.createElement("div");
    figures.className = "figures";
    sentence.figures = figures;
    sentence.element.append(figures);
    $("sentences").append(sentence.element);
    playground.sentences.push(sentence);
    this.current = sentence;
  }

  /** @param {Int16Array} samples */
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
    // Generation time over audio made: below 1 the engine makes audio faster than it plays.
    const rtf = (now - this.startedAt) / 1000 / (playground.samplesReceived / playground.sampleRate);
    $("rtf").textContent = rtf.toFixed(2);
    // Copied, not transferred: the page keeps every chunk for the waveform and the WAV download.
    this.node.port.postMessage({ type: "pcm", samples });
  }

  /**
   * @param {{ error?: string, stats?: import("./browser-engine.js").SpeakStats }} ending the page engine's
   *   own figures in `stats`; without them the page's clock measures the sentence
   */
  sentenceEnds({ error, stats }) {
    const sentence = this.current;
    if (!sentence) return;
    sentence.doneMs = Math.round(performance.now() - sentence.startedAt);
    const seconds = sentence.samples / playground.sampleRate;
    const parts = stats
      ? [`first audio ${Math.round(stats.firstAudioMs)} ms`, `${stats.audioSeconds.toFixed(2)} s of audio`, `RTF ${stats.rtf.toFixed(2)}`]
      : [`first audio ${sentence.firstAudioMs ?? "–"} ms`, `${seconds.toFixed(2)} s of audio`, ...(seconds > 0 ? [`RTF ${(sentence.doneMs / 1000 / seconds).toFixed(2)}`] : [])];
    if (error) parts.push(`error: ${error}`);
    sentence.figures.textContent = parts.join(" · ");
  }

  /** Nothing more will come: the worklet plays out what it holds, then reports drained. */
  allMade() {
    this.sessionDone = true;
    playground.samplesPlayedAtSessionDone = playground.samplesPlayed;
    this.node?.port.postMessage({ type: "end" });
    if (!this.node) this.finish("done");
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

  /** Ends the utterance here, and its source with it: the engine stops generating at its next step. */
  finish(state) {
    if (this.ended) return;
    this.ended = true;
    this.source.stop(state);
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
}

/**
 * Times a speech that finds the server at capacity before any of its audio is tried again, each after the
 * server's retry_after: a listener who pressed Speak waits a moment rather than reading "at capacity".
 */
const MAX_BUSY_RETRIES = 5;

/** The server's voice: the WebSocket route with stream_audio, a sentence at a time as the text comes in. */
class ServerStream {
  ranOn = { engine: "server" };
  /** Seconds the server said to wait when it refused the speech for capacity, until the socket closes. */
  retryAfterSeconds = undefined;
  /** @type {SpeakSession} */
  session;
  socket;

  constructor(text, config) {
    this.text = text;
    this.config = config;
  }

  /** @param {SpeakSession} session */
  start(session) {
    this.session = session;
    this.socket = new WebSocket(socketUrl());
    this.socket.binaryType = "arraybuffer";
    this.socket.onopen = () => this.send();
    this.socket.onmessage = (event) => this.receive(event.data);
    this.socket.onclose = (event) => this.closed(event);
  }

  send() {
    this.socket.send(JSON.stringify(this.config));
    if (!$("typed").checked) {
      this.socket.send(JSON.stringify({ type: "input.text", text: this.text }));
      this.socket.send(JSON.stringify({ type: "input.done" }));
      return;
    }
    // Pieces as a language model writes them: each sentence is spoken as soon as its last piece is in.
    const pieces = llmPieces(this.text);
    let next = 0;
    const timer = setInterval(() => {
      if (this.session.ended || this.socket.readyState !== WebSocket.OPEN) return clearInterval(timer);
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
    const session = this.session;
    if (session.ended) return;
    if (typeof data !== "string") return session.audio(new Int16Array(data, 0, data.byteLength >> 1));
    const message = JSON.parse(data);
    // Refused for capacity, to be tried again once the socket closes (1013): the refusal's own audio.done is no sentence.
    if (this.retryAfterSeconds !== undefined) return;
    if (message.type === "error" && message.code === 429 && playground.samplesReceived === 0 && playground.busyRetries < MAX_BUSY_RETRIES) {
      this.retryAfterSeconds = Number(message.retry_after) || 1;
      return;
    }
    if (message.type === "audio.start") session.sentenceStarts(message.sentence_text, message.sample_rate);
    else if (message.type === "audio.done") session.sentenceEnds({ error: message.error });
    else if (message.type === "session.done") {
      // Everything flushed has been spoken: the server closes the socket once we say we are done.
      this.socket.send(JSON.stringify({ type: "session.close" }));
      session.allMade();
    } else if (message.type === "error") {
      showSpeakError(message.message);
      // An error before any audio ends the utterance; one after it ends one sentence and the rest plays.
      if (playground.samplesReceived === 0 && !session.sessionDone) session.finish("error");
    }
  }

  /** Closing the socket makes the server abort the sentence in flight at its next tick. */
  stop(state) {
    if (this.socket.readyState === WebSocket.CONNECTING || this.socket.readyState === WebSocket.OPEN) this.socket.close(1000, state);
  }

  closed(event) {
    const session = this.session;
    if (session.ended) return;
    if (this.retryAfterSeconds !== undefined) {
      const seconds = this.retryAfterSeconds;
      this.retryAfterSeconds = undefined;
      playground.busyRetries += 1;
      $("speak-error").textContent = `The server is busy; trying again in ${seconds} s…`;
      setTimeout(() => {
        if (session.ended) return;
        $("speak-error").textContent = "";
        this.start(session);
      }, seconds * 1000);
      return;
    }
    if (session.sessionDone) {
      // The server closed after session.close; the worklet plays out what it holds, then reports drained.
      if (!session.node) session.finish("done");
      return;
    }
    showSpeakError(playground.lastError ?? `The connection closed (${event.code}${event.reason ? `: ${event.reason}` : ""}).`);
    session.finish("error");
  }
}

/**
 * The page's own voice: the whole text as one request to the engine in this page (the worker plans its
 * chunks, as the server's runner does), its float frames played as pcm16. Nothing goes to the server.
 */
class PageSpeech {
  /** @type {number | null} */
  id = null;
  settled = false;

  /**
   * @param {BrowserEngine} engine a loaded one
   * @param {string} text
   * @param {{ voice?: string, voiceId?: string }} voice
   */
  constructor(engine, text, voice) {
    this.engine = engine;
    this.text = text;
    this.voice = voice;
    const info = /** @type {import("./browser-engine.js").EngineInfo} */ (engine.info);
    this.ranOn = { engine: "browser", executionProvider: info.executionProvider, decoder: info.decoder };
  }

  /** @param {SpeakSession} session */
  start(session) {
    const sampleRate = /** @type {import("./browser-engine.js").EngineInfo} */ (this.engine.info).sampleRateHz;
    session.sentenceStarts(this.text, sampleRate);
    const { id, done } = this.engine.speak({ text: this.text, ...this.voice }, (samples) => {
      if (!session.ended) session.audio(pcm16FromFloat(samples));
    });
    this.id = id;
    done.then(
      (stats) => {
        this.settled = true;
        if (session.ended) return;
        playground.speakStats = stats;
        $("rtf").textContent = stats.rtf.toFixed(2);
        session.sentenceEnds({ stats });
        session.allMade();
      },
      (error) => {
        this.settled = true;
        if (session.ended) return;
        showSpeakError(error.message);
        session.sentenceEnds({ error: error.message });
        // As on the server: an error before any audio ends the utterance; after it, what was made plays.
        if (playground.samplesReceived === 0) session.finish("error");
        else session.allMade();
      },
    );
  }

  /** Cancelling makes the worker drop the request at its next frame. */
  stop() {
    if (this.id !== null && !this.settled) this.engine.cancel(this.id);
  }
}

$("stop").onclick = () => {
  cancelWaitingSpeak();
  session?.finish("stopped");
};

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
    if (playground.engine === "browser" && pageEngine.state === "error") void loadPageEngine();
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
