/**
 * Headless Chromium through playwright-core (a development dependency): how `conformance --browser`, the
 * browser benchmark and the tests (the playground's too) run pages in a real browser. The browser is the system's
 * (Debian's `chromium` package) or the one `VOXEDGE_CHROMIUM` names; nothing is downloaded.
 */
import { existsSync } from "node:fs";
import type { Browser } from "playwright-core";

export const DEFAULT_CHROMIUM = "/usr/bin/chromium";

/** Flags for a machine without a display or a sandbox-capable user, and with no traffic beyond loopback. */
const CHROMIUM_ARGS = ["--no-sandbox", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];
/** A fake microphone (a beep) that needs no permission prompt, for recording in a page. */
const FAKE_MICROPHONE_ARGS = ["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"];

export interface ChromiumOptions {
  executablePath?: string;
  /** Offer WebGPU (`--enable-unsafe-webgpu`): on a machine without a GPU, Chromium's software adapter. */
  webgpu?: boolean;
  /** Give the page a fake microphone (a beep) that needs no permission prompt. */
  fakeMicrophone?: boolean;
  /** More command-line switches. */
  extraArgs?: readonly string[];
}

export async function launchChromium(options: ChromiumOptions = {}): Promise<Browser> {
  const executablePath = options.executablePath ?? process.env.VOXEDGE_CHROMIUM ?? DEFAULT_CHROMIUM;
  if (!existsSync(executablePath)) throw new Error(`no Chromium at ${executablePath}: install it (apt-get install chromium) or set VOXEDGE_CHROMIUM`);
  let playwright;
  try {
    playwright = await import("playwright-core");
  } catch (error) {
    throw new Error(`running the engine in a browser needs playwright-core, a development dependency: npm ci (${(error as Error).message})`);
  }
  const args = options.webgpu ? [...CHROMIUM_ARGS, "--enable-unsafe-webgpu", "--enable-features=Vulkan", "--use-angle=swiftshader"] : [...CHROMIUM_ARGS, "--disable-gpu"];
  return playwright.chromium.launch({ executablePath, args: [...args, ...(options.fakeMicrophone ? FAKE_MICROPHONE_ARGS : []), ...(options.extraArgs ?? [])], headless: true });
}
