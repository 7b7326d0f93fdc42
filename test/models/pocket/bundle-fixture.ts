/** The tiny golden fixture laid out as a servable bundle. */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const POCKET_TINY_FIXTURE = join(import.meta.dir, "..", "..", "..", "..", "shared", "fixtures", "pocket-tiny");

/** The fixture folder, or an error saying where it should be (it comes with ../shared). */
export function requirePocketTinyFixture(): string {
  if (!existsSync(join(POCKET_TINY_FIXTURE, "golden.json"))) {
    throw new Error(`Pocket TTS fixture not found at ${POCKET_TINY_FIXTURE}: these tests need the shared/ folder checked out beside the repository (../shared/fixtures/pocket-tiny).`);
  }
  return POCKET_TINY_FIXTURE;
}

/** The fixture as a served bundle: its files plus a voices/ folder holding its voice state as "alba". */
export function fixtureBundle(): string {
  requirePocketTinyFixture();
  const dir = mkdtempSync(join(tmpdir(), "voxedge-pocket-bundle-"));
  for (const file of readdirSync(POCKET_TINY_FIXTURE)) if (file.endsWith(".onnx") || ["bundle.json", "tokenizer.model", "bos_before_voice.npy"].includes(file)) copyFileSync(join(POCKET_TINY_FIXTURE, file), join(dir, file));
  mkdirSync(join(dir, "voices"));
  copyFileSync(join(POCKET_TINY_FIXTURE, "voice_state.safetensors"), join(dir, "voices", "alba.safetensors"));
  return dir;
}
