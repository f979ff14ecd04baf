/**
 * One webhook delivery attempt: POST the signed body and tell what the endpoint answered.
 * The URL is checked again (`checkWebhookUrl`), and every address its host resolves to is
 * checked when the connection is made (a `lookup` of our own), so a name that resolves
 * to a private address, also after the subscription was created (DNS rebinding), is never
 * connected to. Redirects are not followed: a 3xx is a failed attempt. The whole attempt
 * (connect, answer, body) is bounded by `timeoutMs`, and at most `maxResponseBytes` of
 * the answer are read.
 *
 * A new connection per attempt (no keep-alive pool): deliveries come per wake, not per
 * append, and a pooled socket the endpoint closed meanwhile would fail an attempt that
 * never reached it.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { checkWebhookUrl, isForbiddenAddress, isLoopbackAddress } from '../core/webhook-url.js';

export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;
const MAX_ERROR_CHARS = 200;

export interface WebhookAttempt {
  url: string;
  /** The JSON body, exactly as signed. */
  rawBody: string;
  /** The `Webhook-Signature` value. */
  signature: string;
  /**
   * The `Webhook-Id` value a receiver de-duplicates on: the wake's id (the body's
   * `wake_id`), the same on every retry of that wake, another for the next wake.
   */
  deliveryId: string;
  timeoutMs: number;
  /** The development setting: `http:` and `https:` to loopback hosts allowed. */
  allowLocalhost: boolean;
  maxResponseBytes?: number;
}

/**
 * `done`: a 2xx whose JSON body is `{"done": true}`; `accepted`: any other 2xx (the
 * endpoint will call back); `failed`: anything else, to be retried.
 */
export type WebhookResult = { kind: 'done' } | { kind: 'accepted' } | { kind: 'failed'; error: string };

export function sendWebhook(attempt: WebhookAttempt): Promise<WebhookResult> {
  if (!(attempt.timeoutMs > 0)) throw new RangeError(`timeoutMs must be positive, not ${attempt.timeoutMs}`);
  const check = checkWebhookUrl(attempt.url, attempt.allowLocalhost);
  if (!check.ok) return Promise.resolve(failed(`refused: ${check.reason}`));
  const url = check.url;
  const body = Buffer.from(attempt.rawBody, 'utf8');
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  const maxResponseBytes = attempt.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  return new Promise((resolve) => {
    let answered2xx = false;
    let settled = false;
    const finish = (result: WebhookResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve(result);
    };
    const req: ClientRequest = request({
      method: 'POST',
      hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: url.port === '' ? undefined : Number(url.port),
      path: `${url.pathname}${url.search}`,
      headers: {
        'content-type': 'application/json',
        'content-length': body.length,
        'webhook-signature': attempt.signature,
        'webhook-id': attempt.deliveryId,
        'user-agent': 'rill',
      },
      agent: false,
      lookup: checkedLookup(attempt.allowLocalhost, url.protocol === 'http:'),
    });
    const timer = setTimeout(() => finish(answered2xx ? { kind: 'accepted' } : failed(`timed out after ${attempt.timeoutMs} ms`)), attempt.timeoutMs);
    req.on('error', (error) => finish(answered2xx ? { kind: 'accepted' } : failed(describe(error))));
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      if (status >= 300 && status < 400) return finish(failed(`redirect not followed (HTTP ${status})`));
      if (status < 200 || status >= 300) return finish(failed(`HTTP ${status}`));
      answered2xx = true;
      readAnswer(res, maxResponseBytes, finish);
    });
    req.end(body);
  });
}

/** Reads a 2xx answer's body, at most `maxBytes` of it: `{"done": true}` is done, anything else accepted. */
function readAnswer(res: IncomingMessage, maxBytes: number, finish: (result: WebhookResult) => void): void {
  const chunks: Buffer[] = [];
  let bytes = 0;
  res.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > maxBytes) return finish({ kind: 'accepted' });
    chunks.push(chunk);
  });
  res.on('end', () => finish(isDone(Buffer.concat(chunks).toString('utf8')) ? { kind: 'done' } : { kind: 'accepted' }));
  res.on('error', () => finish({ kind: 'accepted' }));
}

function isDone(text: string): boolean {
  try {
    const answer: unknown = JSON.parse(text);
    return typeof answer === 'object' && answer !== null && (answer as { done?: unknown }).done === true;
  } catch {
    return false;
  }
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for the connection that refuses a host if any of its addresses is forbidden
 * (over `http:`, if any is not loopback): the connection goes to an address checked here,
 * never to one resolved again later.
 */
function checkedLookup(allowLocalhost: boolean, loopbackOnly: boolean) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, []);
      const forbidden = addresses.find((a) => isForbiddenAddress(a.address, allowLocalhost));
      const remote = loopbackOnly ? addresses.find((a) => !isLoopbackAddress(a.address)) : undefined;
      if (addresses.length === 0 || forbidden !== undefined || remote !== undefined) {
        const why = forbidden !== undefined ? `${forbidden.address}, which is not a public address`
          : remote !== undefined ? `${remote.address}, and http is allowed to loopback only` : 'no address';
        const refusal: NodeJS.ErrnoException = new Error(`refused: ${hostname} resolves to ${why}`);
        refusal.code = 'EADDRFORBIDDEN';
        return callback(refusal, []);
      }
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

function describe(error: Error): string {
  return error.message.slice(0, MAX_ERROR_CHARS) || (error as NodeJS.ErrnoException).code || 'network error';
}

const failed = (error: string): WebhookResult => ({ kind: 'failed', error });
