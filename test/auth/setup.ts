/**
 * An in-process rill with auth on, on real SQLite in a temporary directory, with a clock
 * the test controls, and HS256 tokens signed with its secret. Tests talk to it over HTTP.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, expect } from 'vitest';
import { signToken } from '../../src/auth/sign.js';
import type { Permission } from '../../src/core/access.js';
import { createRillServer, type RillServer } from '../../src/http/server.js';
import type { ServerSettings } from '../../src/http/settings.js';
import { AUTH_OFF } from '../../src/http/settings.js';
import { removeDir, tempDataDir } from '../helpers/server.js';
import { call } from '../http/client.js';

/** Wall time moved by an offset the test sets (it runs on, so waits end), or stopped at an instant. */
export class Clock {
  private offsetMs = 0;
  private frozenAtMs: number | null = null;
  readonly now = (): number => this.frozenAtMs ?? Date.now() + this.offsetMs;
  /** Makes `now()` read `ms` at this instant, and run on from there. */
  setTo(ms: number): void {
    this.frozenAtMs = null;
    this.offsetMs = ms - Date.now();
  }
  /** Makes `now()` read `ms` until told otherwise: for checks at an exact millisecond. */
  stopAt(ms: number): void {
    this.frozenAtMs = ms;
  }
  reset(): void {
    this.frozenAtMs = null;
    this.offsetMs = 0;
  }
}

export interface GrantSpec {
  bucket: string;
  can: Permission[];
  prefix?: string;
}

export interface AuthServer {
  rill: RillServer;
  url: string;
  dir: string;
  secret: Uint8Array;
  secretFile: string;
  clock: Clock;
  /** A token for these grants, valid for an hour of the server's clock unless told. */
  token(grants: GrantSpec[], options?: { subject?: string; ttlMs?: number; nowMs?: number; jti?: string }): Promise<string>;
}

export type AuthSettings = Partial<Omit<ServerSettings, 'auth'>> & { auth?: Partial<ServerSettings['auth']> };

/** Starts one server for the file (beforeAll) and stops it after (afterAll). */
export function useAuthServer(settings: AuthSettings = {}): AuthServer {
  const env = { clock: new Clock() } as AuthServer;
  beforeAll(async () => {
    env.dir = tempDataDir('rill-auth-');
    env.secret = randomBytes(32);
    env.secretFile = join(env.dir, 'secret');
    writeFileSync(env.secretFile, Buffer.from(env.secret).toString('base64url'), { mode: 0o600 });
    // The file holds text: the secret is its bytes as written.
    env.secret = Buffer.from(Buffer.from(env.secret).toString('base64url'), 'utf8');
    const auth = { ...AUTH_OFF, secretFile: env.secretFile, keysCheckMs: 0, ...settings.auth };
    env.rill = createRillServer({
      settings: { drainTimeoutMs: 500, ...settings, auth, port: 0, dataDir: join(env.dir, 'data'), store: 'sqlite' },
      logger: pino({ level: 'silent' }),
      now: env.clock.now,
    });
    await env.rill.listen();
    env.url = env.rill.url();
    env.token = (grants, options = {}) =>
      signToken(env.secret, { grants, ttlMs: options.ttlMs ?? 3_600_000, nowMs: options.nowMs ?? env.clock.now(), ...(options.subject ? { subject: options.subject } : {}), ...(options.jti ? { jti: options.jti } : {}) });
  });
  afterAll(async () => {
    await env.rill?.close();
    if (env.dir) removeDir(env.dir);
  });
  return env;
}

export const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

/**
 * The Authorization header of a token with admin on `*` (subject `admin`) for the file's
 * server: the object is filled in before the file's tests run, so tests spread or pass it.
 */
export function useAdminHeaders(env: AuthServer): Record<string, string> {
  const headers: Record<string, string> = {};
  beforeAll(async () => {
    Object.assign(headers, bearer(await env.token([{ bucket: '*', can: ['admin'] }], { subject: 'admin' })));
  });
  return headers;
}

/** Creates a bucket that does not exist yet (201). */
export async function createBucketAs(env: AuthServer, headers: Record<string, string>, id: string): Promise<void> {
  expect((await call(env.url, 'PUT', `/${id}`, { headers })).status).toBe(201);
}
