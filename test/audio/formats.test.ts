/**
 * The format table: every response format the API accepts has exactly one codec, named as the format, and the
 * content types, fixed rates and stream threads the server asks for come from the codecs.
 */
import { describe, expect, test } from "bun:test";
import { RESPONSE_FORMATS as REQUEST_FORMATS } from "../../src/api/speech.ts";
import { CONTENT_TYPES, codecOf, RESPONSE_FORMATS, type ResponseFormat } from "../../src/audio/formats.ts";

describe("the format table", () => {
  // api/ may not import audio/, so the request schema keeps its own list; this is what holds the two together.
  test("covers exactly the formats a request may name, in the same order", () => {
    expect([...RESPONSE_FORMATS]).toEqual([...REQUEST_FORMATS]);
  });

  test.each([...RESPONSE_FORMATS])("%s has a codec of that name", (format) => {
    expect(codecOf(format).name).toBe(format);
  });

  // A new format is its codec module and one entry in the table: the list, the content types and codecOf follow.
  test("the list and the content types are the table's entries", () => {
    expect(Object.keys(CONTENT_TYPES)).toEqual([...RESPONSE_FORMATS]);
    expect(RESPONSE_FORMATS.map((format) => CONTENT_TYPES[format])).toEqual(RESPONSE_FORMATS.map((format) => codecOf(format).contentType));
  });

  test("content types", () => {
    expect(CONTENT_TYPES).toEqual({ wav: "audio/wav", pcm: "audio/pcm", mp3: "audio/mpeg", flac: "audio/flac", opus: "audio/ogg", aac: "audio/aac", ulaw: "audio/basic", alaw: "audio/x-alaw-basic" });
  });

  test("only G.711 is held to one rate, 8 kHz", () => {
    const fixedRates = Object.fromEntries(RESPONSE_FORMATS.flatMap((format) => (codecOf(format).fixedRateHz === undefined ? [] : [[format, codecOf(format).fixedRateHz]])));
    expect(fixedRates).toEqual({ ulaw: 8000, alaw: 8000 });
  });

  test("the sample formats stream on the calling thread, the codecs on the encoder worker", () => {
    const onCallingThread = RESPONSE_FORMATS.filter((format) => codecOf(format).streamEncodesOn === "calling-thread");
    expect(onCallingThread).toEqual(["wav", "pcm", "ulaw", "alaw"]);
  });

  test("a name outside the table is refused, naming the known ones", () => {
    expect(() => codecOf("vorbis" as ResponseFormat)).toThrow("no codec for response format 'vorbis'; known: wav, pcm, mp3, flac, opus, aac, ulaw, alaw");
  });
});
