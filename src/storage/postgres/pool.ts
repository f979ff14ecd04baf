/** Pools of connections to the database, as every pool of a node opens them. */
import pg from 'pg';

/**
 * A pool whose connections may drop while idle (the database restarted, a proxy timed
 * them out): one is replaced on its next use. Without these listeners the error would
 * end the process.
 */
export function openPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}
