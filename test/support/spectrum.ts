/**
 * Spectrum helpers for tests: the frequency of the strongest spectral peak of a signal.
 */

/** The true frequency resolution (one DFT bin) of `sampleCount` samples. Zero-padding does not improve it. */
export function frequencyResolutionHz(sampleCount: number, sampleRateHz: number): number {
  return sampleRateHz / sampleCount;
}

/**
 * Frequency of the strongest peak in the Hann-windowed spectrum of `samples`. The FFT is
 * zero-padded to a power of two, and the peak is refined by parabolic interpolation of the log
 * magnitude, so the estimate is far finer than one bin for a steady tone. Frequencies below two
 * bins are skipped: a DC offset would otherwise win.
 */
export function dominantFrequencyHz(samples: Float32Array, sampleRateHz: number): number {
  if (samples.length < 4) throw new RangeError("need at least 4 samples to estimate a frequency");
  let fftSize = 1;
  while (fftSize < samples.length) fftSize *= 2;
  const real = new Float64Array(fftSize);
  const imaginary = new Float64Array(fftSize);
  for (let i = 0; i < samples.length; i++) {
    real[i] = samples[i]! * (0.5 - 0.5 * Math.cos((2 * Math.PI * i) / (samples.length - 1)));
  }
  fftInPlace(real, imaginary);

  const logMagnitude = (bin: number) => 0.5 * Math.log(real[bin]! ** 2 + imaginary[bin]! ** 2 + 1e-300);
  const firstBin = Math.max(1, Math.ceil((2 * fftSize) / samples.length));
  let peakBin = firstBin;
  for (let bin = firstBin + 1; bin < fftSize / 2; bin++) {
    if (logMagnitude(bin) > logMagnitude(peakBin)) peakBin = bin;
  }
  const left = logMagnitude(peakBin - 1);
  const center = logMagnitude(peakBin);
  const right = logMagnitude(peakBin + 1);
  const curvature = left - 2 * center + right;
  const offsetBins = curvature < 0 ? (0.5 * (left - right)) / curvature : 0;
  return ((peakBin + offsetBins) * sampleRateHz) / fftSize;
}

/** Iterative radix-2 Cooley–Tukey FFT. The length must be a power of two. */
function fftInPlace(real: Float64Array, imaginary: Float64Array): void {
  const size = real.length;
  for (let i = 1, j = 0; i < size; i++) {
    let bit = size >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      [real[i], real[j]] = [real[j]!, real[i]!];
      [imaginary[i], imaginary[j]] = [imaginary[j]!, imaginary[i]!];
    }
  }
  for (let length = 2; length <= size; length *= 2) {
    const angleStep = (-2 * Math.PI) / length;
    const half = length / 2;
    for (let k = 0; k < half; k++) {
      const twiddleReal = Math.cos(angleStep * k);
      const twiddleImaginary = Math.sin(angleStep * k);
      for (let start = 0; start < size; start += length) {
        const even = start + k;
        const odd = even + half;
        const oddReal = real[odd]! * twiddleReal - imaginary[odd]! * twiddleImaginary;
        const oddImaginary = real[odd]! * twiddleImaginary + imaginary[odd]! * twiddleReal;
        real[odd] = real[even]! - oddReal;
        imaginary[odd] = imaginary[even]! - oddImaginary;
        real[even] = real[even]! + oddReal;
        imaginary[even] = imaginary[even]! + oddImaginary;
      }
    }
  }
}
