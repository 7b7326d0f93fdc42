/**
 * Text → the independently generated chunks of a request (docs/pocket-tts.md §1.13 step 6), and the frame
 * cap each chunk gets (§1.12): what the runner plans a job's text into before its first AR step.
 */
import type { PocketModelFlags } from "./bundle/pocket-bundle.ts";
import { framesAfterEosGuessFor, splitIntoBestSentences, splitTokensWithinBudget } from "./text-prompt.ts";
import type { SentencePieceTokenizer } from "../../text/sentencepiece.ts";

/** One independently generated piece of text (§1.13 step 6). */
export interface TextChunk {
  /** The chunk's text, when it came from `planTextChunks`. */
  text?: string;
  /** SentencePiece ids of the chunk text, no BOS/EOS (§1.8). */
  tokenIds: readonly number[];
  /** Latents emitted from the EOS step on (§1.12: model recommendation, else prepare_text_prompt's guess + 2). */
  framesAfterEos: number;
}

/**
 * Text → independently generated chunks (§1.13): upstream's splitter packs sentences into chunks of at
 * most `maxTokensPerChunk` tokens; each chunk text is tokenized as is, and its own `prepare_text_prompt`
 * only supplies the frames-after-EOS guess (+ 2 unless the model recommends a value, §1.12).
 *
 * Upstream lets one sentence exceed the limit; such a chunk is cut into pieces within it (at word starts,
 * else inside the word), each keeping its slice of the chunk's token ids, so that any text fits the cache.
 */
export function planTextChunks(text: string, tokenizer: SentencePieceTokenizer, flags: PocketModelFlags, maxTokensPerChunk = flags.maxTokensPerChunk): TextChunk[] {
  const options = { padWithSpacesForShortInputs: flags.padWithSpacesForShortInputs, removeSemicolons: flags.removeSemicolons };
  const framesAfterEosOf = (chunkText: string) => flags.recommendedFramesAfterEos ?? framesAfterEosGuessFor(chunkText) + FRAMES_AFTER_EOS_MARGIN;
  return splitIntoBestSentences(text, tokenizer, options, maxTokensPerChunk).flatMap((chunkText) => {
    const tokenIds = tokenizer.encode(chunkText);
    if (tokenIds.length <= maxTokensPerChunk) return [{ text: chunkText, tokenIds, framesAfterEos: framesAfterEosOf(chunkText) }];
    return splitTokensWithinBudget(tokenIds, maxTokensPerChunk, tokenizer).map((pieceIds) => {
      const pieceText = tokenizer.decode(pieceIds);
      return { text: pieceText, tokenIds: pieceIds, framesAfterEos: framesAfterEosOf(pieceText) };
    });
  });
}

/**
 * Most text tokens a chunk may hold after a voice of `voicePositions`: the bundle's max_token_per_chunk,
 * lowered until the voice, the text and the chunk's frame cap all fit in the FlowLM cache (§3.1: voice +
 * text + generated positions ≤ 1000). Upstream's 50 tokens (+ 234 frames) leave room for voices up to
 * 716 positions (57 s); an uploaded voice is at most 30 s. Never below one token: a voice that leaves less
 * room only shortens its chunks' frame cap (request-state.ts, `startChunk`).
 */
export function chunkTokenBudget(maxTokensPerChunk: number, cachePositions: number, voicePositions: number): number {
  let tokens = maxTokensPerChunk;
  while (tokens > 1 && voicePositions + tokens + maxFramesForTokens(tokens) > cachePositions) tokens--;
  return tokens;
}

/** Upstream adds 2 frames to prepare_text_prompt's guess (§1.12: 3 or 5 frames). */
const FRAMES_AFTER_EOS_MARGIN = 2;

/** Frame cap of a chunk since upstream 2026-02-03 (§1.12): ceil((n_tokens/3 + 2)·12.5). */
export function maxFramesForTokens(tokenCount: number): number {
  return Math.ceil((tokenCount / 3 + 2) * 12.5);
}
