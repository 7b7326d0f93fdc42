/**
 * Traffic in these tests goes to loopback only. Every refusal is checked with an injected resolver and
 * connector that record their calls, so a refused address is never contacted, not even to see it fail;
 * public-looking addresses appear only as resolver answers in front of an injected connector.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createServer as createTlsServer, createSecureContext, type Server as TlsServer } from "node:tls";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectPinned, fetchRemoteMedia, RemoteMediaError, type Connector, type RemoteMediaOptions } from "../../src/voices/remote-media.ts";

const AUDIO_BYTES = Uint8Array.from({ length: 3000 }, (_, index) => index % 251);
const CHUNK_BYTES = 64 * 1024;

/** A connector that must never run: refusals happen before any connection. */
function forbiddenConnector() {
  const calls: { url: string; address: string }[] = [];
  const connect: Connector = async (url, address) => {
    calls.push({ url: url.href, address });
    throw new Error("connector called for a refused target");
  };
  return { connect, calls };
}

/** A resolver answering from a fixed table, recording what it was asked. */
function tableResolver(table: Record<string, string[]>) {
  const asked: string[] = [];
  const resolve = async (host: string) => {
    asked.push(host);
    const addresses = table[host];
    if (!addresses) throw new Error(`ENOTFOUND ${host}`);
    return addresses;
  };
  return { resolve, asked };
}

async function refusal(promise: Promise<unknown>): Promise<RemoteMediaError> {
  const error = await promise.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(RemoteMediaError);
  return error as RemoteMediaError;
}

describe("refused before any connection", () => {
  const CASES: [url: string, resolverTable: Record<string, string[]>, message: RegExp][] = [
    ["http://127.0.0.1/", {}, /^ref_audio URL points at a loopback address \(127\.0\.0\.0\/8\)$/],
    ["http://localhost/", { localhost: ["127.0.0.1"] }, /^ref_audio host resolves to a loopback address \(127\.0\.0\.0\/8\)$/],
    ["http://[::1]/", {}, /points at a loopback address \(::1\/128\)/],
    ["http://10.0.0.1/", {}, /points at a private address \(10\.0\.0\.0\/8\)/],
    ["http://169.254.169.254/latest/meta-data/", {}, /points at a cloud metadata address/],
    ["http://[fd00:ec2::254]/", {}, /points at a cloud metadata address/],
    ["http://100.100.100.200/", {}, /points at a cloud metadata address/],
    ["http://[::ffff:127.0.0.1]/", {}, /points at a loopback address \(127\.0\.0\.0\/8 inside IPv4-mapped IPv6\)/],
    ["http://[64:ff9b::10.0.0.1]/", {}, /points at a private address \(10\.0\.0\.0\/8 inside NAT64\)/],
    ["http://2130706433/", {}, /points at a loopback address/],
    ["http://0x7f.1/", {}, /points at a loopback address/],
    ["http://017700000001/", {}, /points at a loopback address/],
    ["http://0/", {}, /points at an unspecified address/],
    ["http://media.example.com/voice.wav", { "media.example.com": ["127.0.0.1"] }, /resolves to a loopback address/],
    ["http://cdn.example.com/voice.wav", { "cdn.example.com": ["8.8.8.8", "10.1.2.3"] }, /resolves to a private address \(10\.0\.0\.0\/8\)/],
    ["http://v6.example.com/voice.wav", { "v6.example.com": ["2606:4700::1111", "fe80::1"] }, /resolves to a link-local address/],
    ["http://rebind.example.com/", { "rebind.example.com": ["::ffff:a9fe:a9fe"] }, /resolves to a cloud metadata address/],
    ["http://garbage.example.com/", { "garbage.example.com": ["not-an-address"] }, /resolves to an invalid address/],
    ["http://empty.example.com/", { "empty.example.com": [] }, /^ref_audio host could not be resolved$/],
    ["http://missing.example.com/", {}, /^ref_audio host could not be resolved$/],
    ["file:///etc/passwd", {}, /^ref_audio URL must use http or https$/],
    ["ftp://media.example.com/voice.wav", {}, /^ref_audio URL must use http or https$/],
    ["data:audio/wav;base64,UklGRg==", {}, /^ref_audio URL must use http or https$/],
    ["http://user:secret@media.example.com/", {}, /^ref_audio URL must not contain credentials$/],
    ["not a url", {}, /^ref_audio is not a valid URL$/],
  ];

  test.each(CASES)("%s", async (url, resolverTable, message) => {
    const { connect, calls } = forbiddenConnector();
    const { resolve, asked } = tableResolver(resolverTable);
    const error = await refusal(fetchRemoteMedia(url, { allowedDomains: [], resolve, connect }));
    expect(error.message).toMatch(message);
    expect(error.status).toBe(400);
    expect(error.param).toBe("ref_audio");
    expect(calls).toEqual([]);
    // IP literals are judged as written: no DNS.
    if (Object.keys(resolverTable).length === 0 && !url.includes("example.com")) expect(asked).toEqual([]);
  });

  test("the allow-list matches the exact host, not a suffix or a prefix", async () => {
    const { connect, calls } = forbiddenConnector();
    const { resolve } = tableResolver({ "evil-audio.test": ["127.0.0.1"], "audio.test.evil.example": ["127.0.0.1"] });
    const options = { allowedDomains: ["audio.test"], resolve, connect };
    await refusal(fetchRemoteMedia("http://evil-audio.test/", options));
    await refusal(fetchRemoteMedia("http://audio.test.evil.example/", options));
    expect(calls).toEqual([]);
  });

  test.each([
    ["a public name", "http://cdn.example.com/voice.wav", "cdn.example.com"],
    ["a public address", "http://8.8.8.8/voice.wav", "8.8.8.8"],
    ["a public IPv6 address", "http://[2606:4700::1111]/voice.wav", "2606:4700::1111"],
    ["a sub-domain of a listed host", "http://cdn.audio.test/voice.wav", "cdn.audio.test"],
  ])("with the allow-list set, %s outside it is refused by that rule without being resolved", async (_label, url, host) => {
    const { connect, calls } = forbiddenConnector();
    const { resolve, asked } = tableResolver({ "cdn.example.com": ["8.8.8.8"], "cdn.audio.test": ["8.8.8.8"] });
    const error = await refusal(fetchRemoteMedia(url, { allowedDomains: ["audio.test", "media.internal"], resolve, connect }));
    expect(error.message).toBe(`ref_audio host ${host} is not one of this server's allowed media domains (--allowed-media-domains)`);
    expect(error.message).not.toContain("media.internal");
    expect(asked).toEqual([]);
    expect(calls).toEqual([]);
  });

  test("with the allow-list set, a listed host redirecting to a public host outside it is refused at the redirect", async () => {
    const calls: string[] = [];
    const connect: Connector = async (url) => {
      calls.push(url.href);
      return new Response(null, { status: 302, headers: { location: "https://cdn.example.com/voice.wav" } });
    };
    const { resolve, asked } = tableResolver({ "audio.test": ["10.0.0.7"], "cdn.example.com": ["8.8.8.8"] });
    const error = await refusal(fetchRemoteMedia("http://audio.test/voice.wav", { allowedDomains: ["audio.test"], resolve, connect }));
    expect(error.message).toContain("cdn.example.com is not one of this server's allowed media domains");
    expect(calls).toEqual(["http://audio.test/voice.wav"]);
    expect(asked).toEqual(["audio.test"]);
  });

  test("the resolver's answer is checked even for an allow-listed name when it is not an address", async () => {
    const { connect, calls } = forbiddenConnector();
    const { resolve } = tableResolver({ "audio.test": ["audio.internal"] });
    const error = await refusal(fetchRemoteMedia("http://audio.test/", { allowedDomains: ["audio.test"], resolve, connect }));
    expect(error.message).toBe("ref_audio host could not be resolved");
    expect(calls).toEqual([]);
  });
});

describe("redirects are re-checked hop by hop", () => {
  test("a public-looking host redirecting to loopback is refused on the second hop", async () => {
    let loopbackHits = 0;
    const loopback = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => (loopbackHits++, new Response(AUDIO_BYTES)) });
    try {
      // The first hop never leaves the process: the injected connector plays the public host.
      const calls: { url: string; address: string }[] = [];
      const connect: Connector = async (url, address) => {
        calls.push({ url: url.href, address });
        return new Response(null, { status: 302, headers: { location: `http://127.0.0.1:${loopback.port}/voice.wav` } });
      };
      const { resolve } = tableResolver({ "media.example.com": ["8.8.8.8"] });
      const error = await refusal(fetchRemoteMedia("https://media.example.com/voice.wav", { allowedDomains: [], resolve, connect }));
      expect(error.message).toBe("ref_audio URL points at a loopback address (127.0.0.0/8)");
      expect(calls).toEqual([{ url: "https://media.example.com/voice.wav", address: "8.8.8.8" }]);
      expect(loopbackHits).toBe(0);
    } finally {
      await loopback.stop(true);
    }
  });

  test.each([
    ["http://internal.example.com/voice.wav", /resolves to a private address/],
    ["file:///etc/passwd", /must use http or https/],
    ["http://admin:secret@media.example.com/voice.wav", /must not contain credentials/],
    ["http://[::ffff:169.254.169.254]/", /points at a cloud metadata address/],
  ])("a redirect to %s is refused", async (location, message) => {
    const calls: string[] = [];
    const connect: Connector = async (url) => {
      calls.push(url.href);
      return new Response(null, { status: 301, headers: { location } });
    };
    const { resolve } = tableResolver({ "media.example.com": ["8.8.8.8"], "internal.example.com": ["10.0.0.5"] });
    const error = await refusal(fetchRemoteMedia("http://media.example.com/start", { allowedDomains: [], resolve, connect }));
    expect(error.message).toMatch(message);
    expect(calls).toEqual(["http://media.example.com/start"]);
  });

  test("a redirect without a Location is refused", async () => {
    const connect: Connector = async () => new Response(null, { status: 307 });
    const { resolve } = tableResolver({ "media.example.com": ["8.8.8.8"] });
    const error = await refusal(fetchRemoteMedia("http://media.example.com/", { allowedDomains: [], resolve, connect }));
    expect(error.message).toBe("ref_audio URL answered HTTP 307 without a Location");
  });
});

describe("content checks on an injected response", () => {
  const { resolve } = tableResolver({ "media.example.com": ["2606:4700::1111"] });
  const answer = (response: Response): RemoteMediaOptions => ({ allowedDomains: [], resolve, connect: async () => response });

  test("an absent content type is accepted", async () => {
    const media = await fetchRemoteMedia("http://media.example.com/voice", answer(new Response(AUDIO_BYTES)));
    expect(media).toEqual({ bytes: AUDIO_BYTES, contentType: undefined, finalUrl: "http://media.example.com/voice" });
  });

  test.each(["audio/wav", "audio/mpeg; charset=binary", "AUDIO/OGG", "application/octet-stream"])("%s is accepted", async (contentType) => {
    const media = await fetchRemoteMedia("http://media.example.com/voice", answer(new Response(AUDIO_BYTES, { headers: { "content-type": contentType } })));
    expect(media.contentType).toBe(contentType);
    expect(media.bytes).toEqual(AUDIO_BYTES);
  });

  test.each(["text/html; charset=utf-8", "application/json", "audio/", "video/mp4"])("%s is refused", async (contentType) => {
    const error = await refusal(fetchRemoteMedia("http://media.example.com/voice", answer(new Response("<html>", { headers: { "content-type": contentType } }))));
    expect(error.message).toStartWith("ref_audio URL is not audio (content-type ");
  });

  test("an error status is refused", async () => {
    const error = await refusal(fetchRemoteMedia("http://media.example.com/voice", answer(new Response("no", { status: 404 }))));
    expect(error.message).toBe("ref_audio URL answered HTTP 404");
  });

  test("a declared length past the cap is refused before the body is read", async () => {
    let pulledChunks = 0;
    const body = new ReadableStream<Uint8Array>({ pull: (controller) => void (pulledChunks++, controller.enqueue(new Uint8Array(CHUNK_BYTES))) }, { highWaterMark: 0 });
    const response = new Response(body, { headers: { "content-type": "audio/wav", "content-length": String(2 * 1024 * 1024) } });
    const error = await refusal(fetchRemoteMedia("http://media.example.com/voice", { ...answer(response), maxBytes: 1024 * 1024 }));
    expect(error.message).toBe("ref_audio is larger than 1 MiB");
    expect(pulledChunks).toBe(0);
  });

  test("a connection failure is a 400 without internals, the failure kept as the cause", async () => {
    const failure = new Error("connect ECONNREFUSED 2606:4700::1111:80");
    const error = await refusal(fetchRemoteMedia("http://media.example.com/voice", { allowedDomains: [], resolve, connect: async () => Promise.reject(failure) }));
    expect(error.message).toBe("ref_audio URL could not be fetched");
    expect(error.cause).toBe(failure);
  });

  test("a resolver that never answers cannot outlast the deadline", async () => {
    const { connect, calls } = forbiddenConnector();
    const resolveNever = () => new Promise<string[]>(() => {});
    const error = await refusal(fetchRemoteMedia("http://media.example.com/voice", { allowedDomains: [], resolve: resolveNever, connect, timeoutMs: 100 }));
    expect(error.message).toBe("ref_audio download took longer than 100 ms");
    expect(calls).toEqual([]);
  });

  test("a body that stalls and ignores its signal still times out", async () => {
    const stalled = new ReadableStream<Uint8Array>({ start: (controller) => controller.enqueue(AUDIO_BYTES.subarray(0, 10)), pull: () => new Promise(() => {}) });
    const error = await refusal(fetchRemoteMedia("http://media.example.com/voice", { ...answer(new Response(stalled)), timeoutMs: 100 }));
    expect(error.message).toBe("ref_audio download took longer than 100 ms");
  });

  test("a caller's abort is passed through as the caller's reason", async () => {
    const caller = new AbortController();
    const reason = new Error("client went away");
    const connect: Connector = (_url, _address, signal) =>
      new Promise((_resolve, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }));
    const fetching = fetchRemoteMedia("http://media.example.com/voice", { allowedDomains: [], resolve, connect }, caller.signal);
    caller.abort(reason);
    expect(await fetching.catch((thrown: unknown) => thrown)).toBe(reason);
  });
});

describe("a real server on loopback, allowed by name", () => {
  let server: ReturnType<typeof Bun.serve>;
  let origin: string;
  const hostHeaders: string[] = [];
  const hits = new Map<string, number>();
  const streamed = { sentBytes: 0, cancelled: false };

  beforeAll(() => {
    server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      idleTimeout: 0,
      fetch(request) {
        const { pathname } = new URL(request.url);
        hostHeaders.push(request.headers.get("host") ?? "");
        hits.set(pathname, (hits.get(pathname) ?? 0) + 1);
        switch (pathname) {
          case "/voice.wav":
            return new Response(AUDIO_BYTES, { headers: { "content-type": "audio/wav" } });
          case "/hop-1":
            return Response.redirect("/hop-2", 302);
          case "/hop-2":
            return Response.redirect(`http://${request.headers.get("host")}/voice.wav`, 307);
          case "/loop":
            return Response.redirect("/loop", 302);
          case "/page.html":
            return new Response("<html></html>", { headers: { "content-type": "text/html" } });
          case "/endless":
            // No length, no end: only the client stopping ends it.
            return new Response(
              new ReadableStream<Uint8Array>(
                {
                  pull(controller) {
                    streamed.sentBytes += CHUNK_BYTES;
                    controller.enqueue(new Uint8Array(CHUNK_BYTES));
                  },
                  cancel() {
                    streamed.cancelled = true;
                  },
                },
                { highWaterMark: 0 },
              ),
              { headers: { "content-type": "audio/wav" } },
            );
          case "/stall-before-headers":
            return new Promise<Response>(() => {});
          case "/stall-mid-body":
            return new Response(
              new ReadableStream<Uint8Array>({ start: (controller) => controller.enqueue(AUDIO_BYTES.subarray(0, 100)) }),
              { headers: { "content-type": "audio/wav" } },
            );
          default:
            return new Response("not found", { status: 404 });
        }
      },
    });
    origin = `http://127.0.0.1:${server.port}`;
  });
  afterAll(() => server.stop(true));

  const loopbackAllowed: RemoteMediaOptions = { allowedDomains: ["127.0.0.1"] };

  test("an allowed loopback address serves its bytes", async () => {
    const media = await fetchRemoteMedia(`${origin}/voice.wav`, loopbackAllowed);
    expect(media).toEqual({ bytes: AUDIO_BYTES, contentType: "audio/wav", finalUrl: `${origin}/voice.wav` });
  });

  test("a name the resolver maps to loopback is pinned to that address, keeping the name in Host", async () => {
    const { resolve, asked } = tableResolver({ "audio.test": ["127.0.0.1"] });
    hostHeaders.length = 0;
    const media = await fetchRemoteMedia(`http://Audio.TEST:${server.port}/voice.wav`, { allowedDomains: ["AUDIO.test"], resolve });
    expect(media.bytes).toEqual(AUDIO_BYTES);
    expect(media.finalUrl).toBe(`http://audio.test:${server.port}/voice.wav`);
    expect(hostHeaders).toEqual([`audio.test:${server.port}`]);
    expect(asked).toEqual(["audio.test"]);
  });

  test("the same name, not allow-listed, never reaches the server", async () => {
    const { resolve } = tableResolver({ "audio.test": ["127.0.0.1"] });
    hits.clear();
    const error = await refusal(fetchRemoteMedia(`http://audio.test:${server.port}/voice.wav`, { allowedDomains: [], resolve }));
    expect(error.message).toBe("ref_audio host resolves to a loopback address (127.0.0.0/8)");
    expect(hits.size).toBe(0);
  });

  test("redirects are followed, each hop resolved and pinned again", async () => {
    const { resolve, asked } = tableResolver({ "audio.test": ["127.0.0.1"] });
    const media = await fetchRemoteMedia(`http://audio.test:${server.port}/hop-1`, { allowedDomains: ["audio.test"], resolve });
    expect(media.bytes).toEqual(AUDIO_BYTES);
    expect(media.finalUrl).toBe(`http://audio.test:${server.port}/voice.wav`);
    expect(asked).toEqual(["audio.test", "audio.test", "audio.test"]);
  });

  test("too many redirects are refused", async () => {
    hits.clear();
    const error = await refusal(fetchRemoteMedia(`${origin}/loop`, { ...loopbackAllowed, maxRedirects: 2 }));
    expect(error.message).toBe("ref_audio URL redirected more than 2 times");
    expect(hits.get("/loop")).toBe(3);
  });

  test("the default redirect cap is 3", async () => {
    hits.clear();
    await refusal(fetchRemoteMedia(`${origin}/loop`, loopbackAllowed));
    expect(hits.get("/loop")).toBe(4);
  });

  test("a page that is not audio is refused", async () => {
    const error = await refusal(fetchRemoteMedia(`${origin}/page.html`, loopbackAllowed));
    expect(error.message).toBe("ref_audio URL is not audio (content-type text/html)");
  });

  test("a body past the cap is refused and the connection dropped", async () => {
    const maxBytes = 256 * 1024;
    // Counts what the fetcher actually pulls from the response, one chunk per read.
    let deliveredBytes = 0;
    const countingConnect: Connector = async (url, address, signal) => {
      const response = await connectPinned(url, address, signal);
      const reader = response.body!.getReader();
      const body = new ReadableStream<Uint8Array>(
        {
          async pull(controller) {
            const { done, value } = await reader.read();
            if (done) return controller.close();
            deliveredBytes += value.byteLength;
            controller.enqueue(value);
          },
          cancel: (reason) => reader.cancel(reason),
        },
        { highWaterMark: 0 },
      );
      return { ...response, body };
    };
    streamed.sentBytes = 0;
    streamed.cancelled = false;

    const error = await refusal(fetchRemoteMedia(`${origin}/endless`, { ...loopbackAllowed, maxBytes, connect: countingConnect }));
    expect(error.message).toBe("ref_audio is larger than 262144 bytes");
    expect(deliveredBytes).toBeGreaterThan(maxBytes);
    expect(deliveredBytes).toBeLessThanOrEqual(maxBytes + CHUNK_BYTES);

    // The server sees the stream cancelled; what it sent beyond the cap is what sat in socket buffers.
    for (let waitedMs = 0; !streamed.cancelled && waitedMs < 5000; waitedMs += 20) await Bun.sleep(20);
    expect(streamed.cancelled).toBe(true);
    const sentAtCancel = streamed.sentBytes;
    await Bun.sleep(100);
    expect(streamed.sentBytes).toBe(sentAtCancel);
    expect(sentAtCancel).toBeLessThan(maxBytes + 16 * 1024 * 1024);
  });

  test.each(["/stall-before-headers", "/stall-mid-body"])("%s times out", async (path) => {
    const startedMs = performance.now();
    const error = await refusal(fetchRemoteMedia(`${origin}${path}`, { ...loopbackAllowed, timeoutMs: 300 }));
    expect(error.message).toBe("ref_audio download took longer than 300 ms");
    expect(performance.now() - startedMs).toBeLessThan(3000);
  });
});

describe("HTTPS keeps the host name for SNI and the certificate check while connecting to the pinned address", () => {
  // A throwaway CA and a leaf for audio.test only (EC P-256, valid to 2126): trusted only where a test says so.
  const TEST_CA = `-----BEGIN CERTIFICATE-----
MIIBmzCCAUGgAwIBAgIURgFIY5eOLiTXOHQ/mVqQnamHE5EwCgYIKoZIzj0EAwIw
GjEYMBYGA1UEAwwPdm94ZWRnZSB0ZXN0IENBMCAXDTI2MTEzMDE4NDUzM1oYDzIx
MjYxMTA2MTg0NTMzWjAaMRgwFgYDVQQDDA92b3hlZGdlIHRlc3QgQ0EwWTATBgcq
hkjOPQIBBggqhkjOPQMBBwNCAAQ5mpRAAQVByK+yGFsERpS/OV2gHtlknyE9JmUP
dbLtM71BniG8Xl3kTvUUn+K0yFohIKZyJGP0AFC29Z7aSeiVo2MwYTAdBgNVHQ4E
FgQUQUHMWVuQLfeufCRpTJG5GQKN/jwwHwYDVR0jBBgwFoAUQUHMWVuQLfeufCRp
TJG5GQKN/jwwDwYDVR0TAQH/BAUwAwEB/zAOBgNVHQ8BAf8EBAMCAgQwCgYIKoZI
zj0EAwIDSAAwRQIhAPNpd3BWU7GLooQWix7QqHJB/2tCwJ3SuEyWzKAM74RDAiAO
spCckFqkSCcKqKj2blghtYELnSczTNnzr9B1N0iLjg==
-----END CERTIFICATE-----
`;
  const AUDIO_TEST_CERT = `-----BEGIN CERTIFICATE-----
MIIBrDCCAVKgAwIBAgIUSbPlD2n9dVhx+feYk+canEg/unswCgYIKoZIzj0EAwIw
GjEYMBYGA1UEAwwPdm94ZWRnZSB0ZXN0IENBMCAXDTI2MTEzMDE4NDUzM1oYDzIx
MjYxMTA2MTg0NTMzWjAVMRMwEQYDVQQDDAphdWRpby50ZXN0MFkwEwYHKoZIzj0C
AQYIKoZIzj0DAQcDQgAErS+WzDcUCpuFVKStw5sZ8p7tzyyKR7tk01mrKB4ka8/+
4kv5lGETxjc3Eb7+50R2kKJrB17Nb6u4ISy+CHYfIKN5MHcwFQYDVR0RBA4wDIIK
YXVkaW8udGVzdDAJBgNVHRMEAjAAMBMGA1UdJQQMMAoGCCsGAQUFBwMBMB0GA1Ud
DgQWBBSsJKXO8EPfCoWPuZV1cU7910ToIDAfBgNVHSMEGDAWgBRBQcxZW5At9658
JGlMkbkZAo3+PDAKBggqhkjOPQQDAgNIADBFAiBokhmEfAwnsVdkAC4NYOmMB4Cz
q62XQcD7jjeUnDK7egIhAI/6s7gy97KTNEUMKBWexGVmsJYjP7cwLURkeADhtKJz
-----END CERTIFICATE-----
`;
  const AUDIO_TEST_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgBKRTDLHuwac63D59
+bPXIm1QZIufTTQ2bxkjBJMnis+hRANCAAStL5bMNxQKm4VUpK3Dmxnynu3PLIpH
u2TTWasoHiRrz/7iS/mUYRPGNzcRvv7nRHaQomsHXs1vq7ghLL4Idh8g
-----END PRIVATE KEY-----
`;

  let server: TlsServer;
  let port: number;
  const serverNames: string[] = [];

  beforeAll(async () => {
    const context = { cert: AUDIO_TEST_CERT, key: AUDIO_TEST_KEY };
    server = createTlsServer(
      {
        ...context,
        SNICallback: (serverName, done) => {
          serverNames.push(serverName);
          done(null, createSecureContext(context));
        },
      },
      (socket) => socket.end("HTTP/1.1 200 OK\r\ncontent-type: audio/wav\r\ncontent-length: 5\r\nconnection: close\r\n\r\nRIFF!"),
    );
    await new Promise<void>((listening) => server.listen(0, "127.0.0.1", listening));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => void server.close());

  test("an untrusted certificate is refused, after SNI named the host", async () => {
    serverNames.length = 0;
    const { resolve } = tableResolver({ "audio.test": ["127.0.0.1"] });
    const error = await refusal(fetchRemoteMedia(`https://audio.test:${port}/voice.wav`, { allowedDomains: ["audio.test"], resolve }));
    expect(error.message).toBe("ref_audio URL could not be fetched");
    expect(String((error.cause as Error).message)).toMatch(/certificate/i);
    expect(serverNames).toEqual(["audio.test"]);
  });

  test("with the test CA trusted, the right name is accepted and another name is refused", async () => {
    // Trust roots are read at start, so a child process gets NODE_EXTRA_CA_CERTS.
    const folder = mkdtempSync(join(tmpdir(), "voxedge-ca-"));
    try {
      const caPath = join(folder, "ca.pem");
      writeFileSync(caPath, TEST_CA);
      const modulePath = new URL("../../src/voices/remote-media.ts", import.meta.url).pathname;
      const script = `
        const { fetchRemoteMedia } = await import(${JSON.stringify(modulePath)});
        const resolve = async () => ["127.0.0.1"];
        const outcome = async (host) => {
          try {
            const media = await fetchRemoteMedia("https://" + host + ":${port}/voice.wav", { allowedDomains: [host], resolve });
            return new TextDecoder().decode(media.bytes);
          } catch (error) {
            return error.message + " / " + error.cause?.message;
          }
        };
        console.log(JSON.stringify({ right: await outcome("audio.test"), wrong: await outcome("other.test") }));
      `;
      const child = Bun.spawn([process.execPath, "-e", script], { env: { ...process.env, NODE_EXTRA_CA_CERTS: caPath }, stdout: "pipe", stderr: "pipe" });
      const [stdout, stderr, exitCode] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
      expect({ exitCode, stderr }).toEqual({ exitCode: 0, stderr: "" });
      const outcome = JSON.parse(stdout) as { right: string; wrong: string };
      expect(outcome.right).toBe("RIFF!");
      expect(outcome.wrong).toMatch(/^ref_audio URL could not be fetched \/ .*(altname|does not match)/i);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });
});
