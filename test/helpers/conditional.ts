/**
 * HTTP helpers for the conditional-write tests (seed 001): a thin fetch wrapper that
 * returns status, headers and body together, a byte-exact raw request for header values
 * fetch would refuse or re-encode, and readers for catch-up and SSE.
 */
import { connect } from 'node:net';

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  /** The error code of a JSON refusal, when there is one. */
  code: string | undefined;
}

export type HeaderInit = Record<string, string>;

export async function call(url: string, method: string, headers: HeaderInit = {}, body?: string): Promise<Answer> {
  const init: RequestInit = { method, headers, redirect: 'manual' };
  if (body !== undefined) init.body = body;
  const res = await fetch(url, init);
  const text = method === 'HEAD' ? '' : await res.text();
  return { status: res.status, headers: res.headers, text, code: errorCode(res.headers, text) };
}

function errorCode(headers: Headers, text: string): string | undefined {
  if (!(headers.get('content-type') ?? '').startsWith('application/json') || text === '') return undefined;
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed) && 'code' in parsed) return String(parsed.code);
  } catch {
    // a JSON stream's data, not a refusal
  }
  return undefined;
}

/** Zero-padded to the 20-digit width the recipes use. */
export function pad(n: number): string {
  return String(n).padStart(20, '0');
}

export const JSON_TYPE = { 'content-type': 'application/json' };
export const TEXT_TYPE = { 'content-type': 'text/plain' };

export interface RawAnswer {
  status: number;
  /** Lower-case header names; repeated headers joined with ", ". */
  headers: Map<string, string>;
  body: Buffer;
}

/**
 * Sends one HTTP/1.1 request over a fresh socket with exactly the bytes given, so a test
 * can put any byte into a header value. The response is read until the server closes.
 */
export function rawRequest(port: number, head: Buffer, body: Buffer = Buffer.alloc(0), timeoutMs = 5_000): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const parts: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('raw request timed out'));
    }, timeoutMs);
    socket.on('data', (d: Buffer) => parts.push(d));
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(parseRawResponse(Buffer.concat(parts)));
    });
    socket.write(Buffer.concat([head, body]));
  });
}

function parseRawResponse(raw: Buffer): RawAnswer {
  const end = raw.indexOf('\r\n\r\n');
  const headText = raw.subarray(0, end < 0 ? raw.length : end).toString('latin1');
  const [statusLine, ...lines] = headText.split('\r\n');
  const headers = new Map<string, string>();
  for (const line of lines) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers.set(name, headers.has(name) ? `${headers.get(name)}, ${value}` : value);
  }
  return { status: Number(statusLine?.split(' ')[1]), headers, body: end < 0 ? Buffer.alloc(0) : raw.subarray(end + 4) };
}

/** A POST whose Stream-Seq value is the given bytes, verbatim. */
export function rawAppend(port: number, path: string, contentType: string, body: string, streamSeq: Buffer): Promise<RawAnswer> {
  const payload = Buffer.from(body);
  const head = Buffer.concat([
    Buffer.from(
      `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: ${contentType}\r\nContent-Length: ${payload.length}\r\nStream-Seq: `,
      'latin1',
    ),
    streamSeq,
    Buffer.from('\r\n\r\n', 'latin1'),
  ]);
  return rawRequest(port, head, payload);
}

/** Reads a JSON stream from `offset` to the tail; answers the messages and where it stopped. */
export async function readJsonToTail(url: string, offset = '-1', headers: HeaderInit = {}): Promise<{ messages: unknown[]; next: string }> {
  const messages: unknown[] = [];
  let at = offset;
  for (let page = 0; page < 1000; page++) {
    const res = await fetch(`${url}?offset=${at}&consistency=leader`, { headers });
    if (res.status !== 200) throw new Error(`read answered ${res.status}: ${await res.text()}`);
    messages.push(...(JSON.parse(await res.text()) as unknown[]));
    at = res.headers.get('stream-next-offset')!;
    if (res.headers.get('stream-up-to-date') === 'true') return { messages, next: at };
  }
  throw new Error('the read never reached the tail');
}

export interface SseEvent {
  event: string;
  data: string;
}

export interface SseSession {
  status: number;
  headers: Headers;
  /** Resolves once `predicate` holds for the events so far, or the connection ends. */
  until(predicate: (events: SseEvent[]) => boolean, timeoutMs?: number): Promise<SseEvent[]>;
  /** Resolves when the server ends the connection (true) or after `timeoutMs` (false). */
  ended(timeoutMs: number): Promise<boolean>;
  close(): void;
}

/** Opens an SSE read and parses its events as they arrive. */
export async function openSse(url: string, headers: HeaderInit = {}): Promise<SseSession> {
  const abort = new AbortController();
  const res = await fetch(url, { headers, signal: abort.signal });
  const events: SseEvent[] = [];
  let done = false;
  let wake: () => void = () => {};
  const pump = (async () => {
    if (!res.body) return;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let sep: number;
        while ((sep = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, sep);
          buffer = buffer.slice(sep + 2);
          const parsed = parseSseBlock(block);
          if (parsed) events.push(parsed);
        }
        wake();
      }
    } catch {
      // aborted by close()
    } finally {
      done = true;
      wake();
    }
  })();
  const waitFor = async (ready: () => boolean, timeoutMs: number): Promise<boolean> => {
    const deadline = Date.now() + timeoutMs;
    while (!ready() && Date.now() < deadline) {
      await new Promise<void>((r) => {
        wake = r;
        setTimeout(r, Math.min(50, Math.max(1, deadline - Date.now())));
      });
    }
    return ready();
  };
  return {
    status: res.status,
    headers: res.headers,
    async until(predicate, timeoutMs = 5_000) {
      await waitFor(() => done || predicate(events), timeoutMs);
      return [...events];
    },
    async ended(timeoutMs) {
      return waitFor(() => done, timeoutMs);
    },
    close() {
      abort.abort();
      void pump;
    },
  };
}

function parseSseBlock(block: string): SseEvent | null {
  let event = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) continue;
    if (line.startsWith('event:')) event = line.slice(6).trim();
    else if (line.startsWith('data:')) data.push(line.slice(5));
  }
  return data.length === 0 && event === 'message' ? null : { event, data: data.join('\n') };
}

/**
 * DELETE and PUT of the same stream pipelined in one write on one connection, so that
 * both usually commit in the same batch: a live reader then wakes only once the stream
 * is already another incarnation. Answers the new stream's token from the PUT.
 */
export async function pipelinedRecreate(port: number, path: string, contentType: string, body: string): Promise<string | undefined> {
  const payload = Buffer.from(body);
  const head = Buffer.from(
    `DELETE ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n` +
      `PUT ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: ${contentType}\r\nContent-Length: ${payload.length}\r\n\r\n`,
    'latin1',
  );
  const res = await rawRequest(port, head, payload);
  // The raw reader keeps the first status line; the PUT's token is the last one sent.
  const all = res.body.toString('latin1') + '\r\n';
  const tokens = [...all.matchAll(/stream-incarnation: *([^\r\n]+)/gi)].map((m) => m[1]!.trim());
  return tokens.at(-1) ?? res.headers.get('stream-incarnation');
}
