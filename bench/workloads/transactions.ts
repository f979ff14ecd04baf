/**
 * Group transactions against the same appends sent one by one (issue 35), on rill alone
 * (the reference server has no transactions). Each client owns one affinity key with one
 * JSON stream per operation; a batch is one message appended to each of the first `size`
 * streams, sent either as one `POST /{bucket}/{key}/$transaction` or as `size` plain POSTs,
 * each awaited before the next (what a client without transactions does to keep order).
 */
import { expectOk, pooled } from '../http.js';

export interface TransactionsSpec {
  /** Clients sending at once, each on its own affinity key. */
  clients: number;
  /** Operations per transaction: one figure each. */
  sizes: number[];
  /** Batches each client sends per measurement. */
  batchesPerClient: number;
}

const BUCKET = 'benchtx';
const JSON_HEADERS = { 'content-type': 'application/json' };
const keyOf = (client: number) => `client-${client}`;
const streamPath = (client: number, stream: number) => `/${BUCKET}/${keyOf(client)}/s${stream}`;

/** The bucket, and for each client its affinity key's streams: as many as the largest transaction has operations. */
export async function prepareTransactions(base: string, spec: TransactionsSpec): Promise<void> {
  await expectOk(await fetch(`${base}/${BUCKET}`, { method: 'PUT' }), `create bucket ${BUCKET}`);
  const streams = Math.max(...spec.sizes);
  await pooled(spec.clients * streams, spec.clients, async (i) => {
    const path = streamPath(Math.floor(i / streams), i % streams);
    await expectOk(await fetch(`${base}${path}`, { method: 'PUT', headers: JSON_HEADERS }), `create ${path}`);
  });
}

/** One message per operation, the same size in both forms, told apart by batch and operation. */
const messageOf = (batch: number, op: number) => JSON.stringify({ batch, op, kind: 'event', text: 'lorem ipsum dolor sit amet' });

async function sendTransaction(base: string, client: number, batch: number, size: number): Promise<void> {
  const operations = Array.from({ length: size }, (_, op) => ({
    stream: `s${op}`,
    content_type: 'application/json',
    payload_base64: Buffer.from(messageOf(batch, op)).toString('base64'),
  }));
  const res = await fetch(`${base}/${BUCKET}/${keyOf(client)}/$transaction`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ operations }) });
  await expectOk(res, 'transaction');
}

async function sendOneByOne(base: string, client: number, batch: number, size: number): Promise<void> {
  for (let op = 0; op < size; op++) {
    await expectOk(await fetch(`${base}${streamPath(client, op)}`, { method: 'POST', headers: JSON_HEADERS, body: messageOf(batch, op) }), 'append');
  }
}

/** Appends committed per second, every client sending its batches of `size` in the given form. */
export async function timedBatches(base: string, spec: TransactionsSpec, size: number, asTransaction: boolean): Promise<number> {
  const started = performance.now();
  await pooled(spec.clients, spec.clients, async (client) => {
    for (let batch = 0; batch < spec.batchesPerClient; batch++) {
      await (asTransaction ? sendTransaction(base, client, batch, size) : sendOneByOne(base, client, batch, size));
    }
  });
  return (spec.clients * spec.batchesPerClient * size * 1000) / (performance.now() - started);
}
