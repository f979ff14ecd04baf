/**
 * A webhook delivery in flight when the server is SIGKILLed: the node takes each attempt
 * for twice the webhook timeout (no other node sends it meanwhile), so without more a
 * crash would hold the wake that long. Back on the same data (SQLite) or under the same
 * host and port (PostgreSQL), the node sends it again at once. The timeout here is ten
 * minutes, so a second delivery of the same wake within the test can only be that.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { sharedDatabase } from '../helpers/postgres.js';
import { removeDir, startServer, tempDataDir, type ServerProcess } from '../helpers/server.js';
import { eventually, startReceiver, type Receiver } from '../helpers/webhooks.js';

const JSON_TYPE = { 'content-type': 'application/json' };
const ARGS = ['--webhook-allow-localhost', '--webhook-timeout', '10m', '--subscription-sweep', '100ms'];
/** How long the test waits for a delivery: far below the attempt's 20 minutes. */
const DELIVERY_WAIT_MS = 20_000;

const servers: ServerProcess[] = [];
const dataDirs: string[] = [];
const receivers: Receiver[] = [];

afterAll(async () => {
  for (const server of servers) await server.kill();
  for (const receiver of receivers) await receiver.close();
  for (const dir of dataDirs) removeDir(dir);
});

/** Whether the subscription's one stream is acknowledged up to its tail. */
async function caughtUp(base: string, id: string): Promise<boolean> {
  const body = (await (await fetch(`${base}/v1/stream/__ds/subscriptions/${id}`)).json()) as { streams: Array<{ acked_offset: string; tail_offset: string }> };
  return body.streams.length === 1 && body.streams[0]!.acked_offset === body.streams[0]!.tail_offset;
}

describe('a webhook delivery cut off by SIGKILL', () => {
  for (const engine of ['sqlite', 'postgres'] as const) {
    it(`is sent again as soon as the node is back, not after its attempt times out (${engine})`, async () => {
      const receiver = await startReceiver();
      receivers.push(receiver);
      receiver.answer('hang', { status: 200, body: { done: true } });
      const dataDir = tempDataDir('rill-crash-webhook-');
      dataDirs.push(dataDir);
      const postgresUrl = engine === 'postgres' ? await sharedDatabase() : undefined;
      let server = await startServer({ process: true, dataDir, postgresUrl, args: ARGS });
      servers.push(server);
      const base = server.url;
      const stream = `hooked-${engine}`;
      expect((await fetch(`${base}/v1/stream/${stream}`, { method: 'PUT', headers: JSON_TYPE, body: '[]' })).status).toBe(201);
      const config = { type: 'webhook', streams: [stream], webhook: { url: receiver.url }, lease_ttl_ms: 60_000 };
      const created = await fetch(`${base}/v1/stream/__ds/subscriptions/resume-${engine}`, { method: 'PUT', headers: JSON_TYPE, body: JSON.stringify(config) });
      expect(created.status, await created.text()).toBe(201);
      expect((await fetch(`${base}/v1/stream/${stream}`, { method: 'POST', headers: JSON_TYPE, body: '{"n":1}' })).status).toBe(204);

      const first = await receiver.next(1, DELIVERY_WAIT_MS);
      await server.kill();
      // PostgreSQL tells nodes apart by host and port, so only there must the port be the same.
      const port = engine === 'postgres' ? server.port : undefined;
      server = await startServer({ process: true, dataDir, postgresUrl, port, args: ARGS });
      servers.push(server);

      const again = await receiver.next(2, DELIVERY_WAIT_MS);
      expect(again.body.wake_id, 'the same wake, sent again').toBe(first.body.wake_id);
      expect(again.body.streams.map((s) => s.path)).toEqual([stream]);
      await eventually(() => caughtUp(server.url, `resume-${engine}`), DELIVERY_WAIT_MS, 'the answered delivery to acknowledge the stream');
      expect(receiver.deliveries).toHaveLength(2);
    });
  }
});
