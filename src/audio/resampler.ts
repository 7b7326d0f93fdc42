/**
 * Streaming sample-rate conversion for mono Float32 PCM: the SpeexDSP resampler at quality 10,
 * compiled to WebAssembly (@echogarden/speex-resampler-wasm).
 *
 * Why Speex and not libsamplerate (@alexanderolsen/libsamplerate-js 2.1.2). Both were measured
 * on 24 kHz input converted to 8, 16, 44.1 and 48 kHz:
 * - Quality: both are transparent for speech. A 1 kHz tone comes out with an SNR of 135 dB or more
 *   (libsamplerate SRC_SINC_BEST: 143 dB or more). The response is flat to 0.85 × Nyquist, and a
 *   tone at 1.08 × Nyquist is aliased at −132 dB or lower (libsamplerate: −147 dB). Both sit far
 *   below the 16-bit noise floor (−96 dB) that our encoders keep.
 * - Streaming: libsamplerate-js's `full()` has no end-of-input flag. A stream therefore loses its
 *   last half filter length (143–288 output samples here) unless the caller pads with zeros and
 *   guesses where to cut. Speex reports its input latency, so flush() can drain it exactly.
 * - Per-stream state: libsamplerate-js keeps one converter per module instance. Each create()
 *   instantiates the whole 2 MB module again (5–70 ms, about 3 MB of RSS per stream). Speex
 *   states are small heap objects inside one shared module.
 * - Speed: libsamplerate-js is built with wasm2js (plain JavaScript). SRC_SINC_BEST runs 3–18×
 *   slower than Speex's SIMD wasm at quality 10 (24 → 16 kHz, 2 s of audio: 89 ms against 5 ms).
 *
 * Streaming contract: push() returns the output that is final so far. The concatenation of every
 * push() plus flush() is sample-identical to resample() of the whole signal, so chunk borders
 * cannot introduce seams. The total length is round(inputLength × toHz / fromHz).
 */
import { concatFloat32 } from "../lib/concat.ts";
import { lazyLoad } from "../lib/lazy-load.ts";
import { NO_PAUSE, type Pause } from "./pause.ts";

/** Speex quality 0–10. 10 has the widest passband (96.6% of Nyquist, like SRC_SINC_BEST), and even
 *  44.1 kHz output costs only about 1% of one core for real-time 24 kHz input (see bench/resampler.ts). */
const SPEEX_QUALITY = 10;

/** Input samples handed to wasm per call. Bounding it keeps the per-stream heap buffers small
 *  whatever chunk size callers push. */
const BLOCK_INPUT_SAMPLES = 8192;

/** Extra output room per block. Speex's fractional phase carries over between calls, so one call can
 *  emit slightly more than block × ratio. A short output buffer would only cost another loop turn. */
const OUTPUT_SLACK_SAMPLES = 16;

const BYTES_PER_FLOAT32 = 4;

export interface StreamingResampler {
  /** Resamples the next chunk of one stream. The output may lag the input by the filter delay. */
  push(chunk: Float32Array): Float32Array;
  /** Ends the stream and returns the delayed tail. The instance is then reset and can take a new stream. */
  flush(): Float32Array;
  /** Frees the wasm state. Later push()/flush() calls throw. */
  close(): void;
}

/** The subset of the Emscripten module that we call. Heap views are replaced when memory grows. */
interface SpeexWasmModule {
  HEAPF32: Float32Array;
  HEAP32: Int32Array;
  _malloc(byteCount: number): number;
  _free(pointer: number): void;
  _speex_resampler_init(channelCount: number, inRateHz: number, outRateHz: number, quality: number, errorPointer: number): number;
  _speex_resampler_skip_zeros(state: number): number;
  _speex_resampler_reset_mem(state: number): number;
  _speex_resampler_get_input_latency(state: number): number;
  _speex_resampler_process_float(state: number, channelIndex: number, inPointer: number, inLengthPointer: number, outPointer: number, outLengthPointer: number): number;
  _speex_resampler_destroy(state: number): void;
}

type SpeexModuleFactory = () => Promise<SpeexWasmModule>;

/** wasm-feature-detect's SIMD probe: a function that uses i8x16.splat and i8x16.popcnt. */
const WASM_SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11]);

/** Loaded on first use and shared with every stream; a failed load is retried by the next call. */
const loadSpeexModule = lazyLoad(async () => (await importSpeexFactory())());

// The package ships no type declarations; SpeexWasmModule describes the part we call. tsc reports
// TS7016 on these imports while Deno types them as any, so only @ts-ignore suits both checkers.
async function importSpeexFactory(): Promise<SpeexModuleFactory> {
  // At quality 10 the SIMD build is 10–35% faster, with the same output to 1e-7. The plain build serves runtimes without wasm SIMD.
  // @ts-ignore TS7016 (see above)
  if (WebAssembly.validate(WASM_SIMD_PROBE)) return (await import("@echogarden/speex-resampler-wasm/simd")).default;
  // @ts-ignore TS7016 (see above)
  return (await import("@echogarden/speex-resampler-wasm")).default;
}

interface SpeexAllocation {
  speex: SpeexWasmModule;
  state: number;
  /** One malloc holding [in length, out length, input block, output block]. */
  buffer: number;
}

function freeAllocation({ speex, state, buffer }: SpeexAllocation): void {
  speex._speex_resampler_destroy(state);
  speex._free(buffer);
}

// The wasm heap is invisible to the garbage collector. This is a backstop for streams that are
// dropped without close(), for example on an error path, so they do not leak for the life of the process.
const abandonedAllocations = new FinalizationRegistry<SpeexAllocation>(freeAllocation);

class SpeexStreamingResampler implements StreamingResampler {
  readonly #fromHz: number;
  readonly #toHz: number;
  readonly #allocation: SpeexAllocation;
  readonly #inputLatencySamples: number;
  readonly #outputCapacitySamples: number;
  #inputSampleCount = 0;
  #outputSampleCount = 0;
  #closed = false;

  constructor(speex: SpeexWasmModule, fromHz: number, toHz: number) {
    this.#fromHz = fromHz;
    this.#toHz = toHz;
    this.#outputCapacitySamples = Math.ceil((BLOCK_INPUT_SAMPLES * toHz) / fromHz) + OUTPUT_SLACK_SAMPLES;
    const buffer = speex._malloc(BYTES_PER_FLOAT32 * (2 + BLOCK_INPUT_SAMPLES + this.#outputCapacitySamples));
    if (buffer === 0) throw new Error("speex resampler: out of wasm memory");
    const state = speex._speex_resampler_init(1, fromHz, toHz, SPEEX_QUALITY, buffer);
    const initError = speex.HEAP32[buffer >> 2];
    if (state === 0 || initError !== 0) {
      speex._free(buffer);
      throw new Error(`speex_resampler_init(${fromHz} → ${toHz} Hz) failed with code ${initError}`);
    }
    this.#allocation = { speex, state, buffer };
    abandonedAllocations.register(this, this.#allocation, this);
    // Without skip_zeros the first filter half length comes out as leading silence, which would put
    // the signal late and make the total length depend on the filter.
    speex._speex_resampler_skip_zeros(state);
    this.#inputLatencySamples = speex._speex_resampler_get_input_latency(state);
  }

  push(chunk: Float32Array): Float32Array {
    this.#assertOpen();
    const parts: Float32Array[] = [];
    for (let offset = 0; offset < chunk.length; offset += BLOCK_INPUT_SAMPLES) {
      const block = chunk.subarray(offset, offset + BLOCK_INPUT_SAMPLES);
      // Read HEAPF32 at each use: another stream's malloc may have grown memory and replaced the view.
      this.#allocation.speex.HEAPF32.set(block, this.#inputBlockPointer() >> 2);
      this.#convertBlock(block.length, parts);
    }
    this.#inputSampleCount += chunk.length;
    const output = concatFloat32(parts);
    this.#outputSampleCount += output.length;
    return output;
  }

  flush(): Float32Array {
    this.#assertOpen();
    const { speex, state } = this.#allocation;
    const expectedTotal = Math.round((this.#inputSampleCount * this.#toHz) / this.#fromHz);
    // The tail is still inside the filter. Zeros push it out. One latency's worth normally
    // suffices; the loop covers rounding at odd ratios.
    const zeroCount = Math.min(this.#inputLatencySamples + 1, BLOCK_INPUT_SAMPLES);
    const parts: Float32Array[] = [];
    let outputCount = this.#outputSampleCount;
    while (outputCount < expectedTotal) {
      const inputIndex = this.#inputBlockPointer() >> 2;
      speex.HEAPF32.fill(0, inputIndex, inputIndex + zeroCount);
      outputCount += this.#convertBlock(zeroCount, parts);
    }
    // The zeros also produce output past the end of the signal; cut it at the exact expected length.
    const tail = concatFloat32(parts).slice(0, Math.max(0, expectedTotal - this.#outputSampleCount));
    speex._speex_resampler_reset_mem(state);
    speex._speex_resampler_skip_zeros(state);
    this.#inputSampleCount = 0;
    this.#outputSampleCount = 0;
    return tail;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    abandonedAllocations.unregister(this);
    freeAllocation(this.#allocation);
  }

  #assertOpen(): void {
    if (this.#closed) throw new Error("resampler is closed");
  }

  #inputBlockPointer(): number {
    return this.#allocation.buffer + 2 * BYTES_PER_FLOAT32;
  }

  /** Runs `inputCount` samples, already copied to the input block, through Speex; appends the output and returns its length. */
  #convertBlock(inputCount: number, parts: Float32Array[]): number {
    const { speex, state, buffer } = this.#allocation;
    const inLengthIndex = buffer >> 2;
    const outLengthIndex = inLengthIndex + 1;
    const inputPointer = this.#inputBlockPointer();
    const outputPointer = inputPointer + BYTES_PER_FLOAT32 * BLOCK_INPUT_SAMPLES;
    let consumed = 0;
    let producedTotal = 0;
    // Speex stops early when the output buffer fills, so keep feeding the rest of the block until it is all consumed.
    while (consumed < inputCount) {
      speex.HEAP32[inLengthIndex] = inputCount - consumed;
      speex.HEAP32[outLengthIndex] = this.#outputCapacitySamples;
      const error = speex._speex_resampler_process_float(
        state, 0, inputPointer + BYTES_PER_FLOAT32 * consumed, buffer, outputPointer, buffer + BYTES_PER_FLOAT32,
      );
      if (error !== 0) throw new Error(`speex_resampler_process_float failed with code ${error}`);
      const consumedNow = speex.HEAP32[inLengthIndex]!;
      const produced = speex.HEAP32[outLengthIndex]!;
      // A server thread must never spin: a call that makes no progress is a bug, not a reason to retry.
      if (consumedNow === 0 && produced === 0) throw new Error("speex_resampler_process_float made no progress");
      consumed += consumedNow;
      if (produced > 0) parts.push(speex.HEAPF32.slice(outputPointer >> 2, (outputPointer >> 2) + produced));
      producedTotal += produced;
    }
    return producedTotal;
  }
}

/** Equal rates: no filtering, so no delay and no tail. */
class IdentityResampler implements StreamingResampler {
  #closed = false;

  push(chunk: Float32Array): Float32Array {
    if (this.#closed) throw new Error("resampler is closed");
    // A copy, so the caller owns the output at every rate and can reuse its input buffer.
    return chunk.slice();
  }

  flush(): Float32Array {
    if (this.#closed) throw new Error("resampler is closed");
    return new Float32Array(0);
  }

  close(): void {
    this.#closed = true;
  }
}

function assertSampleRate(name: string, rateHz: number): void {
  // Speex takes rates as uint32.
  if (!Number.isInteger(rateHz) || rateHz <= 0 || rateHz > 0xffffffff) {
    throw new RangeError(`${name} must be a positive integer sample rate in Hz, got ${rateHz}`);
  }
}

/** Creates an independent resampler for one mono stream. Streams share only the lazily loaded wasm module. */
export async function createStreamingResampler(fromHz: number, toHz: number): Promise<StreamingResampler> {
  assertSampleRate("fromHz", fromHz);
  assertSampleRate("toHz", toHz);
  if (fromHz === toHz) return new IdentityResampler();
  return new SpeexStreamingResampler(await loadSpeexModule(), fromHz, toHz);
}

/** Input samples resampled between two pauses of a long signal. */
const SLICE_INPUT_SAMPLES = 1 << 16;

/** Resamples a whole signal. It goes through the streaming path, so its output equals a streamed conversion. */
export async function resample(samples: Float32Array, fromHz: number, toHz: number, pause: Pause = NO_PAUSE): Promise<Float32Array> {
  const resampler = await createStreamingResampler(fromHz, toHz);
  try {
    const parts: Float32Array[] = [];
    for (let start = 0; start < samples.length; start += SLICE_INPUT_SAMPLES) {
      if (start > 0) await pause();
      parts.push(resampler.push(samples.subarray(start, start + SLICE_INPUT_SAMPLES)));
    }
    parts.push(resampler.flush());
    return concatFloat32(parts);
  } finally {
    resampler.close();
  }
}
