/**
 * Offline speech recognition for intelligibility tests: pocketsphinx (CMU Sphinx, en-us default model)
 * via its `pocketsphinx_continuous` CLI, with ffmpeg resampling the PCM to the 16 kHz mono 16-bit WAV
 * it expects. Uses node:child_process so it runs under Bun and Deno alike.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const INSTALL_HINT = "apt-get install pocketsphinx pocketsphinx-en-us ffmpeg";

function hasCommand(cmd: string, args: string[]): boolean {
  try {
    const r = spawnSync(cmd, args, { stdio: "ignore", timeout: 10_000 });
    return !r.error;
  } catch {
    return false;
  }
}

let toolsChecked = false;

/** Throws with install instructions unless pocketsphinx_continuous and ffmpeg are on PATH. */
export function assertAsrAvailable(): void {
  if (toolsChecked) return;
  // pocketsphinx_continuous exits non-zero without -infile/-inmic, but it runs: only a spawn error means missing.
  if (!hasCommand("pocketsphinx_continuous", ["-help", "no"])) {
    throw new Error(`pocketsphinx_continuous not found; install it with: ${INSTALL_HINT}`);
  }
  if (!hasCommand("ffmpeg", ["-version"])) {
    throw new Error(`ffmpeg not found; install it with: ${INSTALL_HINT}`);
  }
  toolsChecked = true;
}

/** Whether the recognizer can run here (for skipping tests instead of failing them). */
export function asrAvailable(): boolean {
  try {
    assertAsrAvailable();
    return true;
  } catch {
    return false;
  }
}

function run(cmd: string, args: string[], stdin?: Uint8Array): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: [stdin ? "pipe" : "ignore", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout!.on("data", (d: Buffer) => out.push(d));
    child.stderr!.on("data", (d: Buffer) => err.push(d));
    child.on("error", (e) => reject(e));
    child.on("close", (code) => {
      const stdout = Buffer.concat(out).toString("utf8");
      const stderr = Buffer.concat(err).toString("utf8");
      if (code === 0) resolve({ stdout, stderr });
      else reject(new Error(`${cmd} exited with ${code}: ${stderr.slice(-2000)}`));
    });
    if (stdin) {
      child.stdin!.on("error", () => {}); // surfaced through the exit code instead
      child.stdin!.end(Buffer.from(stdin.buffer, stdin.byteOffset, stdin.byteLength));
    }
  });
}

/**
 * Transcribes mono float PCM (any rate) to lower-case English text with pocketsphinx.
 * Multiple utterances (pocketsphinx splits on silences) are joined with spaces.
 */
export async function transcribe(pcm: Float32Array, sampleRateHz: number): Promise<string> {
  assertAsrAvailable();
  const dir = await mkdtemp(join(tmpdir(), "voxedge-asr-"));
  try {
    const wav = join(dir, "in16k.wav");
    // Pad with 0.3 s of silence either side so the recognizer's VAD sees clean edges.
    const pad = Math.round(sampleRateHz * 0.3);
    const padded = new Float32Array(pcm.length + 2 * pad);
    padded.set(pcm, pad);
    const bytes = new Uint8Array(padded.buffer);
    await run(
      "ffmpeg",
      ["-hide_banner", "-loglevel", "error", "-y", "-f", "f32le", "-ar", String(sampleRateHz), "-ac", "1", "-i", "pipe:0",
        "-ar", "16000", "-ac", "1", "-c:a", "pcm_s16le", wav],
      bytes,
    );
    const { stdout } = await run("pocketsphinx_continuous", ["-infile", wav, "-logfn", "/dev/null"]);
    return stdout
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l.length > 0)
      .join(" ")
      .replace(/\s+/g, " ")
      .trim();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
