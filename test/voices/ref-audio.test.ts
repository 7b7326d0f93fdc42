/**
 * ref_audio on speech requests, end to end through the route. Traffic goes only to loopback; refused
 * addresses are checked with an injected resolver and connector that must never be called for them.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { execFileSync, spawn } from "node:child_process";
import { closeSync, constants, mkdtempSync, mkdirSync, openSync, symlinkSync, truncateSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { ToneModel, type TonePromptState } from "../support/tone-model.ts";
import { testApp } from "../support/server.ts";
import { encodeWav } from "../../src/audio/wav.ts";
import { sine, wavFile } from "../support/uploads.ts";
import type { Connector } from "../../src/voices/remote-media.ts";
import { RefAudioResolver } from "../../src/voices/ref-audio.ts";
import { decodedSecondsInRefusal, referenceBombs } from "../support/audio-bombs.ts";

const wavBytes = (seconds = 2, frequencyHz = 300) => encodeWav(sine(seconds, frequencyHz), 16000);
const dataUrl = (bytes: Uint8Array) => `data:audio/wav;base64,${Buffer.from(bytes).toString("base64")}`;

function speakWith(app: Awaited<ReturnType<typeof testApp>>["app"], refAudio: string, extra: Record<string, unknown> = {}) {
  return app.request("/v1/audio/speech", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "clone me", response_format: "pcm", ref_audio: refAudio, ...extra }) });
}

function recordingConnector() {
  const calls: string[] = [];
  const connect: Connector = async (url, address) => {
    calls.push(`${url.href} via ${address}`);
    return new Response(null, { status: 302, headers: { location: `http://127.0.0.1:9/loop` } });
  };
  return { connect, calls };
}

describe("data: URLs", () => {
  test("decoded, resampled to the model rate, and used as the voice", async () => {
    const adapter = new ToneModel({ cloning: true });
    const { app } = await testApp(adapter);
    const response = await speakWith(app, dataUrl(wavBytes(2, 400)), { ref_text: "what it says" });
    expect(response.status).toBe(200);
    const reference = adapter.encodedReferences[0]!;
    expect(reference.sampleRateHz).toBe(24000);
    expect(reference.samples.length).toBe(48000);
    expect(reference.transcript).toBe("what it says");
    expect(Math.abs((adapter.jobs[0]!.voicePrompt!.state as TonePromptState).frequencyHz - 400)).toBeLessThan(10);
    expect(response.headers.get("x-input-audio-tokens")).toBe("25");
  });

  test("bad references are 400s naming ref_audio", async () => {
    const { app } = await testApp(new ToneModel({ cloning: true }));
    const cases: [string, string][] = [
      [dataUrl(wavBytes(0.5)), "1–30 s"],
      [dataUrl(wavBytes(31)), "1–30 s"],
      ["data:audio/wav;base64,AAAAAAAA", "could not be decoded"],
      ["data:audio/wav,plain", "base64"],
      ["data:text/html;base64,AAAA", "media type"],
      ["ftp://example.com/a.wav", "data: URL"],
      ["just words", "data: URL"],
    ];
    for (const [reference, message] of cases) {
      const response = await speakWith(app, reference);
      expect(response.status).toBe(400);
      const body = (await response.json()) as any;
      expect(body.error.param).toBe("ref_audio");
      expect(body.error.message).toContain(message);
    }
  });

  test("a model without cloning says so", async () => {
    const { app } = await testApp(new ToneModel());
    const body = (await (await speakWith(app, dataUrl(wavBytes()))).json()) as any;
    expect(body.error.message).toContain("cannot clone");
  });
});

describe("http(s) URLs: address guard", () => {
  const refused = ["http://127.0.0.1/a.wav", "http://localhost/a.wav", "http://[::1]/a.wav", "http://10.0.0.1/a.wav", "http://169.254.169.254/latest/meta-data", "http://loopback-alias.test/a.wav"];
  for (const url of refused) {
    test(`refused without connecting: ${url}`, async () => {
      const { connect, calls } = recordingConnector();
      const resolved: string[] = [];
      const resolve = async (host: string) => {
        resolved.push(host);
        return host === "localhost" || host === "loopback-alias.test" ? ["127.0.0.1"] : ["93.184.215.14"];
      };
      const { app } = await testApp(new ToneModel({ cloning: true }), { refAudio: { remote: { resolve, connect } } });
      const response = await speakWith(app, url);
      expect(response.status).toBe(400);
      expect(((await response.json()) as any).error.param).toBe("ref_audio");
      expect(calls).toEqual([]);
    });
  }

  test("an allowed host that redirects to loopback is refused at the redirect: loopback is not on the list", async () => {
    const calls: string[] = [];
    const connect: Connector = async (url, address) => {
      calls.push(`${url.host} via ${address}`);
      return new Response(null, { status: 302, headers: { location: "http://127.0.0.1:1/secret.wav" } });
    };
    const resolve = async () => ["93.184.215.14"];
    const { app } = await testApp(new ToneModel({ cloning: true }), { flags: { "allowed-media-domains": "media.example" }, refAudio: { remote: { resolve, connect } } });
    const response = await speakWith(app, "http://media.example/voice.wav");
    expect(response.status).toBe(400);
    expect(((await response.json()) as any).error.message).toContain("127.0.0.1 is not one of this server's allowed media domains");
    expect(calls).toEqual(["media.example via 93.184.215.14"]);
  });

  describe("a local test server on loopback", () => {
    let server: ReturnType<typeof Bun.serve>;
    let hits = 0;
    beforeAll(() => {
      server = Bun.serve({
        hostname: "127.0.0.1",
        port: 0,
        fetch: () => {
          hits++;
          return new Response(wavBytes(2, 350) as Uint8Array<ArrayBuffer>, { headers: { "content-type": "audio/wav" } });
        },
      });
    });
    afterAll(() => server.stop(true));

    test("refused unless config allows it; accepted, then served from cache, when allowed", async () => {
      const url = `http://127.0.0.1:${server.port}/voice.wav`;
      const { app: strict } = await testApp(new ToneModel({ cloning: true }));
      expect((await speakWith(strict, url)).status).toBe(400);
      expect(hits).toBe(0);

      const adapter = new ToneModel({ cloning: true });
      const { app, refAudio } = await testApp(adapter, { flags: { "allowed-media-domains": "127.0.0.1" } });
      expect((await speakWith(app, url)).status).toBe(200);
      expect((await speakWith(app, url)).status).toBe(200);
      expect(hits).toBe(1);
      expect(refAudio.cachedEntries).toBe(1);
      expect(Math.abs((adapter.jobs[0]!.voicePrompt!.state as TonePromptState).frequencyHz - 350)).toBeLessThan(10);
    });

    test("--allowed-media-domains set: a listed name resolving to loopback is fetched; any other host, public or not, is refused by the rule without a lookup", async () => {
      const resolved: string[] = [];
      const resolve = async (host: string) => (resolved.push(host), host === "media.internal" ? ["127.0.0.1"] : ["93.184.215.14"]);
      const adapter = new ToneModel({ cloning: true });
      const { app } = await testApp(adapter, { flags: { "allowed-media-domains": "media.internal" }, refAudio: { remote: { resolve } } });
      hits = 0;
      const listed = await speakWith(app, `http://media.internal:${server.port}/voice.wav`, { stream_format: "audio" });
      expect(listed.status).toBe(200);
      expect((await listed.arrayBuffer()).byteLength).toBeGreaterThan(0);
      expect({ hits, resolved }).toEqual({ hits: 1, resolved: ["media.internal"] });

      for (const url of ["http://public.example/voice.wav", `http://127.0.0.1:${server.port}/voice.wav`]) {
        const refused = await speakWith(app, url, { stream_format: "audio" });
        expect(refused.status).toBe(400);
        const error = ((await refused.json()) as any).error;
        expect(error.param).toBe("ref_audio");
        expect(error.message).toContain("is not one of this server's allowed media domains (--allowed-media-domains)");
      }
      expect({ hits, resolved }).toEqual({ hits: 1, resolved: ["media.internal"] });
    });
  });
});

describe("file:// URLs", () => {
  const root = mkdtempSync(join(tmpdir(), "voxedge-media-"));
  const allowed = join(root, "allowed");
  const outside = join(root, "outside");
  mkdirSync(allowed);
  mkdirSync(outside);
  writeFileSync(join(allowed, "voice.wav"), wavBytes(2, 300));
  writeFileSync(join(outside, "secret.wav"), wavBytes(2, 300));
  symlinkSync(join(outside, "secret.wav"), join(allowed, "escape.wav"));

  test("refused when no folder is configured", async () => {
    const { app } = await testApp(new ToneModel({ cloning: true }));
    const body = (await (await speakWith(app, pathToFileURL(join(allowed, "voice.wav")).href)).json()) as any;
    expect(body.error.message).toContain("no allowed local media folder");
  });

  test("only below the configured folder, on the real path", async () => {
    const adapter = new ToneModel({ cloning: true });
    const { app } = await testApp(adapter, { flags: { "allowed-local-media-path": allowed } });
    expect((await speakWith(app, pathToFileURL(join(allowed, "voice.wav")).href)).status).toBe(200);
    for (const [path, message] of [
      [join(outside, "secret.wav"), "outside"],
      [join(allowed, "..", "outside", "secret.wav"), "outside"],
      [join(allowed, "escape.wav"), "outside"],
      [join(allowed, "missing.wav"), "does not exist"],
    ] as const) {
      const response = await speakWith(app, pathToFileURL(path).href);
      expect(response.status).toBe(400);
      expect(((await response.json()) as any).error.message).toContain(message);
    }
    expect((await speakWith(app, "file://elsewhere.example/etc/passwd")).status).toBe(400);
  });

  test("an edited file is read again (path + mtime + size key)", async () => {
    const path = join(allowed, "edited.wav");
    writeFileSync(path, wavBytes(2, 300));
    const adapter = new ToneModel({ cloning: true });
    const { app, refAudio } = await testApp(adapter, { flags: { "allowed-local-media-path": allowed } });
    await speakWith(app, pathToFileURL(path).href);
    await speakWith(app, pathToFileURL(path).href);
    expect(refAudio.cachedEntries).toBe(1);
    writeFileSync(path, wavBytes(2, 600));
    utimesSync(path, new Date(), new Date(Date.now() + 5000));
    await speakWith(app, pathToFileURL(path).href);
    expect(refAudio.cachedEntries).toBe(2);
    expect(Math.abs((adapter.jobs.at(-1)!.voicePrompt!.state as TonePromptState).frequencyHz - 600)).toBeLessThan(10);
  });
});

describe("file:// URLs: the opened file is what gets checked", () => {
  const root = mkdtempSync(join(tmpdir(), "voxedge-media-open-"));
  const allowed = join(root, "allowed");
  const outside = join(root, "outside");
  mkdirSync(allowed);
  mkdirSync(outside);
  mkdirSync(join(allowed, "sub"));
  // Inside: 2 s; outside: 3 s. At 24 kHz the sample count says which file a request got.
  const insideSamples = 48_000;
  const outsideSamples = 72_000;
  writeFileSync(join(allowed, "inside.wav"), wavBytes(2, 300));
  writeFileSync(join(allowed, "sub", "voice.wav"), wavBytes(2, 300));
  writeFileSync(join(outside, "voice.wav"), wavBytes(3, 700));
  symlinkSync(join(allowed, "inside.wav"), join(allowed, "swap.wav"));
  const fifos = Array.from({ length: 8 }, (_, index) => join(allowed, `pipe-${index}.wav`));
  for (const fifo of fifos) execFileSync("mkfifo", [fifo]);
  // A reader stuck opening a FIFO is let go by opening the other end (O_RDWR never waits on Linux).
  afterAll(() => fifos.forEach((fifo) => closeSync(openSync(fifo, constants.O_RDWR))));

  /** Runs `loop` (JavaScript, `fs`, `a` = allowed, `o` = outside) in another process while `work` runs. */
  async function whileSwapping<T>(loop: string, work: () => Promise<T>): Promise<T> {
    const swapper = spawn(process.execPath, ["-e", `const fs = require("fs"); const a = ${JSON.stringify(allowed)}, o = ${JSON.stringify(outside)}; for (;;) { try { ${loop} } catch {} }`], { stdio: "ignore" });
    await new Promise((resolve) => setTimeout(resolve, 200));
    try {
      return await work();
    } finally {
      swapper.kill("SIGKILL");
      await new Promise((resolve) => swapper.once("exit", resolve));
    }
  }

  async function countWhatWasRead(url: string, requestCount: number) {
    const counts = { inside: 0, outside: 0, refused: 0 };
    const signal = new AbortController().signal;
    for (let sent = 0; sent < requestCount; sent += 20) {
      // A fresh resolver per batch: every request opens and reads the file instead of hitting the cache.
      const resolver = new RefAudioResolver({ allowedDomains: [], allowedLocalMediaPath: allowed });
      await Promise.all(
        Array.from({ length: 20 }, async () => {
          try {
            const samples = await resolver.resolve(url, 24000, signal);
            if (samples.length === outsideSamples) counts.outside++;
            else if (samples.length === insideSamples) counts.inside++;
            else throw new Error(`unexpected reference of ${samples.length} samples`);
          } catch (error) {
            if ((error as { status?: number }).status !== 400) throw error;
            counts.refused++;
          }
        }),
      );
    }
    return counts;
  }

  test("a file swapped between an inside file and a symlink to an outside file is never read outside", async () => {
    const counts = await whileSwapping(
      // Each state is held a little, so that on a loaded machine some requests still see the inside file whole.
      `const hold = () => { const start = performance.now(); while (performance.now() - start < 0.1); }; fs.linkSync(a + "/inside.wav", a + "/.next"); fs.renameSync(a + "/.next", a + "/swap.wav"); hold(); fs.symlinkSync(o + "/voice.wav", a + "/.next"); fs.renameSync(a + "/.next", a + "/swap.wav"); hold();`,
      () => countWhatWasRead(pathToFileURL(join(allowed, "swap.wav")).href, 1000),
    );
    expect(counts.outside).toBe(0);
    // How many reads land inside depends on the machine's load; that the inside file is still served is
    // checked without the race, so a check that refused everything would fail here.
    expect(counts.inside + counts.refused).toBe(1000);
    const resolver = new RefAudioResolver({ allowedDomains: [], allowedLocalMediaPath: allowed });
    expect((await resolver.resolve(pathToFileURL(join(allowed, "inside.wav")).href, 24000, new AbortController().signal)).length).toBe(insideSamples);
  }, 120_000);

  test("a folder swapped for a symlink to an outside folder is never read outside", async () => {
    // Each state is held a little, so the path exists most of the time while requests resolve it.
    const counts = await whileSwapping(
      `const hold = () => { const start = performance.now(); while (performance.now() - start < 0.2); }; fs.renameSync(a + "/sub", a + "/.parked"); fs.symlinkSync(o, a + "/sub"); hold(); fs.unlinkSync(a + "/sub"); fs.renameSync(a + "/.parked", a + "/sub"); hold();`,
      () => countWhatWasRead(pathToFileURL(join(allowed, "sub", "voice.wav")).href, 1000),
    );
    expect(counts.outside).toBe(0);
    // How many reads land inside depends on the machine's load; that the inside file is still served is
    // checked without the race, so a check that refused everything would fail here.
    expect(counts.inside + counts.refused).toBe(1000);
    const resolver = new RefAudioResolver({ allowedDomains: [], allowedLocalMediaPath: allowed });
    expect((await resolver.resolve(pathToFileURL(join(allowed, "inside.wav")).href, 24000, new AbortController().signal)).length).toBe(insideSamples);
  }, 120_000);

  test("FIFOs are refused without waiting for a writer, and file work goes on afterwards", async () => {
    const { app } = await testApp(new ToneModel({ cloning: true }), { flags: { "allowed-local-media-path": allowed } });
    const responses = await Promise.all(fifos.map((fifo) => speakWith(app, pathToFileURL(fifo).href)));
    for (const response of responses) {
      expect(response.status).toBe(400);
      expect(((await response.json()) as any).error.message).toContain("regular file");
    }
    const form = new FormData();
    form.set("name", "after-fifos");
    form.set("consent", "consent-1");
    form.set("audio_sample", wavFile());
    expect((await app.request("/v1/audio/voices", { method: "POST", body: form })).status).toBe(200);
    expect((await speakWith(app, pathToFileURL(join(allowed, "inside.wav")).href)).status).toBe(200);
  });

  test("folders, devices and files over the byte cap are refused with a 400 that names no path", async () => {
    mkdirSync(join(allowed, "folder.wav"));
    symlinkSync("/dev/zero", join(allowed, "zero.wav"));
    // Sparse: 1 GiB long, no blocks written. Refused from its size, before any of it is read.
    const huge = join(allowed, "huge.wav");
    writeFileSync(huge, wavBytes(2, 300));
    truncateSync(huge, 1024 ** 3);
    const { app } = await testApp(new ToneModel({ cloning: true }), { flags: { "allowed-local-media-path": allowed } });
    for (const [name, message] of [
      ["folder.wav", "regular file"],
      ["zero.wav", "outside"],
      ["huge.wav", "larger than 32 MiB"],
    ] as const) {
      const response = await speakWith(app, pathToFileURL(join(allowed, name)).href);
      expect(response.status).toBe(400);
      const body = (await response.json()) as any;
      expect(body.error.param).toBe("ref_audio");
      expect(body.error.message).toContain(message);
      expect(body.error.message).not.toContain(root);
    }
  });
});

test("the resolved-audio cache is bounded by entries and by bytes", async () => {
  const byEntries = new RefAudioResolver({ allowedDomains: [], cacheMaxEntries: 2 });
  const signal = new AbortController().signal;
  for (const frequencyHz of [300, 310, 320]) await byEntries.resolve(dataUrl(wavBytes(1.5, frequencyHz)), 24000, signal);
  expect(byEntries.cachedEntries).toBe(2);

  // 2 s at 24 kHz float32 = 192 000 bytes: a 400 000-byte cap holds two.
  const byBytes = new RefAudioResolver({ allowedDomains: [], cacheMaxBytes: 400_000 });
  for (const frequencyHz of [300, 310, 320, 330]) await byBytes.resolve(dataUrl(wavBytes(2, frequencyHz)), 24000, signal);
  expect(byBytes.cachedEntries).toBe(2);
  expect(byBytes.cachedBytes).toBeLessThanOrEqual(400_000);
});

describe("decompression bombs as ref_audio", () => {
  const bombs = referenceBombs();
  for (const bomb of bombs) {
    test(`a data: URL → 400 naming the 30 s limit, decoded no further than ~30 s, never encoded or cached: ${bomb.label}`, async () => {
      const adapter = new ToneModel({ cloning: true });
      const { app, refAudio } = await testApp(adapter);
      const response = await speakWith(app, `data:application/octet-stream;base64,${Buffer.from(bomb.bytes).toString("base64")}`);
      expect(response.status).toBe(400);
      const body = (await response.json()) as any;
      expect(body.error.param).toBe("ref_audio");
      expect(body.error.message).toContain("ref_audio is longer than the 30 s limit");
      const decodedSeconds = decodedSecondsInRefusal(body.error.message);
      if (bomb.stopsWhileDecoding) expect(decodedSeconds).toBeLessThan(90);
      else expect(decodedSeconds).toBeUndefined();
      expect(adapter.encodedReferences).toHaveLength(0);
      expect(refAudio.cachedEntries).toBe(0);
    });
  }

  test("a local file (file://) is refused the same way", async () => {
    const folder = mkdtempSync(join(tmpdir(), "voxedge-bomb-"));
    const bomb = bombs.find((candidate) => candidate.stopsWhileDecoding)!;
    writeFileSync(join(folder, "bomb.flac"), bomb.bytes);
    const { app } = await testApp(new ToneModel({ cloning: true }), { flags: { "allowed-local-media-path": folder } });
    const response = await speakWith(app, pathToFileURL(join(folder, "bomb.flac")).href);
    expect(response.status).toBe(400);
    expect(((await response.json()) as any).error.message).toContain("longer than the 30 s limit");
  });
});
