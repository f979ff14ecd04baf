/**
 * The cold tier's object store: S3 or any S3-compatible one, through the AWS SDK, which
 * takes endpoint, region and credentials as every AWS tool does (AWS_ENDPOINT_URL_S3 or
 * AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, profiles,
 * instance roles). The SDK is imported only here, and this module only with --cold-store,
 * so a server without a cold tier never loads it.
 */

export interface ObjectStore {
  /** `s3://bucket/prefix`, for messages. */
  readonly url: string;
  /** The key prefix objects are written under ('' for the bucket's root). */
  readonly prefix: string;
  /** Resolves once the store acknowledged the object. */
  put(key: string, body: Buffer, sha256Hex: string): Promise<void>;
  /** The object's bytes, or null when there is no such object. */
  get(key: string): Promise<Buffer | null>;
  delete(keys: string[]): Promise<void>;
  close(): void;
}

/** `s3://bucket/prefix` as bucket and prefix (no leading or trailing slash). */
export function parseColdStoreUrl(url: string): { bucket: string; prefix: string } {
  const match = /^s3:\/\/([^/]+)\/?(.*)$/.exec(url);
  if (!match || match[1] === '') throw new Error(`--cold-store takes s3://bucket/prefix, not ${url}`);
  return { bucket: match[1]!, prefix: match[2]!.replace(/^\/+|\/+$/g, '') };
}

/** How long one request to the store may take before it counts as failed. */
const REQUEST_TIMEOUT_MS = 15_000;
const CONNECT_TIMEOUT_MS = 3_000;

export async function openS3ObjectStore(url: string, env: NodeJS.ProcessEnv = process.env): Promise<ObjectStore> {
  const { bucket, prefix } = parseColdStoreUrl(url);
  const s3 = await import('@aws-sdk/client-s3');
  const customEndpoint = env.AWS_ENDPOINT_URL_S3 ?? env.AWS_ENDPOINT_URL;
  const region = env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
  // Read from `env` as the SDK reads process.env; with no keys there, its own chain (profiles, roles) finds them.
  const keys = env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY
    ? { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY, ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}) }
    : undefined;
  const client = new s3.S3Client({
    ...(customEndpoint === undefined ? {} : { endpoint: customEndpoint }),
    ...(region === undefined ? {} : { region }),
    ...(keys === undefined ? {} : { credentials: keys }),
    // Most S3-compatible servers (MinIO, s3rver) need path-style requests; AWS itself takes virtual hosts.
    forcePathStyle: customEndpoint !== undefined,
    // Newer SDK defaults add checksum trailers several S3-compatible servers refuse; rill checks every object itself.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    // rill retries uploads itself (with backoff); a read that fails should answer soon.
    maxAttempts: 2,
    requestHandler: { requestTimeout: REQUEST_TIMEOUT_MS, connectionTimeout: CONNECT_TIMEOUT_MS },
  });
  return {
    url,
    prefix,
    async put(key, body, sha256Hex) {
      await client.send(new s3.PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentLength: body.length, Metadata: { sha256: sha256Hex } }));
    },
    async get(key) {
      try {
        const answer = await client.send(new s3.GetObjectCommand({ Bucket: bucket, Key: key }));
        return Buffer.from(await answer.Body!.transformToByteArray());
      } catch (error) {
        if (error instanceof s3.NoSuchKey || (error as { name?: string }).name === 'NoSuchKey') return null;
        throw error;
      }
    },
    async delete(keys) {
      if (keys.length === 0) return;
      await client.send(new s3.DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys.map((Key) => ({ Key })), Quiet: true } }));
    },
    close: () => client.destroy(),
  };
}
