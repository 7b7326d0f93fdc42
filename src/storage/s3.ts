/**
 * A small S3 client over `fetch`, signed with SigV4 by aws4fetch, so the same code runs on Bun and Deno
 * (Bun.S3Client exists only on Bun and has no conditional writes; the AWS SDK is ~22 MB and takes half a
 * second to import). It does what the voice store and `models pull --from s3://` need: GET (conditional),
 * PUT (create-only or compare-and-swap), DELETE and ListObjectsV2.
 *
 * Settings come from the variables every S3 tool reads: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN, AWS_REGION (or AWS_DEFAULT_REGION) and AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL. With a
 * custom endpoint (Ceph RGW, MinIO, Garage, …) addressing is path-style, which those servers all accept;
 * without one it is AWS's virtual-hosted style.
 */
import { AwsClient } from "aws4fetch";
import { XMLParser } from "fast-xml-parser";

/** Where objects live: `s3://BUCKET/PREFIX` (the prefix without its leading or trailing slash; may be empty). */
export interface S3Location {
  bucket: string;
  prefix: string;
}

export interface S3Settings {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  region: string;
  /** A custom endpoint (path-style addressing), or undefined for AWS. */
  endpoint?: string;
}

/** The settings or the location are wrong: said at start, with what to set. */
export class S3ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "S3ConfigError";
  }
}

/** An answer the caller did not expect (or no answer): the status, S3's error code when it sent one. */
export class S3Error extends Error {
  constructor(
    message: string,
    readonly status: number | undefined,
    readonly code?: string,
  ) {
    super(message);
    this.name = "S3Error";
  }
}

const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

export function isS3Url(value: string): boolean {
  return value.startsWith("s3://");
}

export function parseS3Url(url: string): S3Location {
  if (!isS3Url(url)) throw new S3ConfigError(`not an s3:// URL: ${url}`);
  const rest = url.slice("s3://".length);
  const slash = rest.indexOf("/");
  const bucket = slash === -1 ? rest : rest.slice(0, slash);
  const prefix = slash === -1 ? "" : rest.slice(slash + 1).replace(/^\/+|\/+$/g, "");
  if (!BUCKET_NAME.test(bucket)) throw new S3ConfigError(`'${bucket}' in ${url} is not a valid bucket name (3–63 lower-case letters, digits, dots and hyphens)`);
  return { bucket, prefix };
}

export function s3SettingsFromEnv(env: Record<string, string | undefined>): S3Settings {
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  if (!accessKeyId || !secretAccessKey) throw new S3ConfigError("an s3:// location needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
  const endpoint = env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL || undefined;
  if (endpoint !== undefined) {
    let parsed: URL;
    try {
      parsed = new URL(endpoint);
    } catch {
      throw new S3ConfigError(`AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL must be an http(s) URL, not '${endpoint}'`);
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new S3ConfigError(`the S3 endpoint must be http(s), not '${endpoint}'`);
  }
  return {
    accessKeyId,
    secretAccessKey,
    ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
    region: env.AWS_REGION || env.AWS_DEFAULT_REGION || "us-east-1",
    ...(endpoint !== undefined ? { endpoint: endpoint.replace(/\/+$/, "") } : {}),
  };
}

export interface S3Object {
  body: Uint8Array;
  etag: string;
}

export interface S3ListedObject {
  key: string;
  sizeBytes: number;
  lastModified: Date;
}

/** How a PUT is conditioned: create only (`If-None-Match: *`), or replace only the version with this ETag. */
export type PutCondition = { ifNoneMatch: "*" } | { ifMatch: string } | undefined;

/** How long one request may take before it counts as failed (loopback answers in milliseconds). */
const REQUEST_TIMEOUT_MS = 15_000;

export class S3Bucket {
  private readonly client: AwsClient;
  // Text as sent: by default the parser turns a key such as "007" into 7 and trims " a " to "a".
  private readonly xml = new XMLParser({ isArray: (name) => name === "Contents", parseTagValue: false, trimValues: false });

  constructor(
    readonly settings: S3Settings,
    readonly bucket: string,
  ) {
    // aws4fetch retries 5xx and 429 answers itself, with exponential backoff from initRetryMs.
    this.client = new AwsClient({ accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey, sessionToken: settings.sessionToken, region: settings.region, service: "s3", retries: 3, initRetryMs: 50 });
  }

  /** The object's URL: path-style on a custom endpoint, virtual-hosted on AWS. */
  url(key: string): string {
    const path = key.split("/").map(encodeURIComponent).join("/");
    if (this.settings.endpoint !== undefined) return `${this.settings.endpoint}/${this.bucket}/${path}`;
    return `https://${this.bucket}.s3.${this.settings.region}.amazonaws.com/${path}`;
  }

  /** The endpoint, for messages (never the credentials). */
  describe(): string {
    return this.settings.endpoint !== undefined ? `${this.settings.endpoint}/${this.bucket}` : `s3://${this.bucket} (${this.settings.region})`;
  }

  /**
   * The object, or "missing", or "unchanged" when `ifNoneMatch` is its current ETag (a 304: one round trip
   * and no body, which is what a freshness check costs).
   */
  async get(key: string, options: { ifNoneMatch?: string; signal?: AbortSignal } = {}): Promise<S3Object | "missing" | "unchanged"> {
    const response = await this.send(key, { method: "GET", headers: options.ifNoneMatch === undefined ? {} : { "if-none-match": options.ifNoneMatch }, signal: options.signal });
    if (response.status === 304) return "unchanged";
    if (response.status === 404) {
      await response.body?.cancel();
      return "missing";
    }
    if (response.status !== 200) throw await errorOf(response, `GET ${key}`);
    return { body: new Uint8Array(await response.arrayBuffer()), etag: etagOf(response) };
  }

  /** Writes the object; "conflict" when its condition does not hold (412, or 409 for a race S3 lost itself). */
  async put(key: string, body: Uint8Array | string, condition?: PutCondition, contentType = "application/octet-stream"): Promise<{ etag: string } | "conflict"> {
    const headers: Record<string, string> = { "content-type": contentType };
    if (condition !== undefined && "ifNoneMatch" in condition) headers["if-none-match"] = condition.ifNoneMatch;
    if (condition !== undefined && "ifMatch" in condition) headers["if-match"] = condition.ifMatch;
    const response = await this.send(key, { method: "PUT", headers, body });
    if (response.status === 412 || response.status === 409) {
      await response.body?.cancel();
      return "conflict";
    }
    if (response.status !== 200) throw await errorOf(response, `PUT ${key}`);
    await response.body?.cancel();
    return { etag: etagOf(response) };
  }

  /** Removes the object; one already gone is no error (S3 answers 204 either way). */
  async delete(key: string): Promise<void> {
    const response = await this.send(key, { method: "DELETE" });
    if (response.status !== 204 && response.status !== 200 && response.status !== 404) throw await errorOf(response, `DELETE ${key}`);
    await response.body?.cancel();
  }

  /** Every object under `prefix` (ListObjectsV2, page by page), and the server's clock at the last page. */
  async list(prefix: string): Promise<{ objects: S3ListedObject[]; serverTime: Date }> {
    const objects: S3ListedObject[] = [];
    let continuationToken: string | undefined;
    for (;;) {
      const query = new URLSearchParams({ "list-type": "2", prefix, ...(continuationToken === undefined ? {} : { "continuation-token": continuationToken }) });
      const response = await this.send("", { method: "GET" }, query);
      if (response.status !== 200) throw await errorOf(response, `LIST ${prefix}`);
      const page = this.xml.parse(await response.text()).ListBucketResult ?? {};
      for (const entry of page.Contents ?? []) {
        objects.push({ key: String(entry.Key), sizeBytes: Number(entry.Size), lastModified: new Date(String(entry.LastModified)) });
      }
      const serverTime = dateOf(response);
      if (String(page.IsTruncated) !== "true" || !page.NextContinuationToken) return { objects, serverTime };
      continuationToken = String(page.NextContinuationToken);
    }
  }

  /** A signed request to one of this bucket's URLs (a download that sets its own Range and signal). */
  signedFetch(url: string, init: RequestInit): Promise<Response> {
    return this.client.fetch(url, init);
  }

  /** Creates the bucket (for tests and first set-up); one that is already ours is fine. */
  async createBucket(): Promise<void> {
    const response = await this.send("", { method: "PUT" });
    if (response.status !== 200 && response.status !== 409) throw await errorOf(response, `create bucket ${this.bucket}`);
    await response.body?.cancel();
  }

  private async send(key: string, init: { method: string; headers?: Record<string, string>; body?: Uint8Array | string; signal?: AbortSignal }, query?: URLSearchParams): Promise<Response> {
    const base = key === "" ? this.url("").replace(/\/$/, "") + "/" : this.url(key);
    const target = query === undefined ? base : `${base}?${query}`;
    const timeout = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
    const signal = init.signal === undefined ? timeout : AbortSignal.any([init.signal, timeout]);
    try {
      return await this.client.fetch(target, { method: init.method, headers: init.headers, body: init.body as BodyInit | undefined, signal });
    } catch (error) {
      if (init.signal?.aborted) throw init.signal.reason;
      throw new S3Error(`${init.method} ${key || this.bucket} at ${this.describe()} failed: ${error instanceof Error ? error.message : String(error)}`, undefined);
    }
  }
}

/** The ETag as the server sent it (quoted, as a rule); the voice store's probe learns which form If-Match wants. */
function etagOf(response: Response): string {
  const etag = response.headers.get("etag");
  if (etag === null) throw new S3Error(`the server sent no ETag for ${response.url}`, response.status);
  return etag;
}

function dateOf(response: Response): Date {
  const date = new Date(response.headers.get("date") ?? "");
  return Number.isNaN(date.getTime()) ? new Date() : date;
}

async function errorOf(response: Response, what: string): Promise<S3Error> {
  const text = await response.text().catch(() => "");
  const code = /<Code>([^<]+)<\/Code>/.exec(text)?.[1];
  return new S3Error(`${what}: HTTP ${response.status}${code === undefined ? "" : ` ${code}`}`, response.status, code);
}
