/**
 * The `rill-cold` target's settings: rill on SQLite with `--cold-store` on an s3rver the
 * bench starts for it (bench/servers/s3.ts, stopped with it). The hot window and segments
 * are small, so that a stream of ten windows is written in seconds; the uploader passes
 * often, so that the hot store is measured after uploads caught up without long waits.
 */

/** A stream's last this many bytes stay hot (`--cold-hot-bytes`). */
export const COLD_HOT_BYTES = 1024 * 1024;
/** Each object of sealed history (`--cold-segment-bytes`). */
export const COLD_SEGMENT_BYTES = 256 * 1024;
/** Between two uploader passes (`--cold-upload-interval`). */
export const COLD_UPLOAD_INTERVAL_MS = 100;
/**
 * The read cache at its least (two segments): a catch-up of ten windows then fetches its
 * cold segments from the object store on every read, which is what the bench measures,
 * and not a cache that holds the whole stream.
 */
export const COLD_CACHE_BYTES = 2 * COLD_SEGMENT_BYTES;
export const COLD_BUCKET = 'rill-bench';

/** rill's arguments for the cold tier (age 0: the window is by bytes only, so the run does not wait on a clock). */
export function coldArgs(): string[] {
  return [
    '--cold-store', `s3://${COLD_BUCKET}/bench`,
    '--cold-hot-bytes', String(COLD_HOT_BYTES),
    '--cold-hot-age', '0ms',
    '--cold-segment-bytes', String(COLD_SEGMENT_BYTES),
    '--cold-cache-bytes', String(COLD_CACHE_BYTES),
    '--cold-upload-interval', `${COLD_UPLOAD_INTERVAL_MS}ms`,
  ];
}

/** The variables the AWS SDK in rill reads: s3rver's default keys, and its endpoint. */
export function s3Env(endpoint: string): Record<string, string> {
  return { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1', AWS_ENDPOINT_URL_S3: endpoint };
}
