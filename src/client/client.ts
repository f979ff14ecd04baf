/**
 * The entry point: a server URL plus transport settings, handing out stream and bucket
 * handles. Paths name streams as `bucket/stream` or `v1/stream/name`.
 */
import { errorFromResponse, RillError } from './errors.js';
import { Transport, type TransportOptions } from './http.js';
import { StreamHandle, type StreamHandleOptions } from './stream.js';

export interface ClientOptions extends TransportOptions {
  /** The server's base URL, such as http://127.0.0.1:4437. */
  url: string;
  /** Remember and send back Stream-Incarnation on every stream handle (default true). */
  trackIncarnation?: boolean;
}

export interface BucketInfo {
  id: string;
  streamCount: number;
  createdAt: string;
}

export interface StreamListing {
  streams: string[];
  /** Pass as `after` to get the next page; null on the last page. */
  next: string | null;
}

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

export class RillClient {
  readonly baseUrl: string;
  readonly transport: Transport;
  private readonly trackIncarnation: boolean;

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

  /** A handle on the stream at `path` (`bucket/stream` or `v1/stream/name`). */
  stream(path: string, options: StreamHandleOptions = {}): StreamHandle {
    return new StreamHandle(this.urlOf(path), this.transport, { trackIncarnation: this.trackIncarnation, ...options });
  }

  bucket(id: string): BucketHandle {
    return new BucketHandle(this, id);
  }
}

export class BucketHandle {
  readonly url: string;

  constructor(
    private readonly client: RillClient,
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

  /** Deletes the bucket; the server refuses (BUCKET_NOT_EMPTY) while it holds streams. */
  async delete(options: { signal?: AbortSignal } = {}): Promise<void> {
    const res = await this.client.transport.request(this.url, { method: 'DELETE', signal: options.signal });
    if (res.status !== 204 && res.status !== 200) throw await errorFromResponse(res.response);
  }

  /** One page of the bucket's stream ids, sorted. */
  async list(options: ListOptions = {}): Promise<StreamListing> {
    const params = new URLSearchParams();
    if (options.prefix !== undefined) params.set('prefix', options.prefix);
    if (options.after !== undefined) params.set('after', options.after);
    if (options.limit !== undefined) params.set('limit', String(options.limit));
    const query = params.toString();
    const url = `${this.url}/streams${query ? `?${query}` : ''}`;
    const res = await this.client.transport.request(url, { method: 'GET', signal: options.signal });
    if (res.status !== 200) throw await errorFromResponse(res.response);
    const body = parseJson<{ streams: string[]; next: string | null }>(res.body);
    return { streams: body.streams, next: body.next ?? null };
  }

  /** Every stream id of the bucket, page by page. */
  async *streams(options: Omit<ListOptions, 'after'> = {}): AsyncGenerator<string> {
    let after: string | undefined;
    for (;;) {
      const page = await this.list({ ...options, ...(after === undefined ? {} : { after }) });
      yield* page.streams;
      if (page.next === null || page.streams.length === 0) return;
      after = page.next;
    }
  }

  stream(id: string, options: StreamHandleOptions = {}): StreamHandle {
    return this.client.stream(`${this.id}/${id}`, options);
  }
}

function parseJson<T>(body: Uint8Array): T {
  try {
    return JSON.parse(new TextDecoder().decode(body)) as T;
  } catch (error) {
    throw new RillError({ code: 'UNEXPECTED_RESPONSE', message: 'the answer is not valid JSON', cause: error });
  }
}
