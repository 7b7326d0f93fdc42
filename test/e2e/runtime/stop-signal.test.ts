/** The stop-signal rule: the first SIGTERM/SIGINT drains; the same signal delivered again at once is ignored; one sent later ends the grace. */
import { expect, test } from "bun:test";
import { EventEmitter } from "node:events";
import { silentLogger } from "../../../src/log/logger.ts";
import { onStopSignal, REPEATED_SIGNAL_MS } from "../../../src/server.ts";

function signalled() {
  const process = new EventEmitter();
  let shutDowns = 0;
  let hurried = false;
  const finished = onStopSignal(process, silentLogger, async (hurry) => {
    shutDowns++;
    await hurry;
    hurried = true;
  });
  return { process, finished, shutDowns: () => shutDowns, hurried: () => hurried };
}

test("a signal repeated at once (group delivery plus a forwarding parent) neither restarts the drain nor hurries it", async () => {
  const run = signalled();
  run.process.emit("SIGTERM");
  run.process.emit("SIGTERM");
  run.process.emit("SIGINT");
  await Bun.sleep(20);
  expect(run.shutDowns()).toBe(1);
  expect(run.hurried()).toBe(false);
});

test("a second signal later than REPEATED_SIGNAL_MS ends the grace", async () => {
  const run = signalled();
  run.process.emit("SIGINT");
  await Bun.sleep(REPEATED_SIGNAL_MS + 50);
  expect(run.hurried()).toBe(false);
  run.process.emit("SIGINT");
  await run.finished;
  expect(run.hurried()).toBe(true);
  expect(run.shutDowns()).toBe(1);
});
