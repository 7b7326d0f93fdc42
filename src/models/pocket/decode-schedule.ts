/** The decode schedule: how a chunk's latents go to the Mimi decoder while sampling goes on. */
import { concatFloat32 } from "../../lib/concat.ts";

/** What decodes latents for `decodeAlongside`. */
export interface LatentBatchDecoder {
  decode(batch: Float32Array): Promise<Float32Array>;
  /**
   * True when a decode runs off the JS thread (a worker), so it can overlap the sampling of the next
   * latents; in-process runs of either onnxruntime package block the thread (onnxruntime-web also refuses
   * a second run while one is in progress), so there latents are sampled and decoded in turn.
   */
  concurrent: boolean;
}

/**
 * Latents the next decoder call of a chunk takes once `sentFrames` have been sent: 1, 2, 4, … up to
 * `maxBatchFrames`, so first audio leaves at once and later calls grow with what was sent. A function of
 * counts alone, never of timing: a different split changes float rounding, and the same seed must give
 * the same bytes.
 */
export function decodeBatchFrames(sentFrames: number, maxBatchFrames: number): number {
  return Math.min(maxBatchFrames, sentFrames + 1);
}

/**
 * Decodes a chunk's latents in growing batches, each batch's audio yielded as soon as it is decoded. The
 * first latent is decoded alone, so first audio leaves at once; later batches take at least 1, 2, 4, … up
 * to `maxBatchFrames` latents (doubling with the latents already sent), since one decoder call on k latents
 * costs far less than k calls (anchors: 18.9 → 6.2 ms/frame from 1 to 15 per call). With a concurrent
 * decoder, sampling goes on while a batch decodes; latents that pile up meanwhile wait for their batch.
 * Any split of the latents into calls gives the same audio (§1.3 streaming state); batches decode in order.
 */
export async function* decodeAlongside(latents: AsyncIterable<Float32Array>, decoder: LatentBatchDecoder, options: { latentDim: number; maxBatchFrames: number }): AsyncGenerator<Float32Array, void, undefined> {
  const pending: Float32Array[] = [];
  let sentFrames = 0;
  const batchSize = () => decodeBatchFrames(sentFrames, options.maxBatchFrames);
  const takeBatch = (count = pending.length) => {
    const batch = concatFloat32(pending.splice(0, count));
    sentFrames += batch.length / options.latentDim;
    return batch;
  };
  const batchIsDue = () => pending.length >= batchSize();

  if (!decoder.concurrent) {
    for await (const latent of latents) {
      pending.push(latent);
      if (batchIsDue()) yield await decoder.decode(takeBatch());
    }
    if (pending.length > 0) yield await decoder.decode(takeBatch());
    return;
  }

  const iterator = latents[Symbol.asyncIterator]();
  let inFlight = null as Promise<Float32Array> | null;
  let next = iterator.next();
  // Both promises are awaited below; these handlers keep an abandoned one's rejection from going unhandled.
  next.catch(() => {});
  try {
    const startDueBatch = () => {
      if (inFlight || !batchIsDue()) return;
      inFlight = decoder.decode(takeBatch(batchSize()));
      inFlight.catch(() => {});
    };
    for (;;) {
      if (inFlight) {
        const audioFirst = await Promise.race([inFlight.then(() => true), next.then(() => false)]);
        if (audioFirst) {
          const audio = await inFlight;
          inFlight = null;
          startDueBatch();
          yield audio;
          continue;
        }
      }
      const result = await next;
      if (result.done) break;
      pending.push(result.value);
      next = iterator.next();
      next.catch(() => {});
      startDueBatch();
    }
    while (inFlight) {
      const audio: Float32Array = await inFlight;
      inFlight = null;
      startDueBatch();
      yield audio;
    }
    if (pending.length > 0) yield await decoder.decode(takeBatch());
  } finally {
    // A decode still running when the consumer stops is waited for, so the caller may release the state.
    await inFlight?.catch(() => {});
    await iterator.return?.();
  }
}
