/**
 * The playground page in a real browser (Debian's Chromium driven by playwright-core): the file, SSE and
 * WebSocket paths each fetch, decode and schedule audio, as a user's browser would.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";
import { createClassicModel } from "../../src/models/classic/model.ts";
import { startTestServer, type TestServer } from "../support/server.ts";

const CHROMIUM = "/usr/bin/chromium";

let server: TestServer;
let browser: Browser;
beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error("the browser test needs Debian's Chromium: apt-get install chromium");
  server = await startTestServer(await createClassicModel());
  // Flags as this machine needs them: no sandbox as root, no background traffic to a closed network.
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--autoplay-policy=no-user-gesture-required"],
  });
});
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

test("the playground plays a file, an SSE stream and a live WebSocket stream", async () => {
  const page = await browser.newPage();
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  await page.goto(`${server.url}/`);
  await page.waitForFunction(() => document.querySelectorAll("#voice option").length > 1);
  expect(await page.textContent("#model")).toContain("offline classic fallback");

  const outcomes: Record<string, string> = {};
  for (const button of ["#live", "#stream", "#speak"]) {
    await page.click(button);
    await page.waitForFunction(() => /done|ready/.test(document.getElementById("status")!.textContent ?? ""), null, { timeout: 30_000 });
    outcomes[button] = (await page.textContent("#status")) ?? "";
  }
  expect(outcomes["#live"]).toBe("done: 3 sentences");
  expect(outcomes["#stream"]).toMatch(/^done; \d+ frames$/);
  expect(outcomes["#speak"]).toMatch(/^file ready in \d+ ms; \d+ frames$/);
  expect(pageErrors).toEqual([]);
  await page.close();
}, 90_000);
