/** The API docs page in a real browser: Swagger UI renders this server's OpenAPI document from assets it serves itself. */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";
import { startTestServer, type TestServer } from "../../support/server.ts";
import { ToneModel } from "../../support/tone-model.ts";

const CHROMIUM = "/usr/bin/chromium";

let server: TestServer;
let browser: Browser;
beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error("the browser tests need Debian's Chromium: apt-get install chromium");
  server = await startTestServer(new ToneModel());
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"] });
});
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

test("/docs renders every route of the document, with no request leaving this server", async () => {
  const page = await browser.newPage();
  const elsewhere: string[] = [];
  page.on("request", (request) => {
    if (!request.url().startsWith(server.url)) elsewhere.push(request.url());
  });
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  await page.goto(`${server.url}/docs`);
  await page.locator(".opblock-summary-path", { hasText: "/v1/audio/speech" }).first().waitFor({ timeout: 30_000 });
  const document = (await (await fetch(`${server.url}/openapi.json`)).json()) as { paths: Record<string, unknown> };
  const shown = await page.locator(".opblock-summary-path").allTextContents();
  for (const path of Object.keys(document.paths)) expect(shown.map((text) => text.replace(/\u200b/g, ""))).toContain(path);
  expect(elsewhere).toEqual([]);
  expect(pageErrors).toEqual([]);
  await page.close();
}, 60_000);
