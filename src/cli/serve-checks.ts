/**
 * `rill serve` refusing to start because of something the operator gave it: the flags
 * that cannot go together, and the startup failures an operator can fix (a port in use, a
 * data directory in use, a key file missing or too short). Each becomes a ConfigMistake
 * (code CONFIG, exit 2) naming the flag and saying what to do, rather than an INTERNAL
 * error with a raw ENOENT or EADDRINUSE.
 */
import { DataDirInUseError } from '../storage/errors.js';
import { remoteKeysUrlProblem } from '../auth/key-urls.js';
import { parseColdStoreUrl } from '../storage/cold/object-store.js';
import { ConfigMistake } from './errors.js';
import type { ServeFlags } from './serve-options.js';

/** Flags that cannot go together, checked before anything is opened. */
export function checkServeFlags(flags: ServeFlags): void {
  if (flags.store === 'postgres' && !flags.postgresUrl) {
    throw new ConfigMistake('--store postgres needs --postgres-url (or RILL_POSTGRES_URL): the database to use, such as postgres://user:password@host:5432/db');
  }
  checkPublicKeyFlags(flags);
  checkColdStoreFlags(flags);
}

/** The cold tier (storage/cold/): a URL it can use, on an engine it works with. */
function checkColdStoreFlags(flags: ServeFlags): void {
  if (flags.coldStore === undefined) return;
  try {
    parseColdStoreUrl(flags.coldStore);
  } catch (error) {
    throw new ConfigMistake((error as Error).message);
  }
  if (flags.store === 'memory') {
    throw new ConfigMistake('--cold-store works with --store sqlite or --store postgres, not --store memory: a memory store keeps nothing to move');
  }
  if (flags.store === 'sqlite' && flags.sqliteThread === 'on') {
    throw new ConfigMistake('--cold-store works with --store sqlite only with --sqlite-thread off for now (this server has --sqlite-thread on), or with --store postgres');
  }
}

/** The sources of public keys: one at most (which would win is not obvious), each URL https. */
function checkPublicKeyFlags(flags: ServeFlags): void {
  const given = (
    [
      ['--auth-jwks-file', flags.authJwksFile],
      ['--auth-jwks-url', flags.authJwksUrl],
      ['--auth-oidc-issuer', flags.authOidcIssuer],
    ] as const
  ).filter(([, value]) => value !== undefined);
  if (given.length > 1) throw new ConfigMistake(`${given.map(([flag]) => flag).join(' and ')} cannot go together: give the public keys one way`);
  for (const [flag, value] of given) {
    if (flag === '--auth-jwks-file') continue;
    const problem = remoteKeysUrlProblem(value!);
    if (problem !== null) throw new ConfigMistake(`${flag} ${value}: ${problem}`);
  }
  if (flags.authOidcIssuer !== undefined && flags.authIssuer !== undefined && flags.authIssuer !== flags.authOidcIssuer) {
    throw new ConfigMistake(`--auth-issuer ${flags.authIssuer} differs from --auth-oidc-issuer ${flags.authOidcIssuer}: tokens of an OpenID Connect issuer carry it as iss; leave --auth-issuer out`);
  }
}

/** The file flags of `rill serve`, by the path they name. */
function fileFlagOf(path: string, flags: ServeFlags): string {
  const byFlag: Array<[string, string | undefined]> = [
    ['--auth-secret-file', flags.authSecretFile],
    ['--auth-jwks-file', flags.authJwksFile],
    ['--tls-cert', flags.tlsCert],
    ['--tls-key', flags.tlsKey],
  ];
  return byFlag.find(([, value]) => value === path)?.[0] ?? 'the file';
}

/** What to do about a key file, by its flag. */
function keyFileAdvice(flag: string, path: string): string {
  if (flag === '--auth-secret-file') return `write a secret of at least 32 random bytes there, such as: openssl rand -base64 32 > ${path}`;
  if (flag === '--auth-jwks-file') return 'give the public keys as a JWK Set: {"keys": [...]}';
  return 'give the path of a PEM file';
}

/** A failed listen (EADDRINUSE, EACCES) as the operator's mistake, naming the port's flag. */
function listenMistake(error: NodeJS.ErrnoException & { port?: number; address?: string }, flags: ServeFlags): ConfigMistake | null {
  if (error.syscall !== 'listen' || error.port === undefined) return null;
  const flag = flags.metricsPort !== undefined && error.port === flags.metricsPort && error.port !== flags.port ? '--metrics-port' : '--port';
  const where = `port ${error.port} on ${error.address ?? flags.host}`;
  if (error.code === 'EADDRINUSE') return new ConfigMistake(`${flag} ${error.port}: ${where} is in use by another process: stop it, or choose another port with ${flag} (0 picks a free one)`);
  if (error.code === 'EACCES') return new ConfigMistake(`${flag} ${error.port}: this user may not listen on ${where}: choose a port above 1023 with ${flag}`);
  return null;
}

/** A startup failure the operator can fix, as a ConfigMistake; any other error as it is. */
export async function startupMistake(error: unknown, flags: ServeFlags): Promise<unknown> {
  if (error instanceof DataDirInUseError) {
    return new ConfigMistake(`--data ${flags.data}: the data directory is in use by another rill server (its rill.lock is held): stop that server, or give this one another --data directory`);
  }
  // Loaded only on a failure: the verifier brings jose, which the server has loaded anyway.
  const { KeyFileError } = await import('../auth/verifier.js');
  if (error instanceof KeyFileError) {
    const flag = fileFlagOf(error.path, flags);
    return new ConfigMistake(`${flag} ${error.path}: ${error.problem}; ${keyFileAdvice(flag, error.path)}`);
  }
  const errno = error as NodeJS.ErrnoException & { port?: number };
  const listen = listenMistake(errno, flags);
  if (listen) return listen;
  if (errno.code === 'ENOENT' && typeof errno.path === 'string') {
    const flag = fileFlagOf(errno.path, flags);
    return new ConfigMistake(`${flag} ${errno.path}: no such file; ${keyFileAdvice(flag, errno.path)}`);
  }
  return error;
}
