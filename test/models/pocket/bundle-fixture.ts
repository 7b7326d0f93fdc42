/** The tiny golden fixture laid out as a servable bundle. */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const POCKET_TINY_FIXTURE = join(import.meta.dir, "..", "..", "..", "..", "shared", "fixtures", "pocket-tiny");

/** The fixture as a served bundle: its files plus a voices/ folder holding its voice state as "alba". */
export function fixtureBundle(): string {
  if (!existsSync(POCKET_TINY_FIXTURE)) throw new Error(`the Pocket TTS fixture is missing at ${POCKET_TINY_FIXTURE} (it comes with ../shared)`);
  const dir = mkdtempSync(join(tmpdir(), "voxedge-pocket-bundle-"));
  for (const file of readdirSync(POCKET_TINY_FIXTURE)) if (file.endsWith(".onnx") || ["bundle.json", "tokenizer.model", "bos_before_voice.npy"].includes(file)) copyFileSync(join(POCKET_TINY_FIXTURE, file), join(dir, file));
  mkdirSync(join(dir, "voices"));
  copyFileSync(join(POCKET_TINY_FIXTURE, "voice_state.safetensors"), join(dir, "voices", "alba.safetensors"));
  return dir;
}
