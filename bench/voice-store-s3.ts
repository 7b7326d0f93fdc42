/**
 * Voices in object storage (`--voice-store s3://…`) on a real Ceph RGW on loopback (scripts/rgw-up.sh, started
 * for the run and stopped with it), measured through whole server processes as a cluster runs them:
 *  - 3 replicas, a cap of 50, 300 concurrent uploads of distinct names through each (900 at once): how many are
 *    stored, whether their created_at are distinct, whether every 200 is listed by every replica;
 *  - a replica killed with SIGKILL during 100 uploads: acknowledged voices lost, half-written voices visible;
 *  - a voice cloned on one Pocket TTS replica (the golden fixture bundle) spoken on another right after its 200;
 *  - the freshness check (a conditional GET of the manifest) per request: `GET /v1/audio/voices` on the S3
 *    store against the same on the folder store, and the store's check alone;
 *  - start-up to /health/ready with 50 voices stored, S3 against the folder store.
 *   bun bench/voice-store-s3.ts [--uploads 300] [--cap 50] [--requests 300] [--starts 5]
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { encodeWav } from "../src/audio/wav.ts";
import { silentLogger } from "../src/log/logger.ts";
import { FolderVoiceStore } from "../src/voices/folder-store.ts";
import { S3VoiceStore } from "../src/voices/s3-store.ts";
import { fixtureBundle } from "../test/models/pocket/bundle-fixture.ts";
import { sharedRgw } from "../test/support/rgw.ts";
import { BUN, startServerProcess, type ServerProcess } from "../test/support/server-process.ts";
import { multipartBody, sine } from "../test/support/uploads.ts";

const { values } = parseArgs({
  options: {
    uploads: { type: "string", default: "300" },
    cap: { type: "string", default: "50" },
    requests: { type: "string", default: "300" },
    starts: { type: "string", default: "5" },
  },
});
const UPLOADS_PER_REPLICA = Number(values.uploads);
const CAP = Number(values.cap);
const REQUESTS = Number(values.requests);
const STARTS = Number(values.starts);
const REPLICAS = 3;

const rgw = await sharedRgw();
const bucket = await rgw.newBucket("bench");
const rows: [string, string, string][] = [];
const row = (what: string, measured: string, goal: string) => {
  rows.push([what, measured, goal]);
  console.error(`${what}: ${measured}`);
};

const audio = new File([encodeWav(sine(1, 300, 16000), 16000) as Uint8Array<ArrayBuffer>], "voice.wav", { type: "audio/wav" });
async function upload(base: string, name: string): Promise<number> {
  const { body, contentType } = await multipartBody({ name, consent: `consent-${name}`, audio_sample: audio });
  try {
    const response = await fetch(`${base}/v1/audio/voices`, { method: "POST", headers: { "content-type": contentType }, body: body as Uint8Array<ArrayBuffer> });
    await response.arrayBuffer();
    return response.status;
  } catch {
    return 0;
  }
}
type Listed = { name: string; created_at: number };
const listed = async (base: string) => ((await (await fetch(`${base}/v1/audio/voices`)).json()) as { uploaded_voices: Listed[] }).uploaded_voices;
const serve = (flags: string[]) => startServerProcess([BUN, "src/main.ts", "serve", "--engine", "classic", "--host", "127.0.0.1", "--port", "0", ...flags], rgw.env(), 120_000);
const stopAll = async (servers: ServerProcess[]) => {
  for (const server of servers) if (server.child.exitCode === null && server.child.signalCode === null) await server.stop("SIGKILL");
};
const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((p / 100) * values.length))]!;
const ms = (value: number) => `${value.toFixed(1)} ms`;

// 1. Concurrent uploads through three replicas against one cap.
{
  const store = `s3://${bucket.bucket}/crowd`;
  const replicas = await Promise.all(Array.from({ length: REPLICAS }, () => serve(["--voice-store", store, "--max-uploaded-voices", String(CAP)])));
  try {
    const names = Array.from({ length: REPLICAS * UPLOADS_PER_REPLICA }, (_, index) => `crowd-${index}`);
    const startedMs = performance.now();
    const statuses = await Promise.all(names.map((name, index) => upload(replicas[index % REPLICAS]!.base, name)));
    const wallMs = performance.now() - startedMs;
    const accepted = names.filter((_, index) => statuses[index] === 200);
    const byStatus = new Map<number, number>();
    for (const status of statuses) byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
    const listings = await Promise.all(replicas.map((replica) => listed(replica.base)));
    const everyListed = listings.every((listing) => accepted.every((name) => listing.some((voice) => voice.name === name)) && listing.length === accepted.length);
    const distinctCreatedAt = new Set(listings[0]!.map((voice) => voice.created_at)).size;
    row(`${REPLICAS} replicas × ${UPLOADS_PER_REPLICA} concurrent uploads, cap ${CAP}: stored`, `${listings[0]!.length} (${[...byStatus].map(([status, count]) => `${count} × ${status || "no answer"}`).join(", ")}; ${(wallMs / 1000).toFixed(1)} s)`, `exactly ${CAP}`);
    row("… distinct created_at", String(distinctCreatedAt), String(CAP));
    row("… every 200 listed by every replica", everyListed ? "yes" : "NO", "yes");
  } finally {
    await stopAll(replicas);
  }
}

// 2. A replica killed during uploads.
{
  const prefix = "killed";
  const store = `s3://${bucket.bucket}/${prefix}`;
  const [victim, survivor] = await Promise.all([0, 1].map(() => serve(["--voice-store", store])));
  try {
    const acknowledged: string[] = [];
    const uploads = Array.from({ length: 100 }, (_, index) =>
      upload(victim!.base, `kept-${index}`).then((status) => {
        if (status === 200) acknowledged.push(`kept-${index}`);
      }),
    );
    while (acknowledged.length < 10) await Bun.sleep(2);
    victim!.child.kill("SIGKILL");
    await Promise.all(uploads);
    const names = new Set((await listed(survivor!.base)).map((voice) => voice.name));
    const lost = acknowledged.filter((name) => !names.has(name)).length;
    const manifest = await bucket.get(`${prefix}/manifest.json`);
    const entries = manifest === "missing" || manifest === "unchanged" ? [] : Object.values((JSON.parse(new TextDecoder().decode(manifest.body)) as { voices: Record<string, { body: string }> }).voices);
    const bodies = new Set((await bucket.list(`${prefix}/voices/`)).objects.map((object) => object.key));
    const halfWritten = entries.filter((entry) => !bodies.has(`${prefix}/voices/${entry.body}.safetensors`)).length;
    const orphans = bodies.size - entries.length;
    row(`kill -9 during 100 uploads (${acknowledged.length} acknowledged first)`, `${lost} lost, ${halfWritten} half-written visible, ${orphans} unnamed bodies left for the sweep`, "0 lost, 0 visible");
  } finally {
    await stopAll([victim!, survivor!]);
  }
}

// 3. Cloned on one Pocket replica, spoken on another at once.
{
  const store = `s3://${bucket.bucket}/pocket`;
  const pocket = await Promise.all([0, 1].map(() => startServerProcess([BUN, "src/main.ts", "serve", "--model", fixtureBundle(), "--host", "127.0.0.1", "--port", "0", "--voice-store", store], rgw.env(), 120_000)));
  try {
    const rounds = 10;
    let spoken = 0;
    const speakMs: number[] = [];
    for (let round = 0; round < rounds; round++) {
      if ((await upload(pocket[0]!.base, `fresh-${round}`)) !== 200) continue;
      const startedMs = performance.now();
      const response = await fetch(`${pocket[1]!.base}/v1/audio/speech`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input: "Hello there.", voice: `fresh-${round}`, response_format: "pcm", seed: round }) });
      const bytes = (await response.arrayBuffer()).byteLength;
      speakMs.push(performance.now() - startedMs);
      if (response.status === 200 && bytes > 0) spoken++;
    }
    row("a voice uploaded on one Pocket replica, spoken on the other right after its 200", `${spoken} of ${rounds} (request p50 ${ms(percentile(speakMs, 50))}, golden fixture bundle)`, `${rounds} of ${rounds}`);
  } finally {
    await stopAll(pocket);
  }
}

// 4. The freshness check's cost per request.
{
  const store = `s3://${bucket.bucket}/fresh`;
  const folder = mkdtempSync(join(tmpdir(), "voxedge-bench-folder-"));
  const [onS3, onFolder] = await Promise.all([serve(["--voice-store", store]), serve(["--speaker-dir", folder])]);
  try {
    for (const server of [onS3, onFolder]) for (let index = 0; index < 20; index++) await upload(server!.base, `listed-${index}`);
    const timeList = async (base: string) => {
      const times: number[] = [];
      for (let index = 0; index < REQUESTS; index++) {
        const startedMs = performance.now();
        await listed(base);
        times.push(performance.now() - startedMs);
      }
      return times;
    };
    // Interleaved, so both see the same moments of a noisy machine.
    const s3Times: number[] = [];
    const folderTimes: number[] = [];
    for (let round = 0; round < 5; round++) {
      s3Times.push(...(await timeList(onS3!.base)));
      folderTimes.push(...(await timeList(onFolder!.base)));
    }
    row("GET /v1/audio/voices, S3 store: p50 / p95", `${ms(percentile(s3Times, 50))} / ${ms(percentile(s3Times, 95))}`, "");
    row("GET /v1/audio/voices, folder store: p50 / p95", `${ms(percentile(folderTimes, 50))} / ${ms(percentile(folderTimes, 95))}`, "");
    row("freshness check added per request (p95 S3 − p95 folder)", ms(percentile(s3Times, 95) - percentile(folderTimes, 95)), "≤ 5 ms");

    const s3Store = await S3VoiceStore.open({ bucket: await rgw.newBucket("fresh-direct"), prefix: "voices", maxVoices: 100, logger: silentLogger });
    const checkTimes: number[] = [];
    for (let index = 0; index < REQUESTS * 5; index++) {
      const startedMs = performance.now();
      await s3Store.refreshName("anyone");
      checkTimes.push(performance.now() - startedMs);
    }
    s3Store.close();
    row("the check alone (conditional GET of the manifest, 304): p50 / p95", `${ms(percentile(checkTimes, 50))} / ${ms(percentile(checkTimes, 95))}`, "≤ 5 ms p95");
  } finally {
    await stopAll([onS3!, onFolder!]);
  }
}

// 5. Start-up with 50 voices stored.
{
  const store = `s3://${bucket.bucket}/startup`;
  const folder = mkdtempSync(join(tmpdir(), "voxedge-bench-startup-"));
  const folderStore = await FolderVoiceStore.open({ dir: folder, maxVoices: 1000, logger: silentLogger });
  const seeded = await serve(["--voice-store", store]);
  const samples = sine(1, 300, 24000);
  for (let index = 0; index < 50; index++) {
    await upload(seeded.base, `stored-${index}`);
    await folderStore.saveAudio({ name: `stored-${index}`, consent: "bench", mimeType: "audio/wav", fileSizeBytes: samples.byteLength + 44, samples, sampleRateHz: 24000 });
  }
  await stopAll([seeded]);
  const timeStart = async (flags: string[]) => {
    const startedMs = performance.now();
    const server = await serve(flags);
    const tookMs = performance.now() - startedMs;
    if ((await listed(server.base)).length !== 50) throw new Error("a restarted replica did not list the 50 stored voices");
    await stopAll([server]);
    return tookMs;
  };
  const s3Starts: number[] = [];
  const folderStarts: number[] = [];
  for (let run = 0; run < STARTS; run++) {
    s3Starts.push(await timeStart(["--voice-store", store]));
    folderStarts.push(await timeStart(["--speaker-dir", folder]));
  }
  const s3Median = percentile(s3Starts, 50);
  const folderMedian = percentile(folderStarts, 50);
  row(`start-up to /health/ready, 50 voices, median of ${STARTS}: S3 / folder`, `${ms(s3Median)} / ${ms(folderMedian)} (S3 ${s3Median - folderMedian >= 0 ? "+" : ""}${ms(s3Median - folderMedian)})`, "S3 ≤ folder + 1 s");
}

console.log(`\nvoxedge voice store on S3 (Ceph RGW ${rgw.endpoint}, memstore OSD), ${new Date().toISOString().slice(0, 10)}\n`);
console.log("| measured | result | goal |");
console.log("|---|---|---|");
for (const [what, measured, goal] of rows) console.log(`| ${what} | ${measured} | ${goal} |`);
process.exit(0);
