/** Opens the voice store a location names: `s3://BUCKET/PREFIX` a bucket (s3-store.ts), anything else a speaker folder (folder-store.ts). */
import type { Logger } from "../log/logger.ts";
import { isS3Url, parseS3Url, S3Bucket, s3SettingsFromEnv } from "../storage/s3.ts";
import { FolderVoiceStore } from "./folder-store.ts";
import { S3VoiceStore } from "./s3-store.ts";
import type { VoiceStore } from "./store.ts";

export interface OpenVoiceStoreOptions {
  maxVoices: number;
  logger: Logger;
  /** Where the S3 settings are read from (AWS_ACCESS_KEY_ID, …): the process's environment. */
  env: Record<string, string | undefined>;
}

/**
 * Throws, for the start-up error: VoiceStoreFolderError (a folder that cannot be used), S3ConfigError (a
 * bad s3:// URL or missing credentials), VoiceStoreBucketError (a bucket that cannot be used).
 */
export async function openVoiceStoreAt(location: string, options: OpenVoiceStoreOptions): Promise<VoiceStore> {
  if (!isS3Url(location)) return FolderVoiceStore.open({ dir: location, maxVoices: options.maxVoices, logger: options.logger });
  const { bucket, prefix } = parseS3Url(location);
  return S3VoiceStore.open({ bucket: new S3Bucket(s3SettingsFromEnv(options.env), bucket), prefix, maxVoices: options.maxVoices, logger: options.logger });
}
