/**
 * URL routing. `/v1/stream/{name}` is the bucket-less Durable Streams family (names may
 * hold `/`; its extensions are `{name}?ext=...`); `/{bucket}`, `/{bucket}/streams`,
 * `/{bucket}/{stream}` and the path-affinity form `/{bucket}/{affinity_key}/{stream}`
 * are rill's own. The control routes
 * `/v1/stream/__ds/...` and `/{bucket}/__ds/...` (subscriptions and their signing keys)
 * are routed before streams.
 */
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { EXTENSION_PARAM } from '../protocol/extensions.js';
import {
  affinityKeyProblem,
  affinityStreamId,
  affinityStreamProblem,
  bucketScope,
  bucketStreamKey,
  CONTROL_SEGMENT,
  isStreamExtension,
  isValidBucketId,
  isValidSubscriptionId,
  KEYED_STATE_SEGMENT,
  MAX_SUBSCRIPTION_ID_BYTES,
  scopedPathProblem,
  STREAM_EXTENSIONS,
  streamIdProblem,
  TRANSACTION_SEGMENT,
  V1_SCOPE,
  v1SegmentsProblem,
  v1StreamKey,
  type StreamExtension,
} from '../protocol/ids.js';

export interface StreamAddress {
  /** Storage key. */
  key: string;
  bucket: string | null;
  /** The stream's name in its bucket (or in the /v1 family). */
  id: string;
  /** The URL path that names the stream. */
  path: string;
  /** Named through the path-affinity form `/{bucket}/{affinity_key}/{stream}` (core/extensions.ts). */
  affinity: boolean;
}

/** Operator routes (http/admin.ts): `GET /` lists buckets; the others are reserved top-level names. */
export type AdminRoute = 'buckets' | 'readyz' | 'metrics' | 'stats' | 'usage';

export type Route =
  | { kind: 'health' }
  | { kind: 'admin'; name: AdminRoute }
  | { kind: 'stream-ext'; stream: StreamAddress; ext: StreamExtension; arg: string | null }
  | { kind: 'bucket'; bucket: string }
  | { kind: 'bucket-streams'; bucket: string }
  | { kind: 'stream'; stream: StreamAddress }
  /** `POST /{bucket}/{affinity_key}/$transaction`; `path` is that URL path, encoded. */
  | { kind: 'transaction'; bucket: string; affinityKey: string; path: string }
  /** `{root}/__ds/...`: `scope` is `v1` or `b/{bucket}`, `rootPath` is `/v1/stream` or `/{bucket}`. */
  | { kind: 'subscriptions'; scope: string; rootPath: string; target: SubscriptionTarget }
  /** `/v1/auth/revocations`: revoked tokens (server-wide, admin); under `/v1`, which no bucket can shadow. */
  | { kind: 'revocations' }
  | { kind: 'error'; error: ProtocolError };

/** What a control route acts on, below `{root}/__ds/`. */
export type SubscriptionTarget =
  | { what: 'jwks' } // jwks.json
  | { what: 'rotate-key' } // jwks/rotate: a new signing key (server-wide, admin)
  | { what: 'list' } // subscriptions
  | { what: 'subscription'; id: string } // subscriptions/{id}
  | { what: 'streams'; id: string } // subscriptions/{id}/streams
  /** subscriptions/{id}/streams/{path}: the path percent-decoded, its `/` sent as `%2F` or as separate segments. */
  | { what: 'stream'; id: string; path: string }
  | { what: SubscriptionAction; id: string }; // subscriptions/{id}/{action}

export type SubscriptionAction = 'callback' | 'claim' | 'ack' | 'release';
const SUBSCRIPTION_ACTIONS: ReadonlySet<string> = new Set<SubscriptionAction>(['callback', 'claim', 'ack', 'release']);

/** Paths that are not bucket names. */
export const RESERVED_TOP_LEVEL = new Set(['healthz', 'readyz', 'metrics', 'stats', 'usage', 'v1', 'console']);

// A Map, not an object: a path segment such as `constructor` must not find a prototype's member.
const ADMIN_ROUTES = new Map<string, AdminRoute>([
  ['', 'buckets'],
  ['readyz', 'readyz'],
  ['metrics', 'metrics'],
  ['stats', 'stats'],
  ['usage', 'usage'],
]);

const V1_ROOT = '/v1/stream';

const invalid = (message: string): Route => ({ kind: 'error', error: protocolError('INVALID_ID', message) });
const notFound = (): Route => ({ kind: 'error', error: protocolError('NOT_FOUND', 'no such route') });

/**
 * `pathname.split('/').slice(1)`, by indexOf: V8's split of a short path took about
 * 2,500 instructions an append under callgrind (its runtime call and result cache), this
 * a fifth of that.
 */
export function segmentsAfterFirst(pathname: string): string[] {
  const segments: string[] = [];
  let start = pathname.indexOf('/') + 1;
  if (start === 0) return segments;
  for (let end = pathname.indexOf('/', start); end >= 0; end = pathname.indexOf('/', start)) {
    segments.push(pathname.slice(start, end));
    start = end + 1;
  }
  segments.push(pathname.slice(start));
  return segments;
}

/** The characters encodeURIComponent leaves as they are: A-Z a-z 0-9 - _ . ! ~ * ' ( ). */
const UNRESERVED = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!~*'()") UNRESERVED[c.charCodeAt(0)] = 1;

/**
 * `encodeURIComponent(segment)`, without the call for a segment it would leave as it is
 * (most names): the call goes through V8's runtime, about 600 instructions a short name
 * under callgrind, and routing an append took about 340 fewer with this loop.
 */
export function encodeSegment(segment: string): string {
  for (let i = 0; i < segment.length; i++) {
    const code = segment.charCodeAt(i);
    if (code >= 128 || UNRESERVED[code] === 0) return encodeURIComponent(segment);
  }
  return segment;
}

function decodeSegments(pathname: string): string[] | undefined {
  const segments = segmentsAfterFirst(pathname);
  // Most paths have nothing to decode; decoding every segment anyway was 3% of an append.
  if (!pathname.includes('%')) return segments;
  try {
    return segments.map((s) => decodeURIComponent(s));
  } catch {
    return undefined;
  }
}

/** The route of a request: `search` (the query, without `?`) only matters in the `/v1/stream` family. */
export function route(pathname: string, search = ''): Route {
  const segments = decodeSegments(pathname);
  if (segments === undefined) return invalid('the path is not valid percent-encoding');
  if (segments.length === 1 && segments[0] === 'healthz') return { kind: 'health' };
  const admin = segments.length === 1 ? ADMIN_ROUTES.get(segments[0]!) : undefined;
  if (admin) return { kind: 'admin', name: admin };
  if (segments[0] === 'v1') return routeV1(segments, search);
  if (segments.length === 0 || segments[0] === '') return notFound();
  const bucket = segments[0]!;
  if (RESERVED_TOP_LEVEL.has(bucket)) return notFound();
  if (!isValidBucketId(bucket)) return invalid('bucket ids are 4 to 64 characters of a-z, 0-9, _ and -');
  if (segments.length === 1) return { kind: 'bucket', bucket };
  if (segments.length === 2 && segments[1] === 'streams') return { kind: 'bucket-streams', bucket };
  if (segments[1] === CONTROL_SEGMENT) return routeControl(bucketScope(bucket), `/${bucket}`, segments.slice(2));
  // A keyword third segment keeps its meaning from before path affinity: a sub-resource of `/{bucket}/{stream}`.
  if (segments.length === 2 || isStreamExtension(segments[2]!)) return routeBucketStream(bucket, segments);
  return routeAffinity(bucket, segments);
}

/** `/{bucket}/{stream}[/{ext}[/{arg}]]`. */
function routeBucketStream(bucket: string, segments: string[]): Route {
  const id = segments[1]!;
  const problem = streamIdProblem(id);
  if (problem !== null) return invalid(problem);
  const stream = { key: bucketStreamKey(bucket, id), bucket, id, path: `/${bucket}/${encodeSegment(id)}`, affinity: false };
  return withExtension(stream, segments.slice(2)) ?? notFound();
}

/**
 * `/{bucket}/{affinity_key}/$transaction`, or the affinity stream
 * `/{bucket}/{affinity_key}/{stream}[/{ext}[/{arg}]]`, whose id in its bucket is
 * `{affinity_key}/{stream}`. The third segment is not an extension keyword: route() gives
 * those to routeBucketStream.
 */
function routeAffinity(bucket: string, segments: string[]): Route {
  const [, affinityKey, local] = segments as [string, string, string];
  // An empty last segment (`/{bucket}/{stream}/`) stays what it was before path affinity: no route.
  if (local === '' && segments.length === 3) return notFound();
  if (local === TRANSACTION_SEGMENT) {
    const problem = affinityKeyProblem(affinityKey);
    if (problem !== null) return invalid(problem);
    if (segments.length > 3) return notFound();
    return { kind: 'transaction', bucket, affinityKey, path: `/${bucket}/${encodeURIComponent(affinityKey)}/${TRANSACTION_SEGMENT}` };
  }
  if (local === KEYED_STATE_SEGMENT) return invalid(`"${KEYED_STATE_SEGMENT}" is reserved under an affinity key and not served by rill`);
  const problem = affinityStreamProblem(bucket, affinityKey, local);
  if (problem !== null) return invalid(problem);
  const id = affinityStreamId(affinityKey, local);
  const path = `/${bucket}/${encodeSegment(affinityKey)}/${encodeSegment(local)}`;
  const stream = { key: bucketStreamKey(bucket, id), bucket, id, path, affinity: true };
  return withExtension(stream, segments.slice(3)) ?? notFound();
}

const CONTROL_TEMPLATES: Readonly<Record<SubscriptionTarget['what'], string>> = {
  jwks: 'jwks.json',
  'rotate-key': 'jwks/rotate',
  list: 'subscriptions',
  subscription: 'subscriptions/{id}',
  streams: 'subscriptions/{id}/streams',
  stream: 'subscriptions/{id}/streams/{path}',
  callback: 'subscriptions/{id}/callback',
  claim: 'subscriptions/{id}/claim',
  ack: 'subscriptions/{id}/ack',
  release: 'subscriptions/{id}/release',
};

/**
 * The route's template for logs and metrics: names are left out, so the label set stays
 * small whatever the streams are called.
 */
export function routeTemplate(target: Route): string {
  switch (target.kind) {
    case 'health':
      return '/healthz';
    case 'admin':
      return target.name === 'buckets' ? '/' : `/${target.name}`;
    case 'bucket':
      return '/{bucket}';
    case 'bucket-streams':
      return '/{bucket}/streams';
    case 'stream':
      return streamTemplate(target.stream);
    case 'stream-ext': {
      const extension = `${target.ext}${target.arg === null ? '' : '/{offset}'}`;
      return target.stream.bucket === null ? `${streamTemplate(target.stream)}?${EXTENSION_PARAM}=${extension}` : `${streamTemplate(target.stream)}/${extension}`;
    }
    case 'transaction':
      return `/{bucket}/{affinity_key}/${TRANSACTION_SEGMENT}`;
    case 'subscriptions':
      return `${target.scope === V1_SCOPE ? V1_ROOT : '/{bucket}'}/${CONTROL_SEGMENT}/${CONTROL_TEMPLATES[target.target.what]}`;
    case 'revocations':
      return '/v1/auth/revocations';
    case 'error':
      return 'unrouted';
  }
}

function streamTemplate(stream: StreamAddress): string {
  if (stream.bucket === null) return '/v1/stream/{name}';
  return stream.affinity ? '/{bucket}/{affinity_key}/{stream}' : '/{bucket}/{stream}';
}

/** `{stream}`, `{stream}/{ext}` or `{stream}/{ext}/{arg}`; undefined when `rest` is none of these. */
function withExtension(stream: StreamAddress, rest: string[]): Route | undefined {
  if (rest.length === 0) return { kind: 'stream', stream };
  const ext = rest[0]!;
  if (!isStreamExtension(ext) || rest.length > 2) return undefined;
  if (rest.length === 2 && ext !== 'snapshot' && ext !== 'retention') return undefined;
  return { kind: 'stream-ext', stream, ext, arg: rest[1] ?? null };
}

/**
 * `/v1/stream/{name}[?ext={ext}[/{arg}]]`: every segment is the name's, whatever it is
 * spelled like (`a/snapshot` is a stream), and the `ext` query parameter addresses an
 * extension. A name is spelled one way: `/` inside a segment (`%2F`) is refused.
 */
function routeV1(segments: string[], search: string): Route {
  if (segments.length === 3 && segments[1] === 'auth' && segments[2] === 'revocations') return { kind: 'revocations' };
  if (segments[1] !== 'stream' || segments.length < 3) return notFound();
  if (segments[2] === CONTROL_SEGMENT) return routeControl(V1_SCOPE, V1_ROOT, segments.slice(3));
  // The common one-segment name skips slice, join and map: they doubled the cost of routing an append.
  const single = segments.length === 3;
  const nameSegments = single ? [segments[2]!] : segments.slice(2);
  const name = single ? segments[2]! : nameSegments.join('/');
  const problem = v1SegmentsProblem(nameSegments, name);
  if (problem !== null) return invalid(problem);
  const encoded = single ? encodeSegment(name) : nameSegments.map(encodeSegment).join('/');
  const stream = { key: v1StreamKey(name), bucket: null, id: name, path: `${V1_ROOT}/${encoded}`, affinity: false };
  const extension = extensionParam(search);
  if (extension === null) return { kind: 'stream', stream };
  if (typeof extension !== 'string') return extension;
  return withExtension(stream, extension.split('/')) ?? badExtension(extension);
}

/** The `ext` parameter of a query: null when absent, a refusal when given twice. */
function extensionParam(search: string): string | null | Route {
  // Most requests carry no `ext`: they skip parsing the query here.
  if (!search.includes(`${EXTENSION_PARAM}=`)) return null;
  const values = new URLSearchParams(search).getAll(EXTENSION_PARAM);
  if (values.length === 0) return null;
  if (values.length > 1) return { kind: 'error', error: protocolError('INVALID_QUERY', `query parameter "${EXTENSION_PARAM}" is given more than once`) };
  return values[0]!;
}

function badExtension(value: string): Route {
  const message = `"${value}" is no stream extension: ${EXTENSION_PARAM} is one of ${STREAM_EXTENSIONS.join(', ')}, and only snapshot and retention take an offset (snapshot/{offset})`;
  return { kind: 'error', error: protocolError('INVALID_QUERY', message) };
}

const control = (scope: string, rootPath: string, target: SubscriptionTarget): Route => ({ kind: 'subscriptions', scope, rootPath, target });

/** `{root}/__ds/` + `rest`: the signing keys, or a subscription and its sub-resources. Anything else is 404. */
function routeControl(scope: string, rootPath: string, rest: string[]): Route {
  if (rest.length === 1 && rest[0] === 'jwks.json') return control(scope, rootPath, { what: 'jwks' });
  if (rest.length === 2 && rest[0] === 'jwks' && rest[1] === 'rotate') return control(scope, rootPath, { what: 'rotate-key' });
  if (rest[0] !== 'subscriptions') return notFound();
  if (rest.length === 1) return control(scope, rootPath, { what: 'list' });
  const id = rest[1]!;
  if (!isValidSubscriptionId(id)) return invalid(`subscription ids are 1 to ${MAX_SUBSCRIPTION_ID_BYTES} characters of A-Z, a-z, 0-9, ".", "_", "~", ":" and "-"`);
  if (rest.length === 2) return control(scope, rootPath, { what: 'subscription', id });
  const sub = rest[2]!;
  if (sub === 'streams') {
    if (rest.length === 3) return control(scope, rootPath, { what: 'streams', id });
    const path = rest.slice(3).join('/');
    const problem = scopedPathProblem(scope, path);
    return problem === null ? control(scope, rootPath, { what: 'stream', id, path }) : invalid(problem);
  }
  if (rest.length === 3 && SUBSCRIPTION_ACTIONS.has(sub)) return control(scope, rootPath, { what: sub as SubscriptionAction, id });
  return notFound();
}

/** Resolves a stream reference from a header: a path or an absolute URL (its query kept: `?ext=` names no stream). */
export function resolveStreamReference(value: string): StreamAddress | ProtocolError {
  let reference = value.trim();
  if (/^https?:\/\//i.test(reference)) {
    try {
      const url = new URL(reference);
      reference = url.pathname + url.search;
    } catch {
      return protocolError('INVALID_HEADER', 'the stream reference is not a valid URL');
    }
  }
  if (!reference.startsWith('/')) return protocolError('INVALID_HEADER', 'a stream reference must be a path such as /v1/stream/{name}');
  const q = reference.indexOf('?');
  const resolved = q < 0 ? route(reference) : route(reference.slice(0, q), reference.slice(q + 1));
  if (resolved.kind === 'stream') return resolved.stream;
  return resolved.kind === 'error' ? resolved.error : protocolError('INVALID_HEADER', 'the reference does not name a stream');
}
