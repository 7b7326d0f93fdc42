/**
 * Run by test/storage/s3.test.ts under Deno: the S3 client's conditional writes against the test's RGW
 * (AWS_* variables, bucket in S3_CHECK_BUCKET). Prints one JSON line with what each step returned.
 */
import { S3Bucket, s3SettingsFromEnv } from "../../../src/storage/s3.ts";

// Typed here so that the project's type check (which has no Deno types) covers this file too.
const { Deno } = globalThis as unknown as { Deno: { env: { toObject(): Record<string, string>; get(name: string): string | undefined } } };

const bucket = new S3Bucket(s3SettingsFromEnv(Deno.env.toObject()), Deno.env.get("S3_CHECK_BUCKET")!);
const key = "deno/created-once";
const created = await bucket.put(key, "first", { ifNoneMatch: "*" });
const createdAgain = await bucket.put(key, "second", { ifNoneMatch: "*" });
const createdOutcome = created === "conflict" ? "conflict" : "created";
if (created === "conflict") throw new Error("the first create-only PUT was refused");
const swapped = await bucket.put(key, "swapped", { ifMatch: created.etag.replaceAll('"', "") });
const staleSwap = await bucket.put(key, "stale", { ifMatch: created.etag.replaceAll('"', "") });
const read = await bucket.get(key);
console.log(
  JSON.stringify({
    runtime: "Deno" in globalThis ? "deno" : "other",
    created: createdOutcome,
    createdAgain,
    swapped: swapped === "conflict" ? "conflict" : "swapped",
    staleSwap,
    body: typeof read === "string" ? read : new TextDecoder().decode(read.body),
    etagMatches: typeof read !== "string" && swapped !== "conflict" && read.etag === swapped.etag,
  }),
);
