import { expect, test } from "bun:test";
import { createSocket } from "node:dgram";
import { createLogger } from "../../src/log/logger.ts";
import { announceWyoming } from "../../src/wyoming/zeroconf.ts";

/** A DNS query (RFC 1035 §4.1) for the PTR records of `name`. */
function ptrQuery(name: string): Buffer {
  const labels = name.split(".").flatMap((label) => [Buffer.of(label.length), Buffer.from(label)]);
  return Buffer.concat([Buffer.from([0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]), ...labels, Buffer.of(0), Buffer.from([0, 12, 0, 1])]);
}

/**
 * Asks the mDNS group who offers `_wyoming._tcp` from an ordinary port: a responder answers such a "legacy
 * unicast" query straight back to it (RFC 6762 §6.7), so the test needs no membership of the group.
 */
async function browseWyoming(withinMs: number): Promise<Buffer[]> {
  const socket = createSocket({ type: "udp4", reuseAddr: true });
  const replies: Buffer[] = [];
  socket.on("message", (message) => replies.push(message));
  await new Promise<void>((resolve) => socket.bind(0, resolve));
  socket.send(ptrQuery("_wyoming._tcp.local"), 5353, "224.0.0.251");
  await Bun.sleep(withinMs);
  socket.close();
  return replies;
}

/** The DNS name labels in a message, as text (enough to see which instances answered). */
const readable = (message: Buffer) => message.toString("latin1").replace(/[^\x20-\x7e]/g, ".");

test("the listener is announced as a _wyoming._tcp service with its port, and withdrawn on stop", async () => {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger("info", (line) => lines.push(JSON.parse(line)));
  const port = 10234;
  const announcement = await announceWyoming(port, "0.0.0.0", logger);
  try {
    expect(lines.find((fields) => fields.message === "wyoming announced over zeroconf")).toMatchObject({ service: "_wyoming._tcp", port });
    const replies = await browseWyoming(1000);
    const answer = replies.find((reply) => readable(reply).includes("voxedge"));
    if (!answer) throw new Error(`no mDNS answer names voxedge; answers: ${replies.map(readable).join(" | ") || "none"} (multicast on this host's interfaces is needed)`);
    expect(readable(answer)).toContain("_wyoming");
    // The SRV record's port, big-endian, somewhere in the answer.
    expect(answer.includes(Buffer.from([port >> 8, port & 0xff]))).toBe(true);
  } finally {
    await announcement.stop();
  }
});

test("an announcement that cannot be made is a warning, never a failure of the server", async () => {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger("info", (line) => lines.push(JSON.parse(line)));
  // An address no interface of this host has: nothing can be announced on it.
  const announcement = await announceWyoming(10235, "198.51.100.77", logger);
  await announcement.stop();
  expect(lines.find((fields) => fields.message?.toString().includes("zeroconf announcement failed"))).toMatchObject({ level: "warn" });
});
