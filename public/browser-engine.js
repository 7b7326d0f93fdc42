/**
 * The page's side of the in-browser engine (src/browser/engine-worker.ts): starts the worker
 * (`/playground/engine.js`) and turns its messages into promises and callbacks. The playground and
 * `voxedge conformance --browser` both talk to the worker through this module.
 */

/**
 * @typedef {{ model: string, description: string, executionProvider: "wasm" | "webgpu", decoder: "wgsl" | "onnx",
 *   adapter?: string, threads: number, crossOriginIsolated: boolean, voices: string[], supportsCloning: boolean,
 *   sampleRateHz: number, loadSeconds: number, fetchedBytes: number, cachedBytes: number }} EngineInfo
 * @typedef {{ firstAudioMs: number, audioSeconds: number, wallSeconds: number, rtf: number }} SpeakStats
 * @typedef {{ file: string, loadedBytes: number, totalBytes: number, from: "cache" | "server" | "hub" }} FileProgress
 */

export class BrowserEngine {
  /** @type {Worker} */
  #worker;
  #nextId = 1;
  /** @type {Map<number, { resolve: (value: any) => void, reject: (error: Error) => void, onAudio?: (samples: Float32Array) => void }>} */
  #pending = new Map();
  /** @type {{ resolve: (value: any) => void, reject: (error: Error) => void, onProgress?: (progress: FileProgress) => void } | null} */
  #loading = null;
  /** @type {EngineInfo | null} */
  info = null;

  /** @param {string} [url] the worker module */
  constructor(url = "/playground/engine.js") {
    this.#worker = new Worker(url, { type: "module" });
    this.#worker.onmessage = (event) => this.#receive(event.data);
    this.#worker.onerror = (event) => this.#failAll(new Error(`the engine worker failed: ${event.message || "it did not start"}`));
  }

  /**
   * Fetches the model's files (from the cache where they are current) and opens the model in the worker.
   * @param {{ model: string, apiKey?: string, source?: "server" | "hub", ep?: "auto" | "wasm" | "webgpu", threads?: number }} options
   * @param {(progress: FileProgress) => void} [onProgress]
   * @returns {Promise<EngineInfo>}
   */
  load(options, onProgress) {
    return new Promise((resolve, reject) => {
      this.#loading = { resolve, reject, onProgress };
      this.#worker.postMessage({ type: "load", ...options });
    }).then((info) => (this.info = /** @type {EngineInfo} */ (info)));
  }

  /**
   * Speaks `text`, handing each 80 ms frame (float samples at info.sampleRateHz) to `onAudio` as it is made.
   * @param {{ text: string, voice?: string, voiceId?: string, seed?: number | string, normalization?: "auto" | "on" | "off" }} request
   * @param {(samples: Float32Array) => void} onAudio
   * @returns {{ id: number, done: Promise<SpeakStats> }}
   */
  speak(request, onAudio) {
    const id = this.#nextId++;
    const done = new Promise((resolve, reject) => this.#pending.set(id, { resolve, reject, onAudio }));
    this.#worker.postMessage({ type: "speak", id, ...request });
    return { id, done: /** @type {Promise<SpeakStats>} */ (done) };
  }

  /** @param {number} id */
  cancel(id) {
    this.#worker.postMessage({ type: "cancel", id });
  }

  /**
   * Clones a voice from mono 24 kHz samples, in the page; resolves to the id `speak` takes as voiceId.
   * @param {Float32Array} samples
   * @returns {Promise<{ voiceId: string, seconds: number }>}
   */
  clone(samples) {
    const id = this.#nextId++;
    const done = new Promise((resolve, reject) => this.#pending.set(id, { resolve, reject }));
    this.#worker.postMessage({ type: "clone", id, samples }, [samples.buffer]);
    return /** @type {Promise<{ voiceId: string, seconds: number }>} */ (done);
  }

  /**
   * Runs a fixture's golden cases in this page (the listing's URL serves the fixture's files).
   * @param {{ listing: string, decoder?: "onnx" | "wgsl", batch?: number, ep?: "wasm" | "webgpu" }} options
   * @returns {Promise<object>} the conformance report
   */
  conformance(options) {
    return new Promise((resolve, reject) => {
      this.#loading = { resolve, reject };
      this.#worker.postMessage({ type: "conformance", ...options });
    });
  }

  terminate() {
    this.#worker.terminate();
    this.#failAll(new Error("the engine was stopped"));
  }

  /** @param {any} message */
  #receive(message) {
    switch (message.type) {
      case "progress":
        this.#loading?.onProgress?.(message);
        return;
      case "ready":
        this.#settleLoading((loading) => loading.resolve(message.info));
        return;
      case "report":
        this.#settleLoading((loading) => loading.resolve(message.report));
        return;
      case "audio":
        this.#pending.get(message.id)?.onAudio?.(message.samples);
        return;
      case "done":
        this.#settle(message.id, (pending) => pending.resolve(message.stats));
        return;
      case "voice":
        this.#settle(message.id, (pending) => pending.resolve({ voiceId: message.voiceId, seconds: message.seconds }));
        return;
      case "error":
        if (message.id !== undefined) this.#settle(message.id, (pending) => pending.reject(new Error(message.message)));
        else this.#settleLoading((loading) => loading.reject(new Error(message.message)));
        return;
    }
  }

  /** @param {number} id @param {(pending: any) => void} settle */
  #settle(id, settle) {
    const pending = this.#pending.get(id);
    if (!pending) return;
    this.#pending.delete(id);
    settle(pending);
  }

  /** @param {(loading: any) => void} settle */
  #settleLoading(settle) {
    const loading = this.#loading;
    this.#loading = null;
    if (loading) settle(loading);
  }

  /** @param {Error} error */
  #failAll(error) {
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
    this.#settleLoading((loading) => loading.reject(error));
  }
}
