/**
 * How stored bytes are served, against the real server: every read answer that carries a
 * stream's or a snapshot's bytes has `Content-Security-Policy: sandbox` and nosniff, and
 * a body of an active type (one a browser would run as a page on the console's origin)
 * is a download (`Content-Disposition: attachment`). Each read route is asked for an
 * active and a plain type; the Chromium side is test/console/stored-pages.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isActiveContentType } from '../../src/protocol/content-type.js';
import { extensionUrl } from '../../src/protocol/extensions.js';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { call, offset, unique, type Reply } from './client.js';

let server: RunningServer;
const http = (method: string, path: string, headers: Record<string, string> = {}, body?: string) => call(server.url, method, path, { headers, body });

beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

function expectStoredBody(reply: Reply, active: boolean, route: string): void {
  expect(reply.status, route).toBe(200);
  expect(reply.headers['content-security-policy'], route).toBe('sandbox');
  expect(reply.headers['x-content-type-options'], route).toBe('nosniff');
  expect(reply.headers['content-disposition'], route).toBe(active ? 'attachment' : undefined);
}

const BODY = '<p>stored</p>';

/** A stream of `type` holding BODY, with a snapshot of the same type at its end. */
async function storedStream(type: string): Promise<string> {
  const path = `/v1/stream/${unique('stored')}`;
  expect((await http('PUT', path, { 'content-type': type }, BODY)).status).toBe(201);
  const snapshot = await http('PUT', extensionUrl(path, `snapshot/${offset(BODY.length)}`), { 'content-type': type }, BODY);
  expect(snapshot.status).toBe(204);
  return path;
}

describe.each([
  { type: 'text/html', active: true },
  { type: 'image/svg+xml', active: true },
  { type: 'text/javascript; charset=utf-8', active: true },
  { type: 'text/plain', active: false },
  { type: 'application/octet-stream', active: false },
])('stored bodies of type $type', ({ type, active }) => {
  it('a catch-up read, a read at the tail and a long-poll with data carry the rule', async () => {
    const path = await storedStream(type);
    const catchUp = await http('GET', `${path}?offset=-1`);
    expectStoredBody(catchUp, active, 'catch-up');
    expect(catchUp.text()).toBe(BODY);
    expect(catchUp.headers['content-type']).toBe(type);
    expectStoredBody(await http('GET', `${path}?offset=now`), active, 'offset=now');
    const longPoll = await http('GET', `${path}?offset=${offset(0)}&live=long-poll`);
    expectStoredBody(longPoll, active, 'long-poll');
    expect(longPoll.text()).toBe(BODY);
  });

  it('a snapshot read carries the rule, by the snapshot type', async () => {
    const path = await storedStream(type);
    const snapshot = await http('GET', extensionUrl(path, `snapshot/${offset(BODY.length)}`));
    expectStoredBody(snapshot, active, 'snapshot');
    expect(snapshot.text()).toBe(BODY);
    expect(snapshot.headers['content-type']).toBe(type);
  });
});

describe('stored bodies of JSON streams and bootstraps', () => {
  it('JSON and record reads are plain types: sandboxed, not downloads', async () => {
    const path = `/v1/stream/${unique('stored-json')}`;
    expect((await http('PUT', path, { 'content-type': 'application/json' }, '[1,2,3]')).status).toBe(201);
    const reads: Array<[string, Record<string, string>]> = [
      [`${path}?offset=-1`, {}],
      [`${path}?offset=-1`, { accept: 'application/x-ndjson' }],
      [`${path}?record=0`, {}],
      [`${path}?record=0&record_view=envelope`, {}],
      [`${path}?record=now`, {}],
      [`${path}?record=0&live=long-poll`, {}],
    ];
    for (const [url, headers] of reads) expectStoredBody(await http('GET', url, headers), false, `${url} ${JSON.stringify(headers)}`);
  });

  it('a bootstrap is multipart, an active type (a browser may show each part as a page): a download', async () => {
    const path = await storedStream('text/html');
    const bootstrap = await http('GET', extensionUrl(path, 'bootstrap'));
    expectStoredBody(bootstrap, true, 'bootstrap');
    expect(bootstrap.headers['content-type']).toMatch(/^multipart\/mixed; boundary=/);
  });

  it('leaves the console itself a page: its answers are not sandboxed nor downloads', async () => {
    const console = await http('GET', '/console/');
    expect(console.headers['content-security-policy']).not.toContain('sandbox');
    expect(console.headers['content-disposition']).toBeUndefined();
  });
});

describe('isActiveContentType', () => {
  it('names the types a browser runs as a page or script, by media type whatever the parameters', () => {
    const active = ['text/html', 'text/html; charset=utf-8', 'application/xhtml+xml', 'image/svg+xml', 'text/xml', 'application/xml', 'application/atom+xml',
      'text/xsl', 'text/javascript', 'application/javascript', 'application/ecmascript', 'text/javascript1.5', 'application/pdf', 'multipart/mixed; boundary=b',
      'multipart/x-mixed-replace'];
    const plain = ['text/plain', 'text/css', 'text/csv', 'application/json', 'application/x-ndjson', 'application/octet-stream', 'image/png', 'application/vnd.api+json'];
    expect(active.filter((type) => !isActiveContentType(type))).toEqual([]);
    expect(plain.filter((type) => isActiveContentType(type))).toEqual([]);
  });
});
