/**
 * The ports tests and the bench start their servers on (bench/ports.ts): free to listen on,
 * and outside the kernel's ephemeral range, where any outgoing connection of the run
 * could take one while a killed server is started again on it.
 */
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../bench/ports.js';

function listen(port: number): Promise<() => Promise<void>> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(() => new Promise((done) => server.close(() => done()))));
  });
}

describe('freePort', () => {
  it('gives ports below the ephemeral range that a server can listen on', async () => {
    const ephemeralStart = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    const ports = [];
    for (let i = 0; i < 20; i++) ports.push(await freePort());
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(10_000);
      expect(port).toBeLessThan(ephemeralStart);
    }
    const closes = await Promise.all([...new Set(ports)].map((port) => listen(port)));
    await Promise.all(closes.map((close) => close()));
  });

  it('never gives a port fetch refuses to connect to, so a health probe reaches the server', async () => {
    await expect(fetch('http://127.0.0.1:10080/')).rejects.toMatchObject({ cause: { message: 'bad port' } });
    const drawn: number[] = [];
    const port = await freePort((low, high) => {
      const candidate = drawn.length < 2 ? 10_080 : low + ((drawn.length * 7_919) % (high - low));
      drawn.push(candidate);
      return candidate;
    });
    expect(drawn.slice(0, 2)).toEqual([10_080, 10_080]);
    expect(port).not.toBe(10_080);
    const server = createHttpServer((_req, res) => res.writeHead(204).end());
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    try {
      expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(204);
    } finally {
      await new Promise((done) => server.close(done));
    }
  });
});
