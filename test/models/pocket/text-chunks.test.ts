import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadPocketBundle } from "../../../src/models/pocket/bundle/load.ts";
import { chunkTokenBudget, maxFramesForTokens, planTextChunks } from "../../../src/models/pocket/text-chunks.ts";
import { prepareTextPrompt } from "../../../src/models/pocket/text-prompt.ts";
import { SentencePieceTokenizer } from "../../../src/text/sentencepiece.ts";
import { OVERLONG_INPUTS } from "./overlong-inputs.ts";

const TINY_DIR = join(import.meta.dir, "../../../../shared/fixtures/pocket-tiny");
const GOLDEN = JSON.parse(readFileSync(join(TINY_DIR, "golden.json"), "utf8"));

describe("text → chunks", () => {
  test("the golden end-to-end texts give the golden chunk ids and frames_after_eos", async () => {
    const bundle = await loadPocketBundle(TINY_DIR);
    const tokenizer = await SentencePieceTokenizer.fromFile(bundle.tokenizer.format === "sentencepiece" ? bundle.tokenizer.modelPath : "");
    for (const golden of GOLDEN.cases.end_to_end.cases as { text: string; chunks: { text: string; token_ids: number[]; frames_after_eos: number }[] }[]) {
      const plan = planTextChunks(golden.text, tokenizer, bundle.flags);
      expect(plan).toEqual(golden.chunks.map((chunk) => ({ text: chunk.text, tokenIds: chunk.token_ids, framesAfterEos: chunk.frames_after_eos })));
    }
  });

  test("a model-recommended frames_after_eos replaces the guess", async () => {
    const bundle = await loadPocketBundle(TINY_DIR);
    const tokenizer = await SentencePieceTokenizer.fromFile(join(TINY_DIR, "tokenizer.model"));
    const plan = planTextChunks(GOLDEN.cases.end_to_end.cases[1].text, tokenizer, { ...bundle.flags, recommendedFramesAfterEos: 8 });
    expect(plan.map((chunk) => chunk.framesAfterEos)).toEqual([8, 8, 8, 8]);
  });

  for (const [name, text] of Object.entries(OVERLONG_INPUTS)) {
    test(`one sentence over the limit (${name}) is cut into chunks within it that keep every token`, async () => {
      const bundle = await loadPocketBundle(TINY_DIR);
      const tokenizer = await SentencePieceTokenizer.fromFile(join(TINY_DIR, "tokenizer.model"));
      const plan = planTextChunks(text, tokenizer, bundle.flags);
      expect(plan.length).toBeGreaterThan(1);
      expect(plan.every((chunk) => chunk.tokenIds.length >= 1 && chunk.tokenIds.length <= bundle.flags.maxTokensPerChunk)).toBe(true);
      // Upstream keeps a single sentence as one chunk: the pieces together are that chunk's tokens.
      expect(plan.flatMap((chunk) => chunk.tokenIds)).toEqual(tokenizer.encode(prepareTextPrompt(text, bundle.flags).text));
    });
  }

  test("the chunk budget is the bundle's limit unless the voice leaves less room for text and frames", () => {
    expect(chunkTokenBudget(50, 1000, 30)).toBe(50);
    // 900 + 14 + 84 frames = 998 fits; 900 + 15 + 88 = 1003 does not.
    expect(chunkTokenBudget(50, 1000, 900)).toBe(14);
    expect(900 + 14 + maxFramesForTokens(14)).toBeLessThanOrEqual(1000);
    expect(900 + 15 + maxFramesForTokens(15)).toBeGreaterThan(1000);
    expect(chunkTokenBudget(50, 1000, 999)).toBe(1);
  });

  test("max frames per chunk is ceil((n_tokens/3 + 2)·12.5), as in every golden chunk", () => {
    const chunks = GOLDEN.cases.end_to_end.cases.flatMap((entry: { chunks: { token_ids: number[]; max_gen_len: number }[] }) => entry.chunks);
    for (const chunk of chunks) expect(maxFramesForTokens(chunk.token_ids.length)).toBe(chunk.max_gen_len);
    expect(chunks.map((chunk: { max_gen_len: number }) => chunk.max_gen_len)).toEqual([50, 221, 230, 180, 105]);
  });
});
