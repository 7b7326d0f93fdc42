/**
 * The page's side of the in-browser engine (src/browser/page/engine-worker.ts): starts the worker
 * (`/playground/engine.js`) and turns its messages into promises and callbacks. The playground and
 * `voxedge conformance --browser` both talk to the worker through this module.
 */

/**
 * @typedef {{ model: string, description: string, executionProvider: "wasm" | "webgpu", decoder: "wgsl" | "onnx",
 *   decoderWorker: boolean, warnings: string[], adapter?: string, threads: number, crossOriginIsolated: boolean, voices: string[], supportsCloning: boolean,
 *   sampleRateHz: number, loadSeconds: number, fetchedBytes: number, cachedBytes: number }} EngineInfo
 * @typedef {{ firstAudioMs: number, audioSeconds: number, wallSeconds: number, rtf: number, stageSeconds: Record<string, number> }} SpeakStats
 * @typedef {{ file: string, loadedBytes: number, totalBytes: number, from: "cache" | "server" | "hub" }} FileProgress
 */

export class BrowserEngine {
  /** @type {Worker} */
  #worker;
  #nextId = 1;
  /**
   * Requests the worker has not answered yet, by id.
   * @type {Map<number, { resolve: (value: any) => void, reject: (error: Error) => void, onAudio?: (samples: Float32Array) => void, onProgress?: (progress: FileProgress) => void }>}
   */
  #pending = new Map();
  /** @type {EngineInfo | null} */
  info = null;

  /** @param {string | URL} [url] the worker module; default: the one beside this module, wherever the app is mounted */
  constructor(url = new URL("engine.js", import.meta.url)) {
    this.#worker = new Worker(url, { type: "module" });
    this.#worker.onmessage = (event) => this.#receive(event.data);
    this.#worker.onerror = (event) => this.#failAll(new Error(`the engine worker failed: ${event.message || "it did not start"}`));
  }

  /**
   * Fetches the model's files (from the cache where they are current) and opens the model in the worker.
   * @param {{ model: string, apiKey?: string, source?: "server" | "hub", ep?: "auto" | "wasm" | "webgpu", threads?: number, decoderWorker?: boolean }} options
   * @param {(progress: FileProgress) => void} [onProgress]
   * @returns {Promise<EngineInfo>}
   */
  async load(options, onProgress) {
    const info = /** @type {EngineInfo} */ (await this.#request({ type: "load", ...options }, { onProgress }).done);
    this.info = info;
    return info;
  }

  /**
   * Speaks `text`, handing each 80 ms frame (float samples at info.sampleRateHz) to `onAudio` as it is made.
   * @param {{ text: string, voice?: string, voiceId?: string, seed?: number | string, normalization?: "auto" | "on" | "off" }} request
   * @param {(samples: Float32Array) => void} onAudio
   * @returns {{ id: number, done: Promise<SpeakStats> }}
   */
  speak(request, onAudio) {
    return this.#request({ type: "speak", ...request }, { onAudio });
  }

  /**
   * Stops a speak: the one running, or one still waiting for its turn.
   * @param {number} id
   */
  cancel(id) {
    this.#worker.postMessage({ type: "cancel", id });
  }

  /**
   * Clones a voice from mono 24 kHz samples, in the page; resolves to the id `speak` takes as voiceId.
   * @param {Float32Array} samples
   * @returns {Promise<{ voiceId: string, seconds: number }>}
   */
  clone(samples) {
    return this.#request({ type: "clone", samples }, {}, [samples.buffer]).done;
  }

  /**
   * Runs a fixture's golden cases in this page (the listing's URL serves the fixture's files).
   * @param {{ listing: string, decoder?: "onnx" | "wgsl", batch?: number, ep?: "wasm" | "webgpu" }} options
   * @returns {Promise<object>} the conformance report
   */
  conformance(options) {
    return this.#request({ type: "conformance", ...options }).done;
  }

  terminate() {
    this.#worker.terminate();
    this.#failAll(new Error("the engine was stopped"));
  }

  /**
   * @param {object} message
   * @param {{ onAudio?: (samples: Float32Array) => void, onProgress?: (progress: FileProgress) => void }} [listeners]
   * @param {Transferable[]} [transfer]
   * @returns {{ id: number, done: Promise<any> }}
   */
  #request(message, listeners = {}, transfer = []) {
    const id = this.#nextId++;
    const done = new Promise((resolve, reject) => this.#pending.set(id, { resolve, reject, ...listeners }));
    this.#worker.postMessage({ ...message, id }, transfer);
    return { id, done };
  }

  /** @param {any} message */
  #receive(message) {
    const pending = this.#pending.get(message.id);
    if (!pending) return;
    switch (message.type) {
      case "progress":
        pending.onProgress?.(message);
        return;
      case "audio":
        pending.onAudio?.(message.samples);
        return;
    }
    this.#pending.delete(message.id);
    switch (message.type) {
      case "ready":
        pending.resolve(message.info);
        return;
      case "report":
        pending.resolve(message.report);
        return;
      case "done":
        pending.resolve(message.stats);
        return;
      case "voice":
        pending.resolve({ voiceId: message.voiceId, seconds: message.seconds });
        return;
      case "error":
        pending.reject(new Error(message.message));
        return;
    }
  }

  /** @param {Error} error */
  #failAll(error) {
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
  }
}
