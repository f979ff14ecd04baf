/** One real rill server with one bucket for a test file's client tests, stopped after them. */
import { afterAll, beforeAll } from 'vitest';
import { RillClient } from '../../src/client/index.js';
import { removeDir, startServer, type RunningServer, type StartOptions } from './server.js';

export interface ClientServer {
  server: RunningServer;
  client: RillClient;
}

/** Registers beforeAll/afterAll; the returned object is filled in once the server is up. */
export function useClientServer(bucket: string, options: StartOptions = {}): ClientServer {
  const env = {} as ClientServer;
  beforeAll(async () => {
    env.server = await startServer(options);
    env.client = new RillClient({ url: env.server.url });
    await env.client.bucket(bucket).create();
  });
  afterAll(async () => {
    await env.server?.stop();
    if (env.server) removeDir(env.server.dataDir);
  });
  return env;
}
