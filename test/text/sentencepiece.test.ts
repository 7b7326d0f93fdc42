import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { concatBytes } from "../../src/lib/concat.ts";
import { InvalidTokenizerModelError, SentencePieceTokenizer } from "../../src/text/sentencepiece.ts";
import { readSafetensorsHeader } from "../../src/formats/safetensors.ts";
import { requirePocketTinyFixture } from "../models/pocket/bundle-fixture.ts";

/** The shared fixtures live beside the repository (`../shared`), never inside it. */
const FIXTURE_DIR = requirePocketTinyFixture();

interface GoldenTokenizerCase {
  text: string;
  tensor: string;
  ids: number[];
  pieces: string[];
}

const golden = JSON.parse(readFileSync(join(FIXTURE_DIR, "golden.json"), "utf8")) as { cases: { tokenizer: { cases: GoldenTokenizerCase[] } } };
const goldenCases = golden.cases.tokenizer.cases;
const goldenTensors = readFileSync(join(FIXTURE_DIR, "golden.safetensors"));
const modelBytes = new Uint8Array(readFileSync(join(FIXTURE_DIR, "tokenizer.model")));
const tokenizer = SentencePieceTokenizer.fromModelProto(modelBytes);

const BYTE_PIECE_BASE_ID = 4; // `<0x00>` is id 4 in the Pocket vocabulary (fixture README, "Tokenizer").
const byteIds = (bytes: number[]) => bytes.map((byte) => BYTE_PIECE_BASE_ID + byte);
const utf8Ids = (text: string) => byteIds([...new TextEncoder().encode(text)]);
const SPACE_PIECE_ID = 260; // "▁"

let scratchDir: string | undefined;
afterAll(() => {
  if (scratchDir !== undefined) rmSync(scratchDir, { recursive: true, force: true });
});

/** An I64 tensor of golden.safetensors as plain numbers (the shared reader upcasts floats only). */
function goldenIds(tensorName: string): number[] {
  const header = readSafetensorsHeader(goldenTensors);
  const info = header.tensors[tensorName];
  if (info === undefined) throw new Error(`golden.safetensors has no tensor '${tensorName}'`);
  expect(info.dtype).toBe("I64");
  const [begin, end] = info.dataOffsets;
  const view = new DataView(goldenTensors.buffer, goldenTensors.byteOffset + header.dataStartBytes + begin, end - begin);
  return Array.from({ length: (end - begin) / 8 }, (_, index) => Number(view.getBigInt64(index * 8, true)));
}

describe("golden encodings (fixture pocket-tiny, sentencepiece 0.2 reference)", () => {
  test("all 14 cases are present, the last one empty", () => {
    expect(goldenCases).toHaveLength(14);
    expect(goldenCases.at(-1)!.text).toBe("");
  });

  for (const [index, goldenCase] of goldenCases.entries()) {
    test(`case ${index}: ${JSON.stringify(goldenCase.text.slice(0, 40))}`, () => {
      const ids = tokenizer.encode(goldenCase.text);
      expect(ids).toEqual(goldenIds(`tokenizer.${index}.ids`));
      expect(ids).toEqual(goldenCase.ids);
      expect(ids.map((id) => tokenizer.idToPiece(id))).toEqual(goldenCase.pieces);
    });
  }

  test("the four reference encodings of the original tokenizer (fixture README)", () => {
    expect(tokenizer.encode("hello")).toEqual([1876, 393]);
    expect(tokenizer.encode("Hello world.")).toEqual([2994, 578, 263]);
    expect(tokenizer.encode("        hello")).toEqual([...Array(8).fill(SPACE_PIECE_ID), 1876, 393]);
    expect(tokenizer.encode("Test sentence.")).toEqual([602, 552, 1472, 599, 263]);
  });

  test("the vocabulary has the 4000 pieces the text conditioner expects (§1.8)", () => {
    expect(tokenizer.vocabSize).toBe(4000);
    expect(tokenizer.idToPiece(0)).toBe("<unk>");
    expect(tokenizer.idToPiece(BYTE_PIECE_BASE_ID)).toBe("<0x00>");
    expect(tokenizer.idToPiece(SPACE_PIECE_ID)).toBe("▁");
  });

  test("an exact score tie is split as sentencepiece's float32 path scores split it", () => {
    // "." + "..." and "..." + "." score the same in real arithmetic; the reference picks the first.
    expect(tokenizer.encode("Z[....&").map((id) => tokenizer.idToPiece(id))).toEqual(["▁Z", "<0x5B>", ".", "...", "&"]);
  });
});

describe("byte fallback", () => {
  test("an emoji outside the vocabulary becomes its four UTF-8 bytes", () => {
    expect(tokenizer.encode("😀")).toEqual([SPACE_PIECE_ID, ...utf8Ids("😀")]);
  });

  test("each CJK character becomes its three UTF-8 bytes", () => {
    expect(tokenizer.encode("日本語")).toEqual([SPACE_PIECE_ID, ...utf8Ids("日本語")]);
  });

  test("tab and newline are not whitespace under the identity rule", () => {
    expect(tokenizer.encode("\t")).toEqual([SPACE_PIECE_ID, ...byteIds([0x09])]);
    expect(tokenizer.encode("\n")).toEqual([SPACE_PIECE_ID, ...byteIds([0x0a])]);
  });

  test("byte pieces decode back to the characters", () => {
    expect(tokenizer.decode(tokenizer.encode("emoji 😀👍🏽 and 日本語"))).toBe("emoji 😀👍🏽 and 日本語");
  });
});

describe("where text may be cut", () => {
  test("a ▁ piece starts a word; pieces inside a word and byte pieces do not", () => {
    // "▁Hello", "▁there", ",", "▁tiny", "▁model", "."
    expect(tokenizer.encode("Hello there, tiny model.").map((id) => tokenizer.startsWord(id))).toEqual([true, true, false, true, true, false]);
    expect(tokenizer.encode("9999").map((id) => tokenizer.startsWord(id))).toEqual([true, false, false, false, false]);
    expect(utf8Ids("😀").some((id) => tokenizer.startsWord(id))).toBe(false);
  });

  test("only continuation bytes continue a character", () => {
    // F0 9F 98 80: the lead byte opens the character, the other three continue it.
    expect(utf8Ids("😀").map((id) => tokenizer.continuesCharacter(id))).toEqual([false, true, true, true]);
    expect(tokenizer.encode("Hello 9").some((id) => tokenizer.continuesCharacter(id))).toBe(false);
  });
});

describe("decode", () => {
  test("decode(encode(text)) gives the text back for every golden case", () => {
    // Identity normalisation loses nothing, and decode drops only the dummy-prefix space.
    for (const { text } of goldenCases) expect(tokenizer.decode(tokenizer.encode(text))).toBe(text);
  });

  test("only the first leading ▁ is the dummy prefix", () => {
    expect(tokenizer.decode([SPACE_PIECE_ID, SPACE_PIECE_ID, 1876, 393])).toBe("  hello");
    expect(tokenizer.decode([1876, 393, 1876])).toBe("hello hell");
  });

  test("control pieces vanish and <unk> reads as ' ⁇ '", () => {
    expect(tokenizer.decode([1, 2994, 578, 2])).toBe("Hello world");
    expect(tokenizer.decode([0, 2994])).toBe(" ⁇  Hello");
  });

  test("each malformed byte becomes U+FFFD on its own", () => {
    // A truncated 3-byte sequence is two errors to sentencepiece (TextDecoder would report one).
    expect(tokenizer.decode(byteIds([0xe6, 0x97]))).toBe("\uFFFD\uFFFD");
    expect(tokenizer.decode([...byteIds([0xe6, 0x97, 0xa5, 0xff]), 1876])).toBe("日\uFFFD hell");
    // Overlong encodings and UTF-16 surrogates are not characters.
    expect(tokenizer.decode(byteIds([0xc0, 0xaf]))).toBe("\uFFFD\uFFFD");
    expect(tokenizer.decode(byteIds([0xed, 0xa0, 0x80]))).toBe("\uFFFD\uFFFD\uFFFD");
  });

  test("ids outside the vocabulary are rejected", () => {
    expect(() => tokenizer.decode([4000])).toThrow(RangeError);
    expect(() => tokenizer.decode([-1])).toThrow(RangeError);
    expect(() => tokenizer.idToPiece(1.5)).toThrow(RangeError);
  });
});

describe("sherpa-onnx vocab.json + token_scores.json (§3.4)", () => {
  test("a tokenizer rebuilt from the JSON files encodes exactly like tokenizer.model", async () => {
    scratchDir = mkdtempSync(join(tmpdir(), "voxedge-tokenizer-"));
    // convert_tokenizer.py's output: {piece: id} and {piece: score}, written with indent 2.
    const pieces = readPiecesAndScores(modelBytes);
    writeFileSync(join(scratchDir, "vocab.json"), JSON.stringify(Object.fromEntries(pieces.map(({ piece }, id) => [piece, id])), null, 2));
    writeFileSync(join(scratchDir, "token_scores.json"), JSON.stringify(Object.fromEntries(pieces.map(({ piece, score }) => [piece, score])), null, 2));

    const fromJson = SentencePieceTokenizer.fromSherpaJson(readFileSync(join(scratchDir, "vocab.json"), "utf8"), readFileSync(join(scratchDir, "token_scores.json"), "utf8"));
    expect(fromJson.vocabSize).toBe(tokenizer.vocabSize);
    for (const [index, { text }] of goldenCases.entries()) expect(fromJson.encode(text)).toEqual(goldenIds(`tokenizer.${index}.ids`));
    // Control pieces keep their type, so "<s>" in text is spelled out rather than matched as a piece.
    expect(fromJson.encode("<s> </s> <pad>")).toEqual(tokenizer.encode("<s> </s> <pad>"));
    expect(fromJson.decode([1, 2994, 2])).toBe("Hello");
  });

  test("inconsistent JSON files are rejected", () => {
    const scores = JSON.stringify({ "<unk>": 0, a: -1 });
    expect(() => SentencePieceTokenizer.fromSherpaJson(JSON.stringify({ "<unk>": 0, a: 2 }), scores)).toThrow(InvalidTokenizerModelError);
    expect(() => SentencePieceTokenizer.fromSherpaJson(JSON.stringify({ "<unk>": 0, a: 1 }), JSON.stringify({ "<unk>": 0 }))).toThrow(/no score for 'a'/);
    expect(() => SentencePieceTokenizer.fromSherpaJson(JSON.stringify({ "<unk>": 0, a: 0 }), scores)).toThrow(/id 0 is used by/);
    expect(() => SentencePieceTokenizer.fromSherpaJson("[1, 2]", scores)).toThrow(/not a JSON object/);
    expect(() => SentencePieceTokenizer.fromSherpaJson(JSON.stringify({ a: 0 }), JSON.stringify({ a: -1 }))).toThrow(/no UNKNOWN piece/);
  });
});

/**
 * A 57-piece unigram model made with sentencepiece 0.2.2's trainer, to exercise what the Pocket model does not
 * use: a precompiled character map (`normalization_rule_tsv` rules ﬁ→fi, Ａ→a, …→space, ÅB→bro, Å→a, tab→space),
 * user-defined symbols `<br>` and `ＡＢ`, `remove_extra_whitespaces`, and no byte fallback. The expected ids
 * and texts are sentencepiece 0.2.2's own output for this file.
 */
const NORMALIZING_MODEL_BASE64 = [
  "Cg4KBTx1bms+FQAAAAAYAgoMCgM8cz4VAAAAABgDCg0KBDwvcz4VAAAAABgDCg0KBDxicj4VAAAAABgECg8KBu+8oe+8ohUAAAAAGAQKDwoI4paBd29y",
  "ZHMVPS4mwAoNCgbiloF0aGUVoNtIwAoPCgjiloFqdW1wcxW53EjACg4KB+KWgWZpbmUVQ2VKwAoLCgTiloFhFbpuS8AKDgoH4paBbW9yZRVDCk3ACg0K",
  "BuKWgWFuZBUNlE3ACg4KB+KWgXRpbnkVJpVNwAoQCgniloFvZmZpY2UVQpZNwAoOCgfiloF0aGlzFdaWTcAKDgoH4paBd2l0aBUnIU7ACgwKBeKWgWlz",
  "FcvKTsAKDwoI4paBcXVpY2sVJF5QwAoSCgviloFzZW50ZW5jZRVHX1DACg8KCOKWgWJyb3duFWjwUMAKDQoG4paBZm94FUyCUcAKDgoH4paBZmlsZRVE",
  "GFLACg8KCOKWgXdvcmxkFUSvUsAKDQoG4paBZG9nFdgUVcAKDwoI4paBaGVsbG8VjhZVwAoOCgfiloFvdmVyFWGzVcAKDgoH4paBc29tZRVtUlbACg4K",
  "B+KWgXRlc3QVkt5YwAoOCgfiloFsYXp5Fa+FWcAKDgoH4paBZmlzaBUgll3ACggKAXoVsf3kwAoICgF2FYP+5MAKCAoBZxVV/+TACggKAXgVJgDlwAoI",
  "CgFiFfgA5cAKCAoBcRXKAeXACggKAWsVmwLlwAoICgFwFW0D5cAKCAoBahU/BOXACggKAXkVEQXlwAoICgF1FeIF5cAKCAoBYRW0BuXACggKAWMVhgfl",
  "wAoICgFtFVcI5cAKCAoBbBUpCeXACggKAWQV+wnlwAoICgF3Fc0K5cAKCAoBaBWeC+XACggKAXIVcAzlwAoICgFmFUIN5cAKCAoBbhUTDuXACggKAXQV",
  "5Q7lwAoICgFzFbcP5cAKCAoBaRWJEOXACggKAW8VWhHlwAoICgFlFSwS5cAKCgoD4paBFSwS5cASOAoKY29ycHVzLnR4dBILbm9ybWFsaXppbmcYASA5",
  "VQAAgD/6AQQ8YnI++gEG77yh77yiiAIAmAIAGqsICgx1c2VyX2RlZmluZWQSjwgABAAAACAAAAkNAAAAAACAhR0AAAIAAIAEAACAphEAAICcAgCsAAIA",
  "gQ0AAAgAAIChHQAAAgAAgAwAAAAPAAAADgAAABEAAAAQAAAAEwAAABIAAAAVAAAAFAAAABcAAAAWAAAAvMgCABgAAAAbAAAAGgAAAB0AAAAcAAAAHwAA",
  "AB4AAAAhAAAAIAAAACMAAAAiAAAAJQAAACQAAAAnAAAAJgAAACkAAAAoAAAAKwAAACoAAAAtAAAALAAAAC8AAAAuAAAAMQAAADAAAAAzAAAAMgAAADUA",
  "AAA0AAAANwAAADYAAAA5AAAAOAAAADsAAAA6AAAAPQAAADwAAAA/AAAAPgAAAEEAAABAAAAAQwAAAEIAAABFAAAARAAAAEINAQBGAAAASQAAAEgAAABL",
  "AAAASgAAAE0AAABMAAAATwAAAE4AAABRAAAAUAAAAFMAAABSAAAAVQAAAFQAAABXAAAAVgAAAFkAAABYAAAAWwAAAFoAAABdAAAAXAAAAF8AAABeAAAA",
  "YQAAAGAAAABjAAAAYgAAAGUAAABkAAAAZwAAAGYAAABpAAAAaAAAAGsAAABqAAAAbQAAAGwAAABvAAAAbgAAAHEAAABwAAAAcwAAAHIAAAB1AAAAdAAA",
  "AHcAAAB2AAAAeQAAAHgAAAB7AAAAegAAAH0AAAB8AAAAfwAAAH4AAACBAAAAgAAAAIMAAACCAAAAhQAAAIQAAACHAAAAhgAAAIkAAACIAAAAiwAAAIoA",
  "AACNAAAAjAAAAI8AAACOAAAAkQAAAJAAAACTAAAAkgAAAJUAAACUAAAAlwAAAJYAAACZAAAAmAAAAJsAAACaAAAAnQAAAJwAAACfAAAAngAAAKEAAACg",
  "AAAAowAAAKIAAAClAAAApAAAAKcAAACmAAAAqQAAAKgAAACrAAAAqgAAAK0AAACsAAAArwAAAK4AAACxAAAAsAAAALMAAACyAAAAtQAAALQAAAC3AAAA",
  "tgAAALkAAAC4AAAAuwAAALoAAAC9AAAAvAAAAL8AAAC+AAAAwQAAAMAAAADDAAAAwgAAAMUAAADEAAAAxwAAAMYAAADJAAAAyAAAAMsAAADDNAEAzQAA",
  "AMwAAADPAAAAzgAAANEAAADQAAAA0wAAANIAAADVAAAA1AAAANcAAADWAAAA2QAAANgAAADbAAAA2gAAAN0AAADcAAAA3wAAAN4AAADhAAAA4AAAAOMA",
  "AADiAAAA5QAAAOQAAADnAAAA7wwBAOkAAADoAAAA4rQBAOoAAADtAAAA7AAAAO8AAADuAAAA8QAAAPAAAADzAAAA8gAAAPUAAAD0AAAA9wAAAPYAAAD5",
  "AAAA+AAAAPsAAAD6AAAA/QAAAPwAAAD/AAAA/gAAACAAYQBicm8AZmkAMglydWxlcy50c3Y=",
].join("");

describe("normalizer spec and unknown pieces (a model with rules, user-defined symbols, no byte fallback)", () => {
  const normalizing = SentencePieceTokenizer.fromModelProto(Uint8Array.from(atob(NORMALIZING_MODEL_BASE64), (char) => char.charCodeAt(0)));
  const cases: Array<{ text: string; ids: number[]; decoded: string }> = [
    { text: "ﬁne ﬁsh", ids: [8, 29], decoded: "fine fish" },
    { text: "  the   quick\tbrown  ", ids: [6, 17, 19], decoded: "the quick brown" },
    { text: "office…fox", ids: [13, 20], decoded: "office fox" },
    { text: "ÅBwn Åre", ids: [19, 9, 48, 55], decoded: "brown are" },
    { text: "ＡＢ and Ａ", ids: [56, 4, 11, 9], decoded: "ＡＢ and a" },
    { text: "<br>hello<br>", ids: [56, 3, 47, 55, 44, 44, 54, 3], decoded: "<br>hello<br>" },
    { text: "日本 😀é fox", ids: [56, 0, 56, 0, 20], decoded: " ⁇   ⁇  fox" },
    { text: "   ", ids: [], decoded: "" },
  ];
  for (const { text, ids, decoded } of cases) {
    test(`${JSON.stringify(text)} → ${JSON.stringify(decoded)}`, () => {
      expect(normalizing.encode(text)).toEqual(ids);
      expect(normalizing.decode(ids)).toBe(decoded);
    });
  }

  test("with remove_extra_whitespaces every leading ▁ piece is dropped on decode", () => {
    expect(normalizing.decode([0, 0, 1, 2, 5, 1, 6])).toBe(" ⁇  ⁇  words the");
    expect(normalizing.decode([56, 56, 6])).toBe("the");
  });
});

describe("model validation", () => {
  const unknownPiece = piece("<unk>", 0, 2);
  test("rejects what sentencepiece rejects or what is not implemented", () => {
    const reject = (bytes: Uint8Array, reason: RegExp) => expect(() => SentencePieceTokenizer.fromModelProto(bytes)).toThrow(reason);
    reject(concatBytes([unknownPiece, lengthDelimited(2, varintField(3, 2))]), /model_type 2 is not supported/);
    reject(concatBytes([unknownPiece, lengthDelimited(2, varintField(24, 1))]), /treat_whitespace_as_suffix/);
    reject(concatBytes([unknownPiece, piece("<0x41>", 0, 6)]), /without byte_fallback/);
    reject(concatBytes([unknownPiece, lengthDelimited(2, varintField(35, 1)), piece("<0x41>", 0, 6)]), /needs all 256/);
    reject(concatBytes([unknownPiece, piece("a", -1, 1), piece("a", -2, 1)]), /defined twice/);
    reject(piece("a", -1, 1), /no UNKNOWN piece/);
    reject(concatBytes([unknownPiece, piece("a", -1, 9)]), /unknown type 9/);
    reject(concatBytes([unknownPiece, lengthDelimited(5, lengthDelimited(2, new Uint8Array(8)))]), /denormalizer rules/);
    reject(modelBytes.subarray(0, 1000), /truncated/);
    reject(concatBytes([unknownPiece, Uint8Array.of(0x0b)]), /unsupported wire type 3/);
  });

  test("a minimal model encodes with the proto2 defaults (dummy prefix, whitespace removal)", () => {
    const minimal = SentencePieceTokenizer.fromModelProto(concatBytes([unknownPiece, piece("▁a", -1, 1), piece("▁", -2, 1), piece("a", -3, 1)]));
    expect(minimal.encode("  a   a ")).toEqual([1, 1]);
    expect(minimal.encode("aa")).toEqual([1, 3]);
    expect(minimal.decode([1, 1])).toBe("a a");
  });
});

// ---- protobuf wire format, written out independently of the parser under test ----

function readVarint(bytes: Uint8Array, offset: number): [value: number, next: number] {
  let value = 0;
  for (let shift = 0; ; shift += 7) {
    const byte = bytes[offset++]!;
    value += (byte & 0x7f) * 2 ** shift;
    if ((byte & 0x80) === 0) return [value, offset];
  }
}

/** `ModelProto.pieces` (field 1): each piece's text (field 1) and float score (field 2), in id order. */
function readPiecesAndScores(model: Uint8Array): Array<{ piece: string; score: number }> {
  const pieces: Array<{ piece: string; score: number }> = [];
  for (const [fieldNumber, payload] of lengthDelimitedFields(model)) {
    if (fieldNumber !== 1) continue;
    let piece = "";
    let score = 0;
    for (let offset = 0; offset < payload.length; ) {
      const [key, afterKey] = readVarint(payload, offset);
      if (key === (1 << 3) + 2) {
        const [length, start] = readVarint(payload, afterKey);
        piece = new TextDecoder().decode(payload.subarray(start, start + length));
        offset = start + length;
      } else if (key === (2 << 3) + 5) {
        score = new DataView(payload.buffer, payload.byteOffset + afterKey, 4).getFloat32(0, true);
        offset = afterKey + 4;
      } else {
        offset = readVarint(payload, afterKey)[1]; // the type enum
      }
    }
    pieces.push({ piece, score });
  }
  return pieces;
}

/** Top-level length-delimited fields; the Pocket model's top level has nothing else. */
function lengthDelimitedFields(message: Uint8Array): Array<[number, Uint8Array]> {
  const fields: Array<[number, Uint8Array]> = [];
  for (let offset = 0; offset < message.length; ) {
    const [key, afterKey] = readVarint(message, offset);
    expect(key & 7).toBe(2);
    const [length, start] = readVarint(message, afterKey);
    fields.push([key >>> 3, message.subarray(start, start + length)]);
    offset = start + length;
  }
  return fields;
}

function varint(value: number): number[] {
  const bytes: number[] = [];
  for (; value >= 0x80; value = Math.floor(value / 128)) bytes.push((value & 0x7f) | 0x80);
  bytes.push(value);
  return bytes;
}

function varintField(fieldNumber: number, value: number): Uint8Array {
  return Uint8Array.from([...varint(fieldNumber << 3), ...varint(value)]);
}

function lengthDelimited(fieldNumber: number, payload: Uint8Array): Uint8Array {
  return concatBytes([Uint8Array.from([...varint((fieldNumber << 3) | 2), ...varint(payload.length)]), payload]);
}

/** A `ModelProto.pieces` entry. */
function piece(text: string, score: number, type: number): Uint8Array {
  const scoreField = new Uint8Array(5);
  scoreField[0] = (2 << 3) | 5;
  new DataView(scoreField.buffer).setFloat32(1, score, true);
  return lengthDelimited(1, concatBytes([lengthDelimited(1, new TextEncoder().encode(text)), scoreField, varintField(3, type)]));
}
