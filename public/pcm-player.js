/**
 * AudioWorklet processor that plays pcm16 chunks as one continuous signal.
 *
 * Chunks go into one queue, so a chunk border is just the next sample: nothing is scheduled per chunk,
 * and there is no gap or click between them. The stream's rate (the server's) is converted to the
 * context's by linear interpolation that carries its phase across chunks. Playback starts once a small
 * jitter buffer holds `startSeconds` of audio (or the stream has ended), so the first chunk of a stream
 * starts it; running dry mid-stream is an underrun: the output fades to silence, the buffer's target
 * doubles (up to MAX_BUFFER_SECONDS), and playback waits for it to fill, so a server that cannot keep up
 * costs a few growing pauses instead of a crackle of many small ones.
 *
 * Main thread → worklet: {type: "format", sampleRate, startSeconds?}, {type: "pcm", samples: Int16Array},
 * {type: "end"} (no more audio will come), {type: "stop"} (drop everything now).
 * Worklet → main thread, every ~50 ms and on every change of state: {type: "progress", state,
 * samplesPlayed, bufferedSamples, targetSamples, underruns}, samples counted at the stream's rate
 * (targetSamples: what the jitter buffer waits for now); state is "waiting"
 * (jitter buffer filling), "playing", "drained" (ended and played out) or "stopped".
 */

/** Samples of ramp at an underrun or a restart: ~2.7 ms at 24 kHz, long enough not to click. */
const RAMP_SAMPLES = 64;
const PROGRESS_INTERVAL_SECONDS = 0.05;
/** The jitter buffer's largest target: past a second of waiting, a listener hears a stall either way. */
export const MAX_BUFFER_SECONDS = 1;

export class PcmQueue {
  /** @type {Float32Array[]} */
  #chunks = [];
  #offset = 0;
  #length = 0;

  get length() {
    return this.#length;
  }

  /** @param {Int16Array} samples */
  push(samples) {
    if (samples.length === 0) return;
    const floats = new Float32Array(samples.length);
    for (let index = 0; index < samples.length; index += 1) floats[index] = samples[index] / 32768;
    this.#chunks.push(floats);
    this.#length += floats.length;
  }

  /** The next sample, or undefined when the queue is empty. */
  shift() {
    const chunk = this.#chunks[0];
    if (chunk === undefined) return undefined;
    const sample = chunk[this.#offset];
    this.#offset += 1;
    this.#length -= 1;
    if (this.#offset === chunk.length) {
      this.#chunks.shift();
      this.#offset = 0;
    }
    return sample;
  }

  clear() {
    this.#chunks = [];
    this.#offset = 0;
    this.#length = 0;
  }
}

/**
 * The player's state machine, free of the AudioWorklet globals so it can be tested anywhere.
 * `render(output)` fills one block of output samples at `outputRate`.
 */
export class PcmPlayer {
  queue = new PcmQueue();
  sourceRate;
  outputRate;
  startSamples;
  state = "waiting";
  ended = false;
  samplesPlayed = 0;
  underruns = 0;
  #step;
  #maxStartSamples;
  /** Interpolation runs between `#previous` and `#next`; `#phase` in [0, 1) is how far along. */
  #previous = 0;
  #next = 0;
  #phase = 1;
  #primed = false;
  /** Gain ramps 0 → 1 after a start and 1 → 0 into an underrun. */
  #gain = 0;

  constructor(sourceRate, outputRate, startSeconds = 0.06) {
    this.sourceRate = sourceRate;
    this.outputRate = outputRate;
    this.startSamples = Math.max(1, Math.round(startSeconds * sourceRate));
    this.#maxStartSamples = Math.max(this.startSamples, Math.round(MAX_BUFFER_SECONDS * sourceRate));
    this.#step = sourceRate / outputRate;
  }

  push(samples) {
    if (this.state === "stopped") return;
    this.queue.push(samples);
    if (this.state === "drained") this.state = "waiting";
  }

  end() {
    this.ended = true;
  }

  stop() {
    this.queue.clear();
    this.state = "stopped";
  }

  /** @param {Float32Array} output */
  render(output) {
    if (this.state === "waiting" && (this.queue.length >= this.startSamples || (this.ended && this.queue.length > 0))) {
      this.state = "playing";
    }
    if (this.state !== "playing") {
      output.fill(0);
      if (this.state === "waiting" && this.ended && this.queue.length === 0) this.state = "drained";
      return;
    }
    const rampStep = 1 / RAMP_SAMPLES;
    for (let index = 0; index < output.length; index += 1) {
      let dry = false;
      while (this.#phase >= 1) {
        const sample = this.queue.shift();
        if (sample === undefined) {
          dry = true;
          break;
        }
        this.samplesPlayed += 1;
        this.#previous = this.#primed ? this.#next : sample;
        this.#next = sample;
        this.#primed = true;
        this.#phase -= 1;
      }
      if (dry) {
        // Out of samples: fade what is left of this block from the last value to silence.
        let value = this.#previous + (this.#next - this.#previous) * Math.min(this.#phase, 1);
        for (let rest = index; rest < output.length; rest += 1) {
          this.#gain = Math.max(0, this.#gain - rampStep);
          output[rest] = value * this.#gain;
          value *= 0.97;
        }
        this.#gain = 0;
        this.#primed = false;
        this.#phase = 1;
        if (this.ended) this.state = "drained";
        else {
          this.underruns += 1;
          this.startSamples = Math.min(this.startSamples * 2, this.#maxStartSamples);
          this.state = "waiting";
        }
        return;
      }
      this.#gain = Math.min(1, this.#gain + rampStep);
      output[index] = (this.#previous + (this.#next - this.#previous) * this.#phase) * this.#gain;
      this.#phase += this.#step;
    }
  }
}

// Registered only inside an AudioWorkletGlobalScope; elsewhere the file is a plain module (tests).
if (typeof registerProcessor === "function") {
  class PcmPlayerProcessor extends AudioWorkletProcessor {
    /** @type {PcmPlayer | undefined} */
    player;
    lastReport = 0;
    lastState = "";

    constructor() {
      super();
      this.port.onmessage = ({ data }) => {
        if (data.type === "format") this.player = new PcmPlayer(data.sampleRate, sampleRate, data.startSeconds);
        else if (data.type === "pcm") this.player?.push(data.samples);
        else if (data.type === "end") this.player?.end();
        else if (data.type === "stop") this.player?.stop();
        this.report(true);
      };
    }

    report(force) {
      const player = this.player;
      if (!player) return;
      if (!force && player.state === this.lastState && currentTime - this.lastReport < PROGRESS_INTERVAL_SECONDS) return;
      this.lastReport = currentTime;
      this.lastState = player.state;
      this.port.postMessage({ type: "progress", state: player.state, samplesPlayed: player.samplesPlayed, bufferedSamples: player.queue.length, targetSamples: player.startSamples, underruns: player.underruns });
    }

    process(_inputs, outputs) {
      const output = outputs[0];
      if (this.player && output.length > 0) {
        this.player.render(output[0]);
        for (let channel = 1; channel < output.length; channel += 1) output[channel].set(output[0]);
      }
      this.report(false);
      // Kept alive until stopped; the page disconnects the node when the utterance is over.
      return this.player?.state !== "stopped";
    }
  }
  registerProcessor("pcm-player", PcmPlayerProcessor);
}
