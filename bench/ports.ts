/**
 * A free TCP port on 127.0.0.1, for servers the bench and the tests start.
 *
 * Taken below the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), not
 * by listening on port 0: ports in that range are what every outgoing connection gets
 * its local port from, so one of a test's many connections could take a port between
 * the probe and the server's listen, or while a server killed by a test is started again
 * on its port. Below the range, only another probe can.
 */
import { randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** The lowest port handed out; ports under it are left to services that use fixed ones. */
const LOWEST_PORT = 10_000;
/** Ports tried below the ephemeral range before letting the kernel choose one in it. */
const TRIES = 50;
/**
 * Ports from LOWEST_PORT up that `fetch` refuses to connect to (the Fetch standard's "bad
 * ports"): a server there is never reached by a test's `/healthz` probe. A crash test's
 * restart drew 10080 once and failed with "did not become healthy" (last probe: "bad port").
 */
const FETCH_BLOCKED_PORTS = new Set([10_080]);

/** `pick` draws a candidate in [low, high); tests give their own to draw a blocked one. */
export async function freePort(pick: (low: number, high: number) => number = randomInt): Promise<number> {
  const end = ephemeralStart();
  if (end !== null && end > LOWEST_PORT) {
    for (let i = 0; i < TRIES; i++) {
      const port = pick(LOWEST_PORT, end);
      if (FETCH_BLOCKED_PORTS.has(port)) continue;
      if ((await listenedOn(port)) !== null) return port;
    }
  }
  const port = await listenedOn(0);
  if (port === null) throw new Error('no free TCP port on 127.0.0.1');
  return port;
}

/** The first port of the kernel's ephemeral range, or null where it cannot be read (not Linux). */
function ephemeralStart(): number | null {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) ? low : null;
  } catch {
    return null;
  }
}

/** Listens on the port (0: one the kernel picks) and closes again: the port, or null if it is taken. */
function listenedOn(port: number): Promise<number | null> {
  return new Promise((resolvePort, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => (error.code === 'EADDRINUSE' ? resolvePort(null) : reject(error)));
    probe.listen(port, '127.0.0.1', () => {
      const address = probe.address();
      const bound = typeof address === 'object' && address ? address.port : 0;
      probe.close(() => resolvePort(bound));
    });
  });
}
