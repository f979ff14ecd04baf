/**
 * URL routing. `/v1/stream/{name}` is the bucket-less Durable Streams family;
 * `/{bucket}`, `/{bucket}/streams` and `/{bucket}/{stream}` are rill's own.
 */
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { bucketStreamKey, isValidBucketId, isValidStreamId, isValidV1Name, v1StreamKey } from '../protocol/ids.js';

export interface StreamAddress {
  /** Storage key. */
  key: string;
  bucket: string | null;
  /** The URL path that names the stream. */
  path: string;
}

/** Sub-resources of a stream, on both URL families. */
export const STREAM_EXTENSIONS = ['snapshot', 'retention', 'bootstrap', 'attrs', 'append-batch'] as const;
export type StreamExtension = (typeof STREAM_EXTENSIONS)[number];

export type Route =
  | { kind: 'health' }
  | { kind: 'stream-ext'; stream: StreamAddress; ext: StreamExtension; arg: string | null }
  | { kind: 'bucket'; bucket: string }
  | { kind: 'bucket-streams'; bucket: string }
  | { kind: 'stream'; stream: StreamAddress }
  | { kind: 'error'; error: ProtocolError };

/** Paths that are not bucket names. */
export const RESERVED_TOP_LEVEL = new Set(['healthz', 'metrics', 'v1']);

const invalid = (message: string): Route => ({ kind: 'error', error: protocolError('INVALID_ID', message) });
const notFound = (): Route => ({ kind: 'error', error: protocolError('NOT_FOUND', 'no such route') });

function decodeSegments(pathname: string): string[] | undefined {
  const segments = pathname.split('/').slice(1);
  // Most paths have nothing to decode; decoding every segment anyway was 3% of an append.
  if (!pathname.includes('%')) return segments;
  try {
    return segments.map((s) => decodeURIComponent(s));
  } catch {
    return undefined;
  }
}

export function route(pathname: string): Route {
  const segments = decodeSegments(pathname);
  if (segments === undefined) return invalid('the path is not valid percent-encoding');
  if (segments.length === 1 && segments[0] === 'healthz') return { kind: 'health' };
  if (segments[0] === 'v1') return routeV1(segments);
  if (segments.length === 0 || segments[0] === '') return notFound();
  const bucket = segments[0]!;
  if (RESERVED_TOP_LEVEL.has(bucket)) return notFound();
  if (!isValidBucketId(bucket)) return invalid('bucket ids are 4 to 64 characters of a-z, 0-9, _ and -');
  if (segments.length === 1) return { kind: 'bucket', bucket };
  if (segments.length === 2 && segments[1] === 'streams') return { kind: 'bucket-streams', bucket };
  const id = segments[1]!;
  if (!isValidStreamId(id)) return invalid('stream ids are 1 to 122 bytes without "/", control characters or ".."');
  const stream = { key: bucketStreamKey(bucket, id), bucket, path: `/${segments.slice(0, 2).map(encodeURIComponent).join('/')}` };
  return withExtension(stream, segments.slice(2));
}

/** `{stream}`, `{stream}/{ext}` or `{stream}/{ext}/{arg}`. */
function withExtension(stream: StreamAddress, rest: string[]): Route {
  if (rest.length === 0) return { kind: 'stream', stream };
  const ext = rest[0] as StreamExtension;
  if (!STREAM_EXTENSIONS.includes(ext) || rest.length > 2) return notFound();
  const takesArg = ext === 'snapshot' || ext === 'retention';
  if (rest.length === 2 && !takesArg) return notFound();
  return { kind: 'stream-ext', stream, ext, arg: rest[1] ?? null };
}

function routeV1(segments: string[]): Route {
  if (segments[1] !== 'stream' || segments.length < 3) return notFound();
  const name = segments[2]!;
  if (!isValidV1Name(name)) return invalid('stream names are 1 to 122 bytes without "/", control characters or ".."');
  const stream = { key: v1StreamKey(name), bucket: null, path: `/v1/stream/${encodeURIComponent(name)}` };
  return withExtension(stream, segments.slice(3));
}

/** Resolves a stream reference from a header: a path or an absolute URL. */
export function resolveStreamReference(value: string): StreamAddress | ProtocolError {
  let pathname = value.trim();
  if (/^https?:\/\//i.test(pathname)) {
    try {
      pathname = new URL(pathname).pathname;
    } catch {
      return protocolError('INVALID_HEADER', 'the stream reference is not a valid URL');
    }
  }
  if (!pathname.startsWith('/')) return protocolError('INVALID_HEADER', 'a stream reference must be a path such as /v1/stream/{name}');
  const resolved = route(pathname);
  if (resolved.kind === 'stream') return resolved.stream;
  return resolved.kind === 'error' ? resolved.error : protocolError('INVALID_HEADER', 'the reference does not name a stream');
}
