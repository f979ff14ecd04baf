/**
 * The headers every answer carries, against the real binary: the two security headers
 * on every answer, a bodiless 204 and refusals included (Protocol section 10.7; the
 * upstream suite checks nosniff on GET, PUT, POST and HEAD), and CORS headers on every
 * answer to a request that sends Origin, so that a browser may read the stream headers
 * (Stream-Next-Offset above all) of an append's 204.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDir, startServer, type RunningServer } from '../helpers/server.js';
import { call, unique } from './client.js';

let server: RunningServer;
const http = (method: string, path: string, options = {}) => call(server.url, method, path, options);
const TEXT = { 'content-type': 'text/plain' };
const ORIGIN = 'https://app.example';

beforeAll(async () => {
  // An origin allowed by name (the default allows only loopback pages with auth off).
  server = await startServer({ args: ['--cors-origin', ORIGIN] });
});

afterAll(async () => {
  await server.stop();
  removeDir(server.dataDir);
});

function expectSecurityHeaders(headers: Record<string, string>, context: string): void {
  expect(headers['x-content-type-options'], context).toBe('nosniff');
  expect(headers['cross-origin-resource-policy'], context).toBe('cross-origin');
}

describe('response headers', () => {
  it('puts the security headers on every answer, refusals included', async () => {
    const path = `/v1/stream/${unique('hdr')}`;
    expect((await http('PUT', path, { headers: TEXT, body: 'hello' })).status).toBe(201);
    const read = await http('GET', `${path}?offset=-1`);
    expect(read.text()).toBe('hello');
    expectSecurityHeaders(read.headers, 'read');
    const refusal = await http('GET', `${path}?offset=abc`);
    expect(refusal.status).toBe(400);
    expectSecurityHeaders(refusal.headers, 'refusal');
    expectSecurityHeaders((await http('HEAD', path)).headers, 'HEAD (it describes a body)');
  });

  it('answers an append with a 204 that carries its stream headers and the security headers', async () => {
    const path = `/v1/stream/${unique('hdr')}`;
    await http('PUT', path, { headers: TEXT });
    const append = await http('POST', path, { headers: TEXT, body: 'abc' });
    expect(append.status).toBe(204);
    expect(append.headers['stream-next-offset']).toBe('00000000000000000003');
    expect(append.headers['stream-offset']).toBe('00000000000000000000');
    expect(append.headers['stream-incarnation']).toMatch(/\S/);
    expect(append.headers['cache-control']).toBe('no-store');
    expectSecurityHeaders(append.headers, 'append');
  });

  it('lets a browser read the headers of every answer to a request with Origin, a 204 included', async () => {
    const path = `/v1/stream/${unique('hdr')}`;
    const origin = { origin: ORIGIN };
    await http('PUT', path, { headers: { ...TEXT, ...origin } });
    const answers = {
      append: await http('POST', path, { headers: { ...TEXT, ...origin }, body: 'abc' }),
      read: await http('GET', `${path}?offset=-1`, { headers: origin }),
      refusal: await http('GET', `${path}?offset=abc`, { headers: origin }),
    };
    for (const [what, answer] of Object.entries(answers)) {
      expect(answer.headers['access-control-allow-origin'], what).toBe(ORIGIN);
      expect(answer.headers['vary']!.split(', '), what).toContain('Origin');
      const exposed = answer.headers['access-control-expose-headers']!.split(', ').map((h) => h.toLowerCase());
      expect(exposed, what).toEqual(expect.arrayContaining(['stream-next-offset', 'stream-incarnation']));
    }
    expect(answers.append.status).toBe(204);
    expect(answers.append.headers['stream-next-offset']).toBe('00000000000000000003');
    const plain = await http('POST', path, { headers: TEXT, body: 'd' });
    expect(plain.headers['access-control-allow-origin']).toBeUndefined();
  });
});
