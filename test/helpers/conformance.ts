/**
 * How both runs of the upstream conformance suite (test/conformance.test.ts on SQLite,
 * test/conformance-postgres.test.ts on PostgreSQL) start rill and configure the suite.
 */

/**
 * The server's long-poll wait, which the suite is told as `longPollTimeoutMs`. The suite
 * bounds each long-poll test at this wait plus one second, so the wait sets the slack of
 * those tests: at 500 ms, "should wait for new data with long-poll" (a reader that must
 * see an append made 500 ms after it starts waiting, normally in about 520 ms) timed out
 * at 1,622 ms once, with three test files loading both cores. At 1,500 ms its bound is
 * 2.5 s. The cost is the tests that wait out the whole wait (a 204 at the tail, two
 * `offset=now` long-polls): about 3 s more of waiting per run of the suite, no CPU.
 */
const LONG_POLL_WAIT_MS = 1_500;

/** The arguments of `rill serve` for the suite. */
export const CONFORMANCE_SERVER_ARGS = [
  '--long-poll-timeout', `${LONG_POLL_WAIT_MS}ms`,
  // The suite's CORS preflight test calls from this origin, as a browser app served there
  // would (rill allows only loopback pages by default).
  '--cors-origin', 'https://example.com',
  // The subscription group is on: its webhook receiver listens on 127.0.0.1 over http,
  // which rill refuses unless told it is a development setup.
  '--webhook-allow-localhost',
];

/** The suite's configuration; `baseUrl` is set once the server is up. */
export function conformanceConfig(): { baseUrl: string; longPollTimeoutMs: number; subscriptions: boolean } {
  return { baseUrl: '', longPollTimeoutMs: LONG_POLL_WAIT_MS, subscriptions: true };
}
