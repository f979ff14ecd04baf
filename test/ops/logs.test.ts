/**
 * The access log: one line per request at info with its method, route template, status,
 * duration, bytes and id (the id the client gets in X-Request-Id); never a token, an
 * Authorization header or a path; off or sampled when asked.
 */
import { spawn } from 'node:child_process';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccessLines, type AccessFields } from '../../src/ops/access-line.js';
import { createLogger, infoLines, redactUrl, type InfoLines } from '../../src/ops/logger.js';
import { RequestLog } from '../../src/ops/request-log.js';
import { CLI } from '../helpers/server.js';
import { memoryLogger, startInProcess, type Running } from './ops-helpers.js';

/** A loaded machine may take a while; the poll ends as soon as the condition holds. */
const POLL = { timeout: 10_000 };

const SECRET = 'sEcReT-bearer-4f1c';
const QUERY_SECRET = 'sEcReT-query-77aa';

describe('the access log', () => {
  let server: Running;

  beforeAll(async () => {
    server = await startInProcess();
  });
  afterAll(() => server.stop());

  const requestLines = () => server.lines.filter((l) => l.msg === 'request');

  it("writes one line per request with its fields, and answers the request's id in X-Request-Id", async () => {
    await fetch(`${server.url}/log-bucket`, { method: 'PUT' });
    const res = await fetch(`${server.url}/log-bucket/s?token=${QUERY_SECRET}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${SECRET}`, 'content-type': 'text/plain' },
    });
    expect(res.status).toBe(201);
    const id = res.headers.get('x-request-id')!;
    expect(id).toMatch(/^[\w-]+-\w+$/);
    await expect.poll(() => requestLines().find((l) => l.reqId === id), POLL).toBeDefined();
    const line = requestLines().find((l) => l.reqId === id)!;
    expect(line).toMatchObject({ level: 30, method: 'PUT', route: '/{bucket}/{stream}', status: 201, completed: true });
    expect(line.durationMs).toBeTypeOf('number');
    expect(line.durationMs as number).toBeGreaterThanOrEqual(0);
    // The answer's head and its empty body: at least the head's bytes as received.
    expect(line.bytes as number).toBeGreaterThan(100);
    expect(Object.keys(line).sort()).toEqual(['bytes', 'completed', 'durationMs', 'hostname', 'level', 'method', 'msg', 'pid', 'reqId', 'route', 'status', 'time']);
    expect(requestLines().filter((l) => l.reqId === id)).toHaveLength(1);
  });

  it("keeps a client's plain X-Request-Id and replaces one that is not", async () => {
    const kept = await fetch(`${server.url}/healthz`, { headers: { 'x-request-id': 'trace-42.a:b' } });
    expect(kept.headers.get('x-request-id')).toBe('trace-42.a:b');
    const replaced = await fetch(`${server.url}/healthz`, { headers: { 'x-request-id': 'x'.repeat(65) } });
    expect(replaced.headers.get('x-request-id')).not.toBe('x'.repeat(65));
    // Answers written without send() carry it too (SSE here).
    const leave = new AbortController();
    const sse = await fetch(`${server.url}/log-bucket/s?offset=now&live=sse`, { headers: { 'x-request-id': 'sse-1' }, signal: leave.signal });
    expect(sse.headers.get('x-request-id')).toBe('sse-1');
    leave.abort();
    const a = (await fetch(`${server.url}/healthz`)).headers.get('x-request-id');
    const b = (await fetch(`${server.url}/healthz`)).headers.get('x-request-id');
    expect(a).not.toBe(b);
  });

  it('never writes a token, an Authorization header or a stream name', async () => {
    await fetch(`${server.url}/log-bucket/secret-name-x9?token=${QUERY_SECRET}`, { headers: { authorization: `Bearer ${SECRET}` } });
    await expect.poll(() => requestLines().length, POLL).toBeGreaterThanOrEqual(3);
    expect(server.text()).not.toContain(SECRET);
    expect(server.text()).not.toContain(QUERY_SECRET);
    expect(server.text()).not.toContain('secret-name-x9');
  });
});

describe('access lines made without pino', () => {
  it('are, byte for byte, the lines pino writes for the same fields (the time apart), and none when info is off', async () => {
    const made = memoryLogger();
    const byPino = memoryLogger();
    const lines = infoLines(made.log, 'request')!;
    expect(lines).not.toBeNull();
    const access = new AccessLines(lines);
    const cases: AccessFields[] = [
      { reqId: 'a-1', method: 'POST', route: '/{bucket}/{stream}', status: 204, durationMicros: 1250, bytes: 356, completed: true },
      // The same method, route and status again (its text kept), and one not completed.
      { reqId: 'a-2', method: 'POST', route: '/{bucket}/{stream}', status: 204, durationMicros: 7, bytes: 0, completed: false },
      { reqId: 'a-3', method: 'GET', route: '/{bucket}/{stream}', status: 0, durationMicros: 86_400_000_123, bytes: 12_345_678, completed: false },
      { reqId: 'a-4', method: 'PUT', route: '/v1/stream/{name}', status: 503, durationMicros: 1_000, bytes: 1, completed: true },
      { reqId: 'a-5', method: 'GET', route: '/caf\u00e9/"q"', status: 404, durationMicros: 999, bytes: 80, completed: true },
    ];
    for (const fields of cases) {
      access.write(fields);
      const { reqId, method, route, status, durationMicros, bytes, completed } = fields;
      byPino.log.info({ reqId, method, route, status, durationMs: durationMicros / 1000, bytes, completed }, 'request');
    }
    await expect.poll(() => made.lines.length === cases.length && byPino.lines.length === cases.length, POLL).toBe(true);
    const untimed = (text: string) => text.replace(/"time":\d+/g, '"time":0');
    expect(untimed(made.text())).toBe(untimed(byPino.text()));
    expect(infoLines(memoryLogger('warn').log, 'request')).toBeNull();
    // A child has bindings of its own that such a line would leave out: it logs through pino.
    expect(infoLines(made.log.child({ part: 'x' }), 'request')).toBeNull();
  });

  it('print a duration as JavaScript prints the number of milliseconds', () => {
    const written: string[] = [];
    const sink: InfoLines = { start: () => '{', end: '}', ascii: true, write: (line) => void written.push(line) };
    const access = new AccessLines(sink);
    const durations = [...Array.from({ length: 200_000 }, (_, micros) => micros), 999_999_999, 1_000_000_000, 2 ** 31 * 1000 + 7, 86_400_000_000_001];
    for (const durationMicros of durations) access.write({ reqId: 'd', method: 'GET', route: '/', status: 200, durationMicros, bytes: 1, completed: true });
    const wrong = durations.filter((micros, i) => /"durationMs":([^,]*),/.exec(written[i]!)?.[1] !== String(micros / 1000));
    expect(wrong).toEqual([]);
  });
});

describe('redaction and sampling', () => {
  it('the logger redacts Authorization headers and token fields whoever logs them', () => {
    const { log, text } = memoryLogger();
    log.info({ req: { headers: { authorization: `Bearer ${SECRET}`, cookie: SECRET } }, token: QUERY_SECRET, nested: { token: QUERY_SECRET } }, 'x');
    expect(text()).not.toContain(SECRET);
    expect(text()).not.toContain(QUERY_SECRET);
    expect(text()).toContain('[redacted]');
  });

  it("redactUrl hides token query values and keeps the rest", () => {
    expect(redactUrl(`/b/s?offset=-1&token=${QUERY_SECRET}&live=sse`)).toBe('/b/s?offset=-1&token=[redacted]&live=sse');
    expect(redactUrl(`/b/s?access_token=${QUERY_SECRET}`)).toBe('/b/s?access_token=[redacted]');
    // Names are judged decoded, as the server reads them.
    expect(redactUrl(`/b/s?%74oken=${QUERY_SECRET}&TOKEN=${QUERY_SECRET}`)).toBe('/b/s?%74oken=[redacted]&TOKEN=[redacted]');
    expect(redactUrl('/b/s')).toBe('/b/s');
  });

  it('--access-log off writes no request line; a share logs that share of requests, and every 5xx', async () => {
    const off = await startInProcess({ accessLogRate: 0 });
    try {
      for (let i = 0; i < 3; i++) await fetch(`${off.url}/healthz`);
      expect(off.lines.filter((l) => l.msg === 'request')).toHaveLength(0);
    } finally {
      await off.stop();
    }
    const lines: string[] = [];
    const log = createLogger({ level: 'info', destination: new Writable({ write: (c: Buffer, _e, done) => (lines.push(c.toString()), done()) }) });
    const draws = [0.05, 0.5, 0.09, 0.95];
    const sampled = new RequestLog({ log, metrics: null, accessLogRate: 0.1, random: () => draws.shift()! });
    const { createServer } = await import('node:http');
    const statuses = [200, 200, 200, 503, 200];
    const http = createServer((req, res) => {
      const ended = sampled.begin(req, res);
      res.once('close', () => ended?.());
      res.statusCode = statuses.shift()!;
      res.end();
    });
    await new Promise<void>((r) => http.listen(0, '127.0.0.1', () => r()));
    const port = (http.address() as { port: number }).port;
    try {
      for (let i = 0; i < 5; i++) await (await fetch(`http://127.0.0.1:${port}/`)).arrayBuffer();
      await expect.poll(() => lines.length, POLL).toBe(3);
      // Draws below 0.1 are logged (the first and third 200); the 503 always is, without a draw.
      expect(lines.map((l) => (JSON.parse(l) as { status: number }).status)).toEqual([200, 200, 503]);
    } finally {
      http.close();
    }
  });
});

describe('from a rill process', () => {
  /** Runs `node args`, answers its standard output as lines once it exits; `ready` sees it while it runs. */
  function run(args: string[], ready: (child: ReturnType<typeof spawn>, output: () => string) => void): Promise<string[]> {
    const child = spawn(process.execPath, args, { env: { ...process.env, RILL_LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'inherit'] });
    // Joined as bytes: a character split between two chunks must not be decoded in halves.
    const chunks: Buffer[] = [];
    const output = () => Buffer.concat(chunks).toString();
    child.stdout.on('data', (d: Buffer) => {
      chunks.push(d);
      ready(child, output);
    });
    return new Promise((resolve) => child.once('exit', () => resolve(output().split('\n').filter((l) => l !== ''))));
  }

  it("writes every request's line, in order, before the lines logged after it, the last ones at SIGTERM", async () => {
    let asked = false;
    const lines = await run([CLI, 'serve', '--store', 'memory', '--port', '0'], (child, output) => {
      const url = /rill listening on (http:\/\/[\d.:]+)/.exec(output())?.[1];
      if (url === undefined || asked) return;
      asked = true;
      void (async () => {
        for (let i = 1; i <= 5; i++) await (await fetch(`${url}/healthz`, { headers: { 'x-request-id': `held-${i}` } })).arrayBuffer();
        // At once: the lines of these requests are still held when the signal comes.
        child.kill('SIGTERM');
      })();
    });
    const parsed = lines.map((l) => JSON.parse(l) as { msg: string; reqId?: string });
    const order = parsed.filter((l) => l.reqId?.startsWith('held-') || l.msg === 'draining' || l.msg === 'stopped').map((l) => l.reqId ?? l.msg);
    expect(order).toEqual(['held-1', 'held-2', 'held-3', 'held-4', 'held-5', 'draining', 'stopped']);
  });

  /** A script that holds three access lines, the second of them not ASCII, then does `thenWhat`. */
  const heldLinesScript = (thenWhat: string) => `import { AccessLines } from ${JSON.stringify(new URL('../../dist/ops/access-line.js', import.meta.url).href)};
      import { createLogger, infoLines } from ${JSON.stringify(new URL('../../dist/ops/logger.js', import.meta.url).href)};
      const log = createLogger({ level: 'info', pretty: false });
      log.info('first');
      // Once 'first' is written: a write still in flight at exit is the thread pool's to finish, in no set order.
      log.flush(() => {
        const access = new AccessLines(infoLines(log, 'request'));
        const line = (reqId, route) => access.write({ reqId, method: 'GET', route, status: 200, durationMicros: 5, bytes: 9, completed: true });
        line('held-0', '/a');
        line('held-1', '/\u00e9t\u00e9/\u{1F30A}');
        line('held-2', '/a');
        ${thenWhat}
      });`;
  const routes = ['/a', '/\u00e9t\u00e9/\u{1F30A}', '/a'];

  it('writes the lines still held when the process exits', async () => {
    const lines = (await run(['--input-type=module', '-e', heldLinesScript('process.exit(0);')], () => {})).map((l) => JSON.parse(l) as { reqId?: string; route?: string; msg: string });
    expect(lines.map((l) => l.reqId ?? l.msg)).toEqual(['first', 'held-0', 'held-1', 'held-2']);
    expect(lines.slice(1).map((l) => l.route)).toEqual(routes);
  });

  it('writes held lines that are not ASCII as they were made, when another line releases them', async () => {
    const script = heldLinesScript("log.info('last'); log.flush(() => process.exit(0));");
    const lines = (await run(['--input-type=module', '-e', script], () => {})).map((l) => JSON.parse(l) as { reqId?: string; route?: string; msg: string });
    expect(lines.map((l) => l.reqId ?? l.msg)).toEqual(['first', 'held-0', 'held-1', 'held-2', 'last']);
    expect(lines.slice(1, 4).map((l) => l.route)).toEqual(routes);
  });
});

describe('on a terminal', () => {
  it('writes readable lines instead of JSON', async () => {
    // `script` gives rill a pseudo-terminal; closing it (SIGTERM to script) hangs rill up.
    const child = spawn('script', ['-qec', `exec ${process.execPath} ${CLI} serve --store memory --port 0`, '/dev/null'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    await new Promise<void>((resolve) =>
      child.stdout.on('data', (d: Buffer) => {
        output += d.toString();
        if (output.includes('rill listening')) resolve();
      }),
    );
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    expect(output).toMatch(/INFO.*rill listening on http:\/\/127\.0\.0\.1:\d+/);
    expect(output).not.toContain('{"level"');
  });
});
