/**
 * Finding and cutting one node's LISTEN connection, to test that a lost commit notification
 * only makes that node's readers late. PostgreSQL knows which connections listen but not which
 * node holds them; the node's process knows its connections' local ports (Linux /proc), which
 * PostgreSQL shows as client_port.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import pg from 'pg';

/** Local ports of the TCP connections process `pid` holds to `remotePort` (Linux /proc). */
export function connectionPortsOf(pid: number, remotePort: number): number[] {
  const inodes = socketInodesOf(pid);
  const ports: number[] = [];
  for (const table of ['tcp', 'tcp6']) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const row of text.split('\n').slice(1)) {
      // Columns: sl, local address:port, remote address:port, ..., inode (10th); ports in hex.
      const cols = row.trim().split(/\s+/);
      if (cols.length < 10) continue;
      const local = Number.parseInt(cols[1]!.split(':')[1]!, 16);
      const remote = Number.parseInt(cols[2]!.split(':')[1]!, 16);
      if (remote === remotePort && inodes.has(cols[9]!)) ports.push(local);
    }
  }
  return ports;
}

/** Inodes of the sockets among the open files of process `pid`. */
function socketInodesOf(pid: number): Set<string> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) inodes.add(match[1]!);
    } catch {
      // closed meanwhile
    }
  }
  return inodes;
}

/**
 * Terminates, from SQL, the LISTEN connections of the database at `databaseUrl` whose client
 * port is one of `clientPorts` (one node's); returns how many were terminated.
 */
export async function terminateListeners(databaseUrl: string, clientPorts: number[]): Promise<number> {
  const rows = await query<{ ok: boolean }>(
    databaseUrl,
    `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
      WHERE datname = current_database() AND query ILIKE 'LISTEN%' AND pid <> pg_backend_pid() AND client_port = ANY($1::int[])`,
    [clientPorts],
  );
  return rows.filter((r) => r.ok).length;
}

/** Client ports of the LISTEN connections on the database (any node's). */
export async function listenerPorts(databaseUrl: string): Promise<number[]> {
  const rows = await query<{ port: number }>(
    databaseUrl,
    `SELECT client_port AS port FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()`,
  );
  return rows.map((r) => r.port);
}

/** One query on a connection of its own, closed afterwards. */
async function query<Row extends pg.QueryResultRow>(databaseUrl: string, sql: string, values?: unknown[]): Promise<Row[]> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5_000 });
  // Unheard, an 'error' event (the server going away) would crash the test process; the query's own failure is what counts.
  client.on('error', () => {});
  await client.connect();
  try {
    return (await client.query<Row>(sql, values)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}
