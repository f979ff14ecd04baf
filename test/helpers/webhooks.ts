/**
 * A real webhook receiver for subscription tests: a node:http server on 127.0.0.1 that
 * records every delivery (raw body, parsed body, signature header) and answers as the
 * test tells it to, plus the signature check a receiver does with the published JWK Set.
 */
import { createPublicKey, verify, type JsonWebKey } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';

export interface Delivery {
  rawBody: string;
  body: {
    subscription_id: string;
    wake_id: string;
    generation: number;
    streams: Array<{ path: string; link_type: string; acked_offset: string; tail_offset: string; has_pending: boolean }>;
    callback_url: string;
    callback_token: string;
  };
  signature: string | undefined;
  /** The `Webhook-Id` header. */
  deliveryId: string | undefined;
  atMs: number;
}

/** How the receiver answers one delivery: a status and JSON body, or never (the connection hangs). */
export type Answer = { status: number; body?: unknown } | 'hang';

export interface Receiver {
  url: string;
  deliveries: Delivery[];
  /** Sets how the next deliveries are answered (the last answer repeats). */
  answer(...answers: Answer[]): void;
  /** Resolves with the delivery number `n` (1-based) once it has arrived. */
  next(n?: number, timeoutMs?: number): Promise<Delivery>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const deliveries: Delivery[] = [];
  let answers: Answer[] = [{ status: 200, body: {} }];
  const waiters: Array<() => void> = [];
  const hanging: ServerResponse[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString('utf8');
      const signature = req.headers['webhook-signature'];
      const deliveryId = req.headers['webhook-id'];
      deliveries.push({
        rawBody,
        body: JSON.parse(rawBody) as Delivery['body'],
        signature: typeof signature === 'string' ? signature : undefined,
        deliveryId: typeof deliveryId === 'string' ? deliveryId : undefined,
        atMs: Date.now(),
      });
      const answer = answers.length > 1 ? answers.shift()! : answers[0]!;
      for (const wake of waiters.splice(0)) wake();
      if (answer === 'hang') {
        hanging.push(res);
        return;
      }
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer.body ?? {}));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/hook`,
    deliveries,
    answer(...next) {
      answers = next;
    },
    async next(n = deliveries.length + 1, timeoutMs = 5_000) {
      const deadline = Date.now() + timeoutMs;
      while (deliveries.length < n) {
        if (Date.now() > deadline) throw new Error(`delivery ${n} did not arrive within ${timeoutMs} ms (got ${deliveries.length})`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 50);
        });
      }
      return deliveries[n - 1]!;
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What a receiver does: the signature header checked against the server's JWK Set, within five minutes. */
export function signatureVerifies(rawBody: string, header: string | undefined, jwks: { keys: Array<JsonWebKey & { kid?: string }> }, nowMs = Date.now()): boolean {
  const match = header === undefined ? null : /^t=(\d+),kid=([^,]+),ed25519=([A-Za-z0-9_-]+)$/.exec(header);
  if (!match) return false;
  const [, t, kid, signature] = match;
  const key = jwks.keys.find((k) => k.kid === kid);
  if (!key || Math.abs(nowMs / 1000 - Number(t)) > 300) return false;
  return verify(null, Buffer.from(`${t}.${rawBody}`), createPublicKey({ key, format: 'jwk' }), Buffer.from(signature!, 'base64url'));
}

/** Polls `check` until it answers true. */
export async function eventually(check: () => Promise<boolean> | boolean, timeoutMs = 5_000, what = 'the condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} did not hold within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
