/**
 * The PostgreSQL test harness itself: the shared server of the run gives fresh, separate
 * databases; a server of a test's own survives `kill -9` of its postmaster with its committed
 * rows; a server that cannot start fails loudly.
 */
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from './helpers/server.js';
import { createDatabase, sharedDatabase, startPostgres, type PostgresServer } from './helpers/postgres.js';

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('shared PostgreSQL server', () => {
  it('gives a fresh database that takes a CREATE TABLE / INSERT / SELECT round trip', async () => {
    const url = await sharedDatabase();
    expect(url).toMatch(/^postgres:\/\/postgres:[^@]+@127\.0\.0\.1:\d+\/rill_[0-9a-f]+$/);
    const rows = await withClient(url, async (client) => {
      await client.query('CREATE TABLE items (id bigint PRIMARY KEY, body bytea NOT NULL)');
      await client.query('INSERT INTO items VALUES ($1, $2), ($3, $4)', [1, Buffer.from('one'), 2, Buffer.from('two')]);
      const result = await client.query<{ id: string; body: Buffer }>('SELECT id, body FROM items ORDER BY id');
      return result.rows.map((r) => [r.id, r.body.toString()]);
    });
    expect(rows).toEqual([
      ['1', 'one'],
      ['2', 'two'],
    ]);
  });

  it('gives separate databases', async () => {
    const [a, b] = await Promise.all([sharedDatabase(), sharedDatabase()]);
    expect(a).not.toBe(b);
    await withClient(a, (client) => client.query('CREATE TABLE only_in_a (x int)'));
    const [inA, inB, dbA, dbB] = await Promise.all([
      withClient(a, (client) => client.query("SELECT to_regclass('only_in_a') AS t").then((r) => r.rows[0].t)),
      withClient(b, (client) => client.query("SELECT to_regclass('only_in_a') AS t").then((r) => r.rows[0].t)),
      withClient(a, (client) => client.query('SELECT current_database() AS d').then((r) => r.rows[0].d)),
      withClient(b, (client) => client.query('SELECT current_database() AS d').then((r) => r.rows[0].d)),
    ]);
    expect(inA).toBe('only_in_a');
    expect(inB).toBeNull();
    expect(dbA).not.toBe(dbB);
    expect(a.endsWith(`/${dbA}`)).toBe(true);
    expect(b.endsWith(`/${dbB}`)).toBe(true);
  });
});

describe('a PostgreSQL server of its own', () => {
  let server: PostgresServer | undefined;
  afterAll(async () => {
    await server?.stop();
  });

  it('keeps committed rows, and only those, across kill -9 of the postmaster and a restart', async () => {
    server = await startPostgres();
    const { port, dataDir } = server;
    const url = await createDatabase(server);
    await withClient(url, async (client) => {
      await client.query('CREATE TABLE t (id int PRIMARY KEY, v text NOT NULL)');
      await client.query("INSERT INTO t VALUES (1, 'committed before the kill')");
    });
    // A transaction still open when the postmaster dies must not survive.
    const open = new pg.Client({ connectionString: url });
    const openErrors: Error[] = [];
    open.on('error', (error) => openErrors.push(error));
    await open.connect();
    await open.query('BEGIN');
    await open.query("INSERT INTO t VALUES (2, 'never committed')");

    const pid = server.pid();
    expect(alive(pid)).toBe(true);
    await server.kill();
    expect(alive(pid)).toBe(false);
    await expect(withClient(url, (client) => client.query('SELECT 1'))).rejects.toThrow(/ECONNREFUSED/);
    await open.end().catch(() => {});

    await server.restart();
    expect(server.port).toBe(port);
    expect(server.dataDir).toBe(dataDir);
    expect(server.pid()).not.toBe(pid);
    expect(server.log()).toMatch(/not properly shut down; automatic recovery in progress/);
    const rows = await withClient(url, (client) => client.query('SELECT id, v FROM t ORDER BY id').then((r) => r.rows));
    expect(rows).toEqual([{ id: 1, v: 'committed before the kill' }]);

    const newPid = server.pid();
    await server.stop();
    server = undefined;
    expect(alive(newPid)).toBe(false);
    expect(existsSync(dataDir)).toBe(false);
  });

  it('fails loudly, with the server log, when the server cannot start', async () => {
    const port = await freePort();
    const squatter: Server = createServer((socket) => socket.destroy()); // holds the port, answers nothing
    await new Promise<void>((r) => squatter.listen(port, '127.0.0.1', r));
    try {
      const attempt = startPostgres({ port });
      await expect(attempt).rejects.toThrow(/^PostgreSQL could not be started: [\s\S]*last server log lines[\s\S]*(Address already in use|could not create any TCP\/IP sockets)/);
    } finally {
      await new Promise((r) => squatter.close(r));
    }
  });
});
