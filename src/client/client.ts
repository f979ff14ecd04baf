/**
 * The entry point: a server URL plus transport settings, handing out stream and bucket
 * handles. Paths name streams as `bucket/stream` or `v1/stream/name`.
 */
import { extensionUrl } from '../protocol/extensions.js';
import { errorFromResponse, RillError } from './errors.js';
import { Transport, type TransportOptions } from './http.js';
import { StreamHandle, type RetentionPolicyOption, type StreamHandleOptions } from './stream.js';
import { Subscriptions } from './subscriptions.js';
import { sendTransaction, type TransactionAck, type TransactionOperation, type TransactionOptions } from './transactions.js';

export interface ClientOptions extends TransportOptions {
  /** The server's base URL, such as http://127.0.0.1:4437. */
  url: string;
  /** Remember and send back Stream-Incarnation on every stream handle (default true). */
  trackIncarnation?: boolean;
}

/** A bucket's limits: streams, subscriptions and the bytes its streams retain. */
export interface BucketLimitsView {
  maxStreams: number | null;
  maxSubscriptions: number | null;
  maxBytes: number | null;
}

export interface BucketInfo {
  id: string;
  streamCount: number;
  createdAt: string;
  // The members below are given by `info()` and `configure()`, not by the bucket listing.
  /** Bytes the bucket's streams hold, as its byte limit counts them. */
  retainedBytes?: number;
  /** What the bucket may hold (null: no limit). */
  limits?: BucketLimitsView;
  /** Its streams are readable without a token. */
  publicRead?: boolean;
  /** The bucket's own limits (null: the server-wide one; 0: none). */
  overrides?: BucketLimitsView;
  /** The retention policy of its streams created without one (null: none). */
  retention?: RetentionPolicyOption | null;
}

/** A change of a bucket's settings (admin on `*`): only the members named change. */
export interface BucketSettingsChange {
  publicRead?: boolean;
  /** A number replaces the server-wide limit for this bucket (0: none); null gives it back. */
  limits?: Partial<BucketLimitsView>;
  /** The default retention policy of its streams that have none of their own; null removes it. */
  retention?: RetentionPolicyOption | null;
}

/** One row of the usage record (`GET /usage`), per bucket and token subject, since the node started. */
export interface UsageRow {
  bucket: string;
  subject: string;
  appends: number;
  bytesIn: number;
  bytesOut: number;
  liveReaders: number;
}

export interface UsagePage {
  rows: UsageRow[];
  /** Pass as `after` to get the next page; null on the last page. */
  next: string | null;
  /** Keys the node keeps before folding the least recently active into `(other)`. */
  maxKeys: number;
  /** What the node counted since it started, over every row (folded ones included). */
  totals: { appends: number; bytesIn: number; bytesOut: number };
}

export interface StreamListing {
  streams: string[];
  /** Pass as `after` to get the next page; null on the last page. */
  next: string | null;
}

/** A listed stream with what its state holds (`GET /{bucket}/streams?details=true`). */
export interface StreamDetails {
  id: string;
  contentType: string;
  /** The tail offset (20 digits). */
  tail: string;
  /** Bytes and messages held, as `{stream}/stats` counts them. */
  bytes: number;
  messages: number;
  closed: boolean;
  createdAt: string;
}

export interface StreamDetailsListing {
  streams: StreamDetails[];
  next: string | null;
}

export interface BucketListing {
  buckets: BucketInfo[];
  /** Pass as `after` to get the next page; null on the last page. */
  next: string | null;
}

/** What `GET /stats` answers: the server's totals. */
export interface ServerStats {
  buckets: number;
  streams: number;
  producers: number;
  /** Bytes held by every stream (a fork's inherited history counted in the fork too). */
  bytes: number;
  /** Messages held: lines of JSON streams, appends of others (kept as they are written, never counted on request). */
  messages: number;
  liveReaders: { sse: number; longPoll: number };
  /** The storage engine of the node answering. */
  store: 'sqlite' | 'postgres' | 'memory';
  /** When the node answering began to serve (RFC 3339). */
  startedAt: string | null;
}

/** What `GET {stream}/stats` answers. */
export interface StreamStats {
  /** The tail and the earliest offset still held, as every offset is written (20 digits). */
  tail: string;
  earliestOffset: string;
  /** Bytes held, from the earliest offset to the tail. */
  bytes: number;
  /** Messages held: lines of a JSON stream, appends of another (kept as they are written, never counted on request). */
  messages: number;
  producers: number;
  /** Live readers waiting on the stream now. */
  liveReaders: number;
  closed: boolean;
  /** Present when the server has a cold tier (`--cold-store`): where the stream's history lies. */
  cold?: StreamColdStats;
}

/**
 * A stream's own history in object storage: offsets `[start, end)` (equal when none of its
 * retained history is there), read from the hot store from `end` to the tail. A fork's
 * inherited history is its source's.
 */
export interface StreamColdStats {
  start: string;
  end: string;
  /** Segment objects holding that range. */
  segments: number;
  /** Stream bytes in the range, and the objects' size in the store. */
  bytes: number;
  objectBytes: number;
}

/** A producer record of a stream (`GET {stream}/producers`). */
export interface ProducerInfo {
  id: string;
  epoch: number;
  /** The sequence number of its last accepted append in its epoch. */
  lastSeq: number;
  /** When it last wrote (ISO 8601). */
  lastWriteAt: string;
}

export interface ProducerPage {
  producers: ProducerInfo[];
  /** Pass as `after` for the next page; null on the last one. */
  next: string | null;
}

/** A revocation in force: tokens with this `jti`, or of this subject, are refused until `until` (RFC 3339). */
export type Revocation = ({ jti: string } | { sub: string }) & { until: string };

export interface ListOptions {
  prefix?: string;
  after?: string;
  /** 1 to 1000 per page. */
  limit?: number;
  signal?: AbortSignal;
}

function encodePath(path: string): string {
  return path
    .split('/')
    .filter((segment) => segment.length > 0)
    .map((segment) => encodeURIComponent(segment))
    .join('/');
}

/** A relative stream path: a bucket and at least one segment more, or `v1/stream/` and a name. */
function checkStreamPath(path: string): void {
  const segments = path.split('/').filter((segment) => segment.length > 0);
  const family = segments[0] === 'v1' && segments[1] === 'stream';
  if (segments.length >= (family ? 3 : 2)) return;
  const name = segments.join('/');
  const message = family
    ? `${path} names the /v1/stream family, not a stream: give a name after it (v1/stream/NAME)`
    : `${JSON.stringify(path)} names a bucket, not a stream: a stream path is bucket/stream (client.bucket('${name}').stream(NAME)) or v1/stream/NAME`;
  throw new RillError({ code: 'INVALID_ID', message });
}

export class RillClient {
  readonly baseUrl: string;
  readonly transport: Transport;
  /** @internal */ private readonly trackIncarnation: boolean;

  constructor(options: ClientOptions) {
    this.baseUrl = options.url.replace(/\/+$/, '');
    this.transport = new Transport(options);
    this.trackIncarnation = options.trackIncarnation ?? true;
  }

  /** The URL of a path such as `bucket/stream`, `v1/stream/name`, or an absolute URL. */
  urlOf(path: string): string {
    if (/^https?:\/\//i.test(path)) return path;
    return `${this.baseUrl}/${encodePath(path)}`;
  }

  /**
   * A handle on the stream at `path` (`bucket/stream` or `v1/stream/name`, or an absolute
   * URL, taken as given). A relative path that names no stream is refused (INVALID_ID):
   * `run-1` alone is a bucket, and a create would make a bucket, not a stream.
   */
  stream(path: string, options: StreamHandleOptions = {}): StreamHandle {
    if (!/^https?:\/\//i.test(path)) checkStreamPath(path);
    return new StreamHandle(this.urlOf(path), this.transport, { trackIncarnation: this.trackIncarnation, ...options });
  }

  bucket(id: string): BucketHandle {
    return new BucketHandle(this, id);
  }

  /** The subscriptions of the `/v1/stream` family; their paths are stream names (`events/abc`). */
  subscriptions(): Subscriptions {
    return new Subscriptions(this.transport, `${this.baseUrl}/v1/stream`, (path) => this.stream(`v1/stream/${path}`));
  }

  /** One page of the server's buckets in id order, each with its stream count (`GET /`). */
  async listBuckets(options: Omit<ListOptions, 'prefix'> = {}): Promise<BucketListing> {
    const params = new URLSearchParams();
    if (options.after !== undefined) params.set('after', options.after);
    if (options.limit !== undefined) params.set('limit', String(options.limit));
    const query = params.toString();
    const body = await this.getJson<{ buckets: BucketInfo[]; next: string | null }>(`${this.baseUrl}/${query ? `?${query}` : ''}`, options.signal);
    return { buckets: body.buckets, next: body.next ?? null };
  }

  /** Every bucket, page by page. */
  buckets(options: Omit<ListOptions, 'prefix' | 'after'> = {}): AsyncGenerator<BucketInfo> {
    return everyPage(async (after) => {
      const page = await this.listBuckets({ ...options, ...(after === undefined ? {} : { after }) });
      return { items: page.buckets, next: page.next };
    });
  }

  /**
   * One page of the usage record of the node answering (admin on `*`), by bucket then
   * subject; `bucket` keeps one bucket's rows.
   */
  usage(options: { bucket?: string; after?: string; limit?: number; signal?: AbortSignal } = {}): Promise<UsagePage> {
    const params = new URLSearchParams();
    if (options.bucket !== undefined) params.set('bucket', options.bucket);
    if (options.after !== undefined) params.set('after', options.after);
    if (options.limit !== undefined) params.set('limit', String(options.limit));
    const query = params.toString();
    return this.getJson<UsagePage>(`${this.baseUrl}/usage${query ? `?${query}` : ''}`, options.signal);
  }

  /** The server's totals (`GET /stats`). */
  stats(options: { signal?: AbortSignal } = {}): Promise<ServerStats> {
    return this.getJson<ServerStats>(`${this.baseUrl}/stats`, options.signal);
  }

  /** One stream's figures (`GET {stream}/stats`). */
  streamStats(path: string, options: { signal?: AbortSignal } = {}): Promise<StreamStats> {
    return this.getJson<StreamStats>(extensionUrl(this.urlOf(path), 'stats'), options.signal);
  }

  /** One page of a stream's producer records, in id order (`GET {stream}/producers`). */
  streamProducers(path: string, options: { after?: string; limit?: number; signal?: AbortSignal } = {}): Promise<ProducerPage> {
    const params = new URLSearchParams();
    if (options.after !== undefined) params.set('after', options.after);
    if (options.limit !== undefined) params.set('limit', String(options.limit));
    return this.getJson<ProducerPage>(extensionUrl(this.urlOf(path), 'producers', params.toString()), options.signal);
  }

  /**
   * Revokes tokens (admin on `*`): one by its `jti`, or every token of a subject, until
   * `until` (default: the server's --auth-max-ttl from now, outliving every token it accepts).
   */
  async revoke(target: { jti: string } | { sub: string }, options: { until?: Date; signal?: AbortSignal } = {}): Promise<Revocation> {
    const body = JSON.stringify({ ...target, ...(options.until ? { until: options.until.toISOString() } : {}) });
    const res = await this.transport.request(`${this.baseUrl}/v1/auth/revocations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: options.signal });
    if (res.status !== 201) throw await errorFromResponse(res.response);
    return parseJson<Revocation>(res.body);
  }

  /** The revocations in force (admin on `*`). */
  async revocations(options: { signal?: AbortSignal } = {}): Promise<Revocation[]> {
    return (await this.getJson<{ revocations: Revocation[] }>(`${this.baseUrl}/v1/auth/revocations`, options.signal)).revocations;
  }

  private async getJson<T>(url: string, signal?: AbortSignal): Promise<T> {
    const res = await this.transport.request(url, { method: 'GET', signal });
    if (res.status !== 200) throw await errorFromResponse(res.response);
    return parseJson<T>(res.body);
  }
}

export class BucketHandle {
  readonly url: string;

  constructor(
    /** @internal */ private readonly client: RillClient,
    readonly id: string,
  ) {
    this.url = client.urlOf(id);
  }

  /** Creates the bucket; `created` is false when it already existed. */
  async create(options: { signal?: AbortSignal } = {}): Promise<{ created: boolean }> {
    const res = await this.client.transport.request(this.url, { method: 'PUT', signal: options.signal });
    if (res.status !== 201 && res.status !== 200) throw await errorFromResponse(res.response);
    return { created: res.status === 201 };
  }

  async info(options: { signal?: AbortSignal } = {}): Promise<BucketInfo> {
    const res = await this.client.transport.request(this.url, { method: 'GET', signal: options.signal });
    if (res.status !== 200) throw await errorFromResponse(res.response);
    return parseJson<BucketInfo>(res.body);
  }

  /**
   * Changes the bucket's settings (`PATCH /{bucket}`, admin on `*`): public reads and its
   * own limits. Answers the bucket as `info()` does.
   */
  async configure(change: BucketSettingsChange, options: { signal?: AbortSignal } = {}): Promise<BucketInfo> {
    const body = JSON.stringify(change);
    const res = await this.client.transport.request(this.url, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body, signal: options.signal });
    if (res.status !== 200) throw await errorFromResponse(res.response);
    return parseJson<BucketInfo>(res.body);
  }

  /** Deletes the bucket; the server refuses (BUCKET_NOT_EMPTY) while it holds streams. */
  async delete(options: { signal?: AbortSignal } = {}): Promise<void> {
    const res = await this.client.transport.request(this.url, { method: 'DELETE', signal: options.signal });
    if (res.status !== 204 && res.status !== 200) throw await errorFromResponse(res.response);
  }

  /** One page of the bucket's stream ids, sorted. */
  async list(options: ListOptions = {}): Promise<StreamListing> {
    const body = await this.listPage<string>(options, false);
    return { streams: body.streams, next: body.next ?? null };
  }

  /** One page of the bucket's streams, each with its content type, tail, bytes and messages (`?details=true`). */
  async listDetails(options: ListOptions = {}): Promise<StreamDetailsListing> {
    const body = await this.listPage<StreamDetails>(options, true);
    return { streams: body.streams, next: body.next ?? null };
  }

  private async listPage<T>(options: ListOptions, details: boolean): Promise<{ streams: T[]; next: string | null }> {
    const params = new URLSearchParams();
    if (options.prefix !== undefined) params.set('prefix', options.prefix);
    if (options.after !== undefined) params.set('after', options.after);
    if (options.limit !== undefined) params.set('limit', String(options.limit));
    if (details) params.set('details', 'true');
    const query = params.toString();
    const url = `${this.url}/streams${query ? `?${query}` : ''}`;
    const res = await this.client.transport.request(url, { method: 'GET', signal: options.signal });
    if (res.status !== 200) throw await errorFromResponse(res.response);
    return parseJson<{ streams: T[]; next: string | null }>(res.body);
  }

  /** Every stream id of the bucket, page by page. */
  streams(options: Omit<ListOptions, 'after'> = {}): AsyncGenerator<string> {
    return everyPage(async (after) => {
      const page = await this.list({ ...options, ...(after === undefined ? {} : { after }) });
      return { items: page.streams, next: page.next };
    });
  }

  stream(id: string, options: StreamHandleOptions = {}): StreamHandle {
    return this.client.stream(`${this.id}/${id}`, options);
  }

  /**
   * A handle on the stream `name` under `affinityKey` (`/{bucket}/{affinity_key}/{stream}`,
   * path affinity): every stream operation works on it, and group transactions of the key
   * can append to it. Each part is sent as one path segment, so a `/` in either is the
   * server's to refuse rather than a deeper path.
   */
  affinityStream(affinityKey: string, name: string, options: StreamHandleOptions = {}): StreamHandle {
    return this.client.stream(`${this.url}/${encodeURIComponent(affinityKey)}/${encodeURIComponent(name)}`, options);
  }

  /**
   * Appends to several streams of `affinityKey` together or not at all (`POST
   * /{bucket}/{affinity_key}/$transaction`); answers one acknowledgement per operation, in
   * order. A refusal is the error a plain append would get, with `operation` (the index of
   * the operation refused); a server without transactions gives `TransactionsNotSupportedError`.
   */
  transaction(affinityKey: string, operations: readonly TransactionOperation[], options: TransactionOptions = {}): Promise<TransactionAck[]> {
    return sendTransaction(this.client.transport, `${this.url}/${encodeURIComponent(affinityKey)}/$transaction`, operations, options);
  }

  /** The bucket's subscriptions; their paths are the bucket's stream ids. */
  subscriptions(): Subscriptions {
    return new Subscriptions(this.client.transport, this.url, (path) => this.stream(path));
  }
}

/** Every item of a paged listing: each page asked for after the last one's `next`, until a page has none. */
async function* everyPage<T>(page: (after: string | undefined) => Promise<{ items: T[]; next: string | null }>): AsyncGenerator<T> {
  let after: string | undefined;
  for (;;) {
    const { items, next } = await page(after);
    yield* items;
    if (next === null || items.length === 0) return;
    after = next;
  }
}

function parseJson<T>(body: Uint8Array): T {
  try {
    return JSON.parse(new TextDecoder().decode(body)) as T;
  } catch (error) {
    throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: 'the answer is not valid JSON', cause: error });
  }
}
