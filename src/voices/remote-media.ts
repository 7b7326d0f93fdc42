/**
 * Fetches a user-supplied `ref_audio` URL without letting it reach the server's own network: every host
 * is resolved once, every resolved address is checked, and the connection goes to the checked address, so
 * a DNS answer that changes between check and connect (rebinding) cannot redirect it. Redirects are
 * followed by hand so each hop gets the same checks; size and time are capped. An operator's list of
 * allowed hosts replaces the address checks: only those names, wherever they resolve.
 *
 * Pinning, per runtime: the default connector is node:http / node:https `request` with a `lookup` that
 * answers with the checked address. The URL's host name stays the request host, so the Host header, TLS
 * SNI and certificate name checks are for the name. Bun 1.4 and Deno 2.9 both honour `lookup` (checked
 * against a loopback server answering for a name the system resolver does not know, and for `localhost`
 * pinned to 127.0.0.2) and both pass `all: true`, so the callback answers in either form. The Bun tests
 * exercise this for real (Host header, SNI, certificate name); Deno was checked by hand the same way.
 */
import { lookup } from "node:dns/promises";
import { request as httpRequest, type IncomingMessage, type RequestOptions } from "node:http";
import { request as httpsRequest } from "node:https";
import { Readable } from "node:stream";
import { ApiError } from "../api/errors.ts";
import { addressFamily, classifyAddress, describeRefusal } from "./address-policy.ts";
import { readCapped } from "../async/capped-stream.ts";

const MEBIBYTE_BYTES = 1024 * 1024;
/** Also the cap on a file:// ref_audio: a reference is bounded the same whether it is fetched or read. */
export const REF_AUDIO_MAX_BYTES = 32 * MEBIBYTE_BYTES;
const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_MAX_REDIRECTS = 3;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** A refused host is echoed in the error; a URL parser accepts names far longer than DNS does. */
const MAX_SHOWN_HOST_CHARS = 253;

/** What a connector hands back; a web `Response` fits, so tests can inject plain `new Response(...)`. */
export interface RemoteResponse {
  status: number;
  headers: Headers;
  body: ReadableStream<Uint8Array> | null;
}

/**
 * Sends a GET for `url` over a connection to `address` (already checked), never resolving the host again.
 * Must give up when `signal` aborts.
 */
export type Connector = (url: URL, address: string, signal: AbortSignal) => Promise<RemoteResponse>;

export interface RemoteMediaOptions {
  /**
   * When not empty, the only hosts (exact, case-insensitive) that may be fetched, each to whatever address
   * it resolves to (e.g. an internal media server); when empty, any host whose addresses are all public.
   */
  allowedDomains: readonly string[];
  maxBytes?: number;
  timeoutMs?: number;
  maxRedirects?: number;
  /** Host name → addresses; defaults to the system resolver (all addresses, both families). */
  resolve?: (host: string) => Promise<string[]>;
  connect?: Connector;
}

export interface RemoteMedia {
  bytes: Uint8Array;
  contentType: string | undefined;
  finalUrl: string;
}

/** A caller mistake about `ref_audio`, worded for a 400; the underlying failure, if any, is the `cause`. */
export class RemoteMediaError extends ApiError {
  constructor(message: string, cause?: unknown) {
    super(400, message, "ref_audio");
    if (cause !== undefined) this.cause = cause;
  }
}

export async function fetchRemoteMedia(url: string, options: RemoteMediaOptions, signal?: AbortSignal): Promise<RemoteMedia> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new RemoteMediaError(`ref_audio download took longer than ${describeDuration(timeoutMs)}`)), timeoutMs);
  const combined = signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal;
  try {
    return await fetchFollowingRedirects(url, options, combined);
  } catch (error) {
    // Whatever broke after an abort (a destroyed socket, a cancelled read) is the abort's doing: report that.
    if (combined.aborted) throw combined.reason;
    if (error instanceof RemoteMediaError) throw error;
    throw new RemoteMediaError("ref_audio URL could not be fetched", error);
  } finally {
    clearTimeout(timer);
  }
}

async function fetchFollowingRedirects(url: string, options: RemoteMediaOptions, signal: AbortSignal): Promise<RemoteMedia> {
  const maxBytes = options.maxBytes ?? REF_AUDIO_MAX_BYTES;
  const maxRedirects = options.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
  const connect = options.connect ?? connectPinned;
  const allowedHosts = new Set(options.allowedDomains.map(bareHost));

  let target = parseTarget(url);
  for (let redirectCount = 0; ; redirectCount++) {
    const address = await checkedAddress(target, allowedHosts, options.resolve ?? resolveAll, signal);
    const response = await untilAborted(connect(target, address, signal), signal);

    if (REDIRECT_STATUSES.has(response.status)) {
      discard(response);
      if (redirectCount >= maxRedirects) throw new RemoteMediaError(`ref_audio URL redirected more than ${maxRedirects} times`);
      const location = response.headers.get("location");
      if (!location) throw new RemoteMediaError(`ref_audio URL answered HTTP ${response.status} without a Location`);
      target = parseTarget(location, target);
      continue;
    }
    if (response.status < 200 || response.status > 299) {
      discard(response);
      throw new RemoteMediaError(`ref_audio URL answered HTTP ${response.status}`);
    }

    const contentType = response.headers.get("content-type")?.trim() || undefined;
    const mediaType = contentType?.split(";")[0]!.trim().toLowerCase();
    if (mediaType !== undefined && mediaType !== "application/octet-stream" && !/^audio\/[^/]+$/.test(mediaType)) {
      discard(response);
      throw new RemoteMediaError(`ref_audio URL is not audio (content-type ${mediaType.slice(0, 80)})`);
    }
    if (Number(response.headers.get("content-length")) > maxBytes) {
      discard(response);
      throw tooLarge(maxBytes);
    }
    // Past maxBytes the read fails and the connection is dropped; the deadline's abort cancels a stalled read.
    const bytes = await readCapped(response.body, { maxBytes, tooLarge: () => tooLarge(maxBytes), signal });
    return { bytes, contentType, finalUrl: target.href };
  }
}

/** The URL as the WHATWG parser canonicalises it (so `http://2130706433/` is `http://127.0.0.1/`), if usable. */
function parseTarget(text: string, base?: URL): URL {
  let url: URL;
  try {
    url = new URL(text, base);
  } catch {
    throw new RemoteMediaError(base ? "ref_audio URL redirected to an invalid URL" : "ref_audio is not a valid URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new RemoteMediaError("ref_audio URL must use http or https");
  if (url.username || url.password) throw new RemoteMediaError("ref_audio URL must not contain credentials");
  return url;
}

/** The one address the request will connect to, after every address of the host passed the policy. */
async function checkedAddress(
  url: URL,
  allowedHosts: ReadonlySet<string>,
  resolve: (host: string) => Promise<string[]>,
  signal: AbortSignal,
): Promise<string> {
  const host = bareHost(url.hostname);
  // vLLM's --allowed-media-domains: a set list is the whole list, checked before the name is even resolved.
  const onlyListed = allowedHosts.size > 0;
  if (onlyListed && !allowedHosts.has(host)) {
    const shown = host.length > MAX_SHOWN_HOST_CHARS ? `${host.slice(0, MAX_SHOWN_HOST_CHARS)}…` : host;
    throw new RemoteMediaError(`ref_audio host ${shown} is not one of this server's allowed media domains (--allowed-media-domains)`);
  }
  const isLiteral = addressFamily(host) !== undefined;
  let addresses: string[];
  if (isLiteral) {
    addresses = [host];
  } else {
    try {
      addresses = await untilAborted(resolve(host), signal);
    } catch (error) {
      if (signal.aborted) throw error;
      throw new RemoteMediaError("ref_audio host could not be resolved", error);
    }
  }
  if (addresses.length === 0) throw new RemoteMediaError("ref_audio host could not be resolved");

  if (onlyListed) {
    // The operator trusts a listed host by name, so the range checks are waived, not the need for a real address to pin.
    if (addresses.some((address) => addressFamily(address) === undefined)) throw new RemoteMediaError("ref_audio host could not be resolved");
    return addresses[0]!;
  }
  // Any refused address refuses the host: the caller could otherwise steer which one a retry connects to.
  for (const address of addresses) {
    const verdict = classifyAddress(address);
    if (!verdict.allowed) {
      throw new RemoteMediaError(isLiteral ? `ref_audio URL points at ${describeRefusal(verdict)}` : `ref_audio host resolves to ${describeRefusal(verdict)}`);
    }
  }
  return addresses[0]!;
}

async function resolveAll(host: string): Promise<string[]> {
  const records = await lookup(host, { all: true });
  return records.map((record) => record.address);
}

/**
 * The default connector: node:http(s) with the host name kept (Host header, SNI, certificate check) and a
 * `lookup` that can only answer the checked address. `agent: false` so no pooled socket, opened for an
 * earlier answer, is reused.
 */
export const connectPinned: Connector = (url, address, signal) =>
  new Promise((resolve, reject) => {
    const family = addressFamily(address);
    if (family === undefined) return reject(new Error(`not an IP address: ${address}`));
    signal.throwIfAborted();
    const requestOptions: RequestOptions = {
      protocol: url.protocol,
      hostname: bareHost(url.hostname),
      port: url.port || undefined,
      path: url.pathname + url.search,
      method: "GET",
      agent: false,
      headers: {
        host: url.host,
        accept: "audio/*, application/octet-stream;q=0.9",
        // The byte cap is on what arrives; a compressed body would get past it and decode to more.
        "accept-encoding": "identity",
      },
      lookup: (_hostname, lookupOptions, callback) => {
        if (lookupOptions.all) callback(null, [{ address, family }]);
        else callback(null, address, family);
      },
    };
    const send = url.protocol === "https:" ? httpsRequest : httpRequest;
    const request = send(requestOptions, (incoming) => resolve(toRemoteResponse(incoming)));
    const onAbort = () => request.destroy(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    request.on("close", () => signal.removeEventListener("abort", onAbort));
    request.on("error", reject);
    request.end();
  });

function toRemoteResponse(incoming: IncomingMessage): RemoteResponse {
  const headers = new Headers();
  for (let index = 0; index + 1 < incoming.rawHeaders.length; index += 2) headers.append(incoming.rawHeaders[index]!, incoming.rawHeaders[index + 1]!);
  return { status: incoming.statusCode ?? 0, headers, body: Readable.toWeb(incoming) as unknown as ReadableStream<Uint8Array> };
}

/** Settles with `work`, or rejects with the abort reason first: a resolver or connector cannot outlast the deadline. */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function discard(response: RemoteResponse): void {
  void response.body?.cancel().catch(() => {});
}

/** `[::1]` and `::1` name the same host; the URL parser writes IPv6 hosts bracketed. */
function bareHost(host: string): string {
  return host.replace(/^\[(.*)\]$/, "$1").toLowerCase();
}

function tooLarge(maxBytes: number): RemoteMediaError {
  const limit = maxBytes % MEBIBYTE_BYTES === 0 ? `${maxBytes / MEBIBYTE_BYTES} MiB` : `${maxBytes} bytes`;
  return new RemoteMediaError(`ref_audio is larger than ${limit}`);
}

function describeDuration(durationMs: number): string {
  return durationMs % 1000 === 0 ? `${durationMs / 1000} s` : `${durationMs} ms`;
}
