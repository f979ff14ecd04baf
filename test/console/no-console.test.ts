/** `rill serve --no-console` serves no console: /console/ is an unknown route, and streams still work. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { removeDir, startServer, type ServerProcess } from '../helpers/server.js';

let server: ServerProcess;

beforeAll(async () => {
  server = await startServer({ process: true, args: ['--no-console'] });
});

afterAll(async () => {
  await server?.stop();
  if (server) removeDir(server.dataDir);
});

it('--no-console answers 404 NOT_FOUND at /console/ and keeps "console" from being taken as a bucket', async () => {
  for (const path of ['/console/', '/console/index.html', '/console']) {
    const res = await fetch(`${server.url}${path}`);
    expect(res.status, path).toBe(404);
    expect(await res.json()).toMatchObject({ code: 'NOT_FOUND' });
  }
  expect((await fetch(`${server.url}/console`, { method: 'PUT' })).status).toBe(404);
  expect((await fetch(`${server.url}/v1/stream/still-served`, { method: 'PUT' })).status).toBe(201);
});
