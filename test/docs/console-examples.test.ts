/**
 * The ```console examples of the README and of every guide, run: the commands a reader
 * types in a terminal of their own, each block in a fresh directory with its own bash
 * session, `rill` on the PATH (the built CLI) and `curl` as in test/docs/readme.test.ts.
 *
 * - `$ rill serve ...` (or `npx rill serve`) starts a server in the background of that
 *   session, on a free port in place of the one the text names (4437 or `--port N`); the
 *   block goes on once it answers /healthz, with `$B` and `RILL_URL` naming it, and a later
 *   `rill serve` in the block first stops it, as the reader would. Lines shown after it must
 *   appear in what it printed.
 * - Any other command must exit 0 with every curl answer below 400, unless its `# →` comment
 *   states otherwise (the README's convention), and every line shown after it must appear in
 *   its output, `...` and `…` standing for anything.
 *
 * What the text presumes but does not show (a secret file, an admin token, a PostgreSQL
 * server at db.internal, a webhook receiver on port 8080, an application directory to
 * install into) comes from STAND_INS, each with why. Two blocks are not run, each with its
 * reason: the README's first (`npm test` runs this very test; `.ci/run` runs both of its
 * lines) and the benchmark's (23 minutes).
 */
import { execFileSync } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, freePort, removeDir, tempDataDir } from '../helpers/server.js';
import { until } from '../helpers/waits.js';
import { sharedDatabase } from '../helpers/postgres.js';
import { startTestS3, TEST_BUCKET, type TestS3 } from '../helpers/s3.js';
import { consoleBlocks, guides, type ConsoleBlock, type ConsoleCommand } from './markdown.js';
import { expectStated, Shell, splitStatuses } from './shell.js';

const ROOT = resolve(import.meta.dirname, '../..');
const COMMAND_TIMEOUT_MS = 60_000;
/** Longest the webhook block waits for rill's delivery before it fails, saying so. */
const DELIVERY_WAIT_MS = 30_000;
const SERVE = /^(?:\w+=\S+\s+)*(?:npx\s+)?rill serve\b/;

/** A webhook request the stand-in receiver took. */
interface Delivery {
  headers: IncomingHttpHeaders;
  body: string;
}

/** What a block may ask of its run before a command (`before`). */
interface BlockRun {
  /** The first webhook the block's receiver took (waits for it). */
  delivery(): Promise<Delivery>;
  /** Runs shell text the document does not show; it must succeed. */
  hidden(text: string): Promise<string>;
}

interface StandIn {
  /** Which block: its document and the start of its first command. */
  doc: string;
  first: string;
  /** Why the text needs it. */
  why: string;
  /** Run hidden in the block's directory first, before `server`. */
  setup?: string;
  /** Run hidden in the block's directory before its commands (after `server`, when given). */
  prepare?: string;
  /** A server the text presumes runs already: its `rill serve` command. */
  server?: string;
  /** Texts replaced in the block's commands and shown lines; `{free}` is a free port, `{postgres}` a fresh database, `{s3}` the port of an S3 server (s3rver, bucket TEST_BUCKET). */
  replace?: Array<[string, string]>;
  /** Stop the block's server before the command whose text matches (the text says to). */
  stopServerBefore?: RegExp;
  /** Hidden shell text to run before the command whose text matches. */
  before?: Array<{ match: RegExp; run: (block: BlockRun) => Promise<string> }>;
  /** Not run, and why. */
  notRun?: string;
}

/** Installs as the README says, from the npm cache the suite's own install filled. */
const OFFLINE = '--prefer-offline --no-audit --no-fund';

const STAND_INS: StandIn[] = [
  {
    doc: 'README.md',
    first: 'npm install && npm start',
    why: 'the two commands of a fresh clone',
    notRun: '`npm test` is the command running this test, and `.ci/run` runs `npm ci` and `npm test` on a fresh machine; `npm start` is `npm run build` (the test command builds first) and then `rill serve`, which the next block runs',
  },
  {
    doc: 'README.md',
    first: 'npm run bench',
    why: 'the benchmark',
    notRun: 'it runs for about 23 minutes on a quiet machine and is no test (docs/performance.md)',
  },
  {
    doc: 'README.md',
    first: 'git clone <this repository> rill',
    why: 'a clone of this repository, installed and built',
    // `npm install` would compile better-sqlite3 (about 90 s) and `npm run build` repeat
    // the build `npm test` made: the clone gets those, from the same lock file and sources.
    replace: [
      ['<this repository>', ROOT],
      ['npm install && npm run build', `ln -s ${ROOT}/node_modules node_modules && cp -r ${ROOT}/dist dist`],
    ],
  },
  {
    doc: 'README.md',
    first: 'npm pack ',
    why: 'the clone of the block before, and an application to install into',
    prepare: `git clone -q ${ROOT} rill && cd rill && ln -s ${ROOT}/node_modules node_modules && cp -r ${ROOT}/dist dist && mkdir ../my-app && cd ../my-app && npm init -y > /dev/null && cd ../rill`,
    // The package's prepack is the build `npm test` already made; better-sqlite3's install
    // script compiles it (about 90 s): the application gets the same compiled module instead.
    replace: [
      ['npm pack ', 'npm pack --ignore-scripts '],
      ['npm install ../rill/rill-streams-0.1.0.tgz', `npm install ${OFFLINE} --ignore-scripts ../rill/rill-streams-0.1.0.tgz && cp -r ${ROOT}/node_modules/better-sqlite3/build node_modules/better-sqlite3/`],
    ],
  },
  {
    doc: 'README.md',
    first: 'npm run pack:client',
    why: 'the clone, and an application to install into',
    prepare: `git clone -q ${ROOT} rill && cd rill && ln -s ${ROOT}/node_modules node_modules && mkdir ../my-app && cd ../my-app && npm init -y > /dev/null && cd ../rill`,
    replace: [['npm install ../rill/rill-streams-client-0.1.0.tgz', `npm install ${OFFLINE} ../rill/rill-streams-client-0.1.0.tgz`]],
  },
  {
    doc: 'README.md',
    first: 'export AWS_REGION=',
    why: 'an S3 server (s3rver, as the cold tier\'s tests use) and its bucket in place of the text\'s endpoint, keys and bucket',
    replace: [
      ['AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=...', 'AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER'],
      ['http://127.0.0.1:9000', 'http://127.0.0.1:{s3}'],
      ['s3://my-bucket/rill', `s3://${TEST_BUCKET}/rill`],
    ],
  },
  {
    doc: 'docs/operating.md',
    first: 'cat rill.toml',
    why: 'the file the block shows; its data directory inside the block\'s own, its metrics on a free port',
    prepare: "printf 'port = 8080\\ndata = \"./var-lib-rill\"\\nlong-poll-timeout = \"30s\"\\naccess-log = \"0.1\"\\nmetrics-port = {free}\\n' > rill.toml",
    replace: [['/var/lib/rill', './var-lib-rill'], ['9464', '{free}']],
  },
  {
    doc: 'docs/operating.md',
    first: 'export AWS_REGION=',
    why: 'an S3 server (s3rver, as the cold tier\'s tests use) and its bucket in place of the text\'s endpoint, keys and bucket; a hot window of 64 KiB and no age (bytes younger than the age stay hot), segments of 64 KiB, so that most of 1 MiB written before the check moves, and the check then verifies real objects',
    replace: [
      ['AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=...', 'AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER'],
      ['http://127.0.0.1:9000', 'http://127.0.0.1:{s3}'],
      ['s3://my-bucket/rill', `s3://${TEST_BUCKET}/rill`],
      ['--cold-hot-bytes 64MiB --cold-hot-age 10m', '--cold-hot-bytes 64KiB --cold-hot-age 0s --cold-segment-bytes 64KiB --cold-upload-interval 100ms'],
    ],
    before: [
      {
        match: /^rill check /,
        // 1 MiB in 64 KiB appends, then wait until the server reports uploads done.
        run: async () =>
          [
            'curl -sf -X PUT -H "Content-Type: text/plain" $B/v1/stream/history -o /dev/null',
            'for i in $(seq 16); do head -c 65536 /dev/zero | tr "\\0" a | curl -sf -X POST -H "Content-Type: text/plain" --data-binary @- $B/v1/stream/history -o /dev/null; done',
            'until curl -s $B/stats | grep -q \'"uploads":[1-9]\'; do sleep 0.1; done',
          ].join(' && '),
      },
    ],
  },
  {
    doc: 'docs/operating.md',
    first: 'rill backup ',
    why: 'the running server the backup is taken beside, a directory for backups, and the stop the text asks for before restoring',
    server: 'rill serve --data ./data',
    stopServerBefore: /^rill restore/,
    prepare: 'mkdir backups && curl -X PUT -H "Content-Type: text/plain" --data-binary hello $B/v1/stream/first',
    replace: [['/backups/', './backups/']],
  },
  {
    doc: 'docs/postgres.md',
    first: 'export RILL_POSTGRES_URL=',
    why: 'a PostgreSQL database (the suite\'s own server, a fresh database) in place of db.internal; loopback in place of every address',
    replace: [['postgres://rill:secret@db.internal:5432/rill', '{postgres}'], ['--host 0.0.0.0', '--host 127.0.0.1']],
  },
  {
    doc: 'docs/security.md',
    first: '(umask 077;',
    why: 'the JWKS file the second server reads',
    prepare: "node -e 'const { generateKeyPairSync } = require(\"node:crypto\"); const jwk = generateKeyPairSync(\"ed25519\").publicKey.export({ format: \"jwk\" }); console.log(JSON.stringify({ keys: [{ ...jwk, kid: \"k1\", alg: \"EdDSA\" }] }))' > keys.json",
  },
  {
    doc: 'docs/security.md',
    first: 'ADMIN=$(rill token',
    why: 'the server with auth on that the section before started',
    setup: '(umask 077; head -c 32 /dev/urandom | base64 > rill.secret)',
    server: 'rill serve --auth-secret-file rill.secret',
  },
  {
    doc: 'docs/security.md',
    first: 'A=$(rill token',
    why: 'the server with auth on that the section before started',
    setup: '(umask 077; head -c 32 /dev/urandom | base64 > rill.secret)',
    server: 'rill serve --auth-secret-file rill.secret',
  },
  {
    doc: 'docs/security.md',
    first: 'curl -X PATCH -H "Authorization: Bearer $ADMIN"',
    why: 'the server with auth on, its admin token, and bucket news with the three streams and 1,204 bytes the answer shows',
    setup: '(umask 077; head -c 32 /dev/urandom | base64 > rill.secret)',
    prepare: [
      'ADMIN=$(rill token --secret-file rill.secret --bucket "*" --can admin --ttl 1h --sub root)',
      'curl -X PUT -H "Authorization: Bearer $ADMIN" $B/news',
      'for s in a b; do curl -X PUT -H "Authorization: Bearer $ADMIN" -H "Content-Type: text/plain" $B/news/$s; done',
      'head -c 1204 /dev/zero | tr "\\0" x | curl -X PUT -H "Authorization: Bearer $ADMIN" -H "Content-Type: text/plain" --data-binary @- $B/news/c',
    ].join(' && '),
    server: 'rill serve --auth-secret-file rill.secret',
  },
  {
    doc: 'docs/security.md',
    first: 'rill serve --auth-secret-file rill.secret --tls-cert',
    why: 'the secret, a certificate and its key; loopback in place of every address',
    prepare: [
      '(umask 077; head -c 32 /dev/urandom | base64 > rill.secret)',
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -keyout key.pem -out cert.pem -subj /CN=localhost -addext 'subjectAltName=IP:127.0.0.1' 2> /dev/null",
      'chmod 600 key.pem',
    ].join(' && '),
    replace: [['--host 0.0.0.0', '--host 127.0.0.1']],
  },
  {
    doc: 'docs/subscriptions.md',
    first: 'curl -X POST $B/v1/stream/__ds/subscriptions/order-worker/ack',
    why: 'the default server, and the wake the sh example before claimed: its token and id',
    server: 'rill serve',
    prepare: [
      `curl -X PUT $B/v1/stream/wakes -H 'Content-Type: application/json'`,
      `curl -X PUT $B/v1/stream/__ds/subscriptions/order-worker -H 'Content-Type: application/json' --data-binary '{"type":"pull-wake","pattern":"orders/*","wake_stream":"wakes"}'`,
      `curl -X PUT $B/v1/stream/orders/1 -H 'Content-Type: application/json'`,
      `curl -X POST $B/v1/stream/orders/1 -H 'Content-Type: application/json' --data-binary '{"order":1,"total":12}'`,
      `rill subs claim order-worker --worker w1 > wake.json`,
      `TOKEN=$(node -p 'require("./wake.json").token') && WAKE_ID=$(node -p 'require("./wake.json").wakeId')`,
    ].join(' && '),
  },
  {
    doc: 'docs/subscriptions.md',
    first: 'rill serve --webhook-allow-localhost',
    why: 'a receiver on a free port in place of 8080, stream orders/1 with data for the wake, and the callback of the wake it took',
    replace: [['localhost:8080', 'localhost:{receiver}'], ['"wake_id":"…"', `"wake_id":"'$WAKE_ID'"`]],
    before: [
      {
        // New data on a stream the subscription follows makes the wake the receiver takes.
        match: /^curl -X POST "\$CALLBACK_URL"/,
        run: async (block) => {
          await block.hidden(`curl -X PUT $B/v1/stream/orders/1 -H 'Content-Type: application/json' && curl -X POST $B/v1/stream/orders/1 -H 'Content-Type: application/json' --data-binary '{"order":1,"total":12}'`);
          const wake = JSON.parse((await block.delivery()).body) as { callback_url: string; callback_token: string; wake_id: string };
          return `CALLBACK_URL='${wake.callback_url}' CALLBACK_TOKEN='${wake.callback_token}' WAKE_ID='${wake.wake_id}'`;
        },
      },
    ],
  },
];

/** Each document with console examples: the README, then its guides in its order. */
const DOCS = ['README.md', ...guides(readFileSync(join(ROOT, 'README.md'), 'utf8'))];

function standInOf(doc: string, block: ConsoleBlock): StandIn | undefined {
  return STAND_INS.find((s) => s.doc === doc && block.commands[0]?.text.startsWith(s.first));
}

let work: string;
let bin: string;

beforeAll(() => {
  work = tempDataDir('rill-console-examples-');
  bin = join(work, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'rill'), `#!/bin/sh\nexec "${process.execPath}" "${CLI}" "$@"\n`);
  chmodSync(join(bin, 'rill'), 0o755);
});

afterAll(() => {
  if (work) removeDir(work);
});

/** A receiver of webhooks on a free port: answers 200 without acking, keeps what it took. */
async function webhookReceiver(): Promise<{ port: number; server: Server; delivery(): Promise<Delivery> }> {
  const taken: Delivery[] = [];
  let arrived: (() => void) | undefined;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      taken.push({ headers: req.headers, body });
      arrived?.();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const port = (server.address() as { port: number }).port;
  // Resolves when the first delivery arrives; the timer is a bound only a bug reaches.
  const delivery = async (): Promise<Delivery> => {
    if (taken.length === 0) {
      await new Promise<void>((done, fail) => {
        const timer = setTimeout(() => fail(new Error(`no webhook reached the receiver on port ${port} within ${DELIVERY_WAIT_MS} ms`)), DELIVERY_WAIT_MS);
        arrived = () => {
          clearTimeout(timer);
          done();
        };
      });
    }
    return taken[0]!;
  };
  return { port, server, delivery };
}

/** What a stand-in's placeholders stand for in one block: made once, on first use. */
class Placeholders {
  private readonly values = new Map<string, string>();
  constructor(private readonly receiverPort: number | undefined) {}

  async fill(text: string): Promise<string> {
    let out = text;
    for (const name of ['free', 'postgres', 'receiver', 's3']) {
      if (out.includes(`{${name}}`)) out = out.replaceAll(`{${name}}`, await this.value(name));
    }
    return out;
  }

  private async value(name: string): Promise<string> {
    if (!this.values.has(name)) {
      if (name === 'receiver' && this.receiverPort === undefined) throw new Error('{receiver} in a stand-in without a receiver');
      this.values.set(name, await this.make(name));
    }
    return this.values.get(name)!;
  }

  private async make(name: string): Promise<string> {
    if (name === 'free') return String(await freePort());
    if (name === 'postgres') return sharedDatabase();
    if (name === 's3') {
      this.s3 = await startTestS3();
      return new URL(this.s3.endpoint).port;
    }
    return String(this.receiverPort);
  }

  /** An S3 server `{s3}` started (its port), stopped with the block. */
  private s3: TestS3 | undefined;

  async close(): Promise<void> {
    await this.s3?.close();
  }
}

/** A server a block started in the background of its shell. */
interface BlockServer {
  pid: number;
  url: string;
  outFile: string;
}

/**
 * One block, run: its shell in a directory of its own, the server it started (stopped
 * before the next one starts, and at the end), the replacements of its stand-in.
 */
class BlockRunner {
  private readonly shell: Shell;
  private server: BlockServer | undefined;
  private serves = 0;
  /** Texts replaced in every command and shown line from here on: the stand-in's, then the ports servers took. */
  private readonly replacements: Array<[string, string]> = [];

  constructor(
    readonly doc: string,
    private readonly dir: string,
  ) {
    mkdirSync(dir, { recursive: true });
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${bin}:${process.env.PATH}` };
    delete env.RILL_URL;
    this.shell = new Shell(env, dir, COMMAND_TIMEOUT_MS);
  }

  async start(): Promise<void> {
    // Background jobs in their own process group, so that stopping one stops what it started (npx's node).
    await this.hidden(`set -m; ${this.shell.functions()}`);
  }

  replaceFromHere(pairs: Array<[string, string]>): void {
    this.replacements.push(...pairs);
  }

  rewrite(text: string): string {
    return this.replacements.reduce((out, [from, to]) => out.replaceAll(from, to), text);
  }

  /** Runs shell text the document does not show; it must succeed. */
  async hidden(text: string): Promise<string> {
    const raw = await this.shell.run({ text, line: 0, untilCtrlC: false }, join(this.dir, '.hidden.out'), this.doc);
    const where = `${this.doc}: the stand-in's hidden commands failed:\n${text}\n${raw.output}`;
    expect(raw.exit, where).toBe(0);
    const { statuses, shown } = splitStatuses(raw.output);
    for (const status of statuses) expect(status, where).toBeLessThan(400);
    return shown;
  }

  async run(command: ConsoleCommand): Promise<void> {
    const text = this.rewrite(command.text);
    const shown = command.shown.map((line) => this.rewrite(line));
    // `$ # ...`: a comment typed at the prompt (bash takes a group of only a comment as a syntax error).
    if (text.trim().startsWith('#')) return;
    if (SERVE.test(text.trim())) return this.serve(text, shown, command.line);
    const raw = await this.shell.run({ ...command, text }, join(this.dir, '.command.out'), this.doc);
    const output = expectStated({ ...command, text }, raw, this.doc);
    for (const line of shown) expectShown(output, line, `${this.doc} line ${command.line}: ${text}`);
  }

  /** Starts `rill serve` in the background on a free port, waits until it answers, and checks what it printed. */
  private async serve(text: string, shown: string[], line: number): Promise<void> {
    await this.stopServer();
    const port = await freePort();
    const named = /--port (\d+)/.exec(text)?.[1];
    const previous = named ?? '4437';
    const command = named ? text.replaceAll(`--port ${named}`, `--port ${port}`) : `RILL_PORT=${port} ${text}`;
    const tls = /--tls-cert\b/.test(command);
    const url = `${tls ? 'https' : 'http'}://127.0.0.1:${port}`;
    const outFile = join(this.dir, `.serve-${++this.serves}.out`);
    const pid = Number((await this.hidden(`{ ${command}\n} > ${outFile} 2>&1 < /dev/null &\necho $!`)).trim());
    this.server = { pid, url, outFile };
    await this.untilAnswers(`${this.doc} line ${line}: ${text}`);
    // From here on the block's text names this server where it named the one it meant.
    this.replaceFromHere([[`127.0.0.1:${previous}`, `127.0.0.1:${port}`], [`localhost:${previous}`, `localhost:${port}`]]);
    if (named) this.replaceFromHere([[named, String(port)]]);
    await this.hidden(`export B=${url} RILL_URL=${url}`);
    const printed = readFileSync(outFile, 'utf8');
    for (const expected of shown) expectShown(printed, this.rewrite(expected), `${this.doc} line ${line}: ${text}`);
  }

  private async untilAnswers(where: string): Promise<void> {
    const server = this.server!;
    await until(async () => {
      if (!processRuns(server.pid)) throw new Error(`${where}: the server exited:\n${readFileSync(server.outFile, 'utf8')}`);
      return healthy(server.url);
    }, `${where}: the server to answer /healthz`, COMMAND_TIMEOUT_MS);
  }

  async stopServer(): Promise<void> {
    if (!this.server) return;
    const { pid } = this.server;
    this.server = undefined;
    await this.hidden(`kill -TERM -- -${pid} 2> /dev/null; wait ${pid} || true`);
  }

  /** Ends the block: its server stopped by its process group from here, as the shell may still be busy with a command that failed. */
  close(): void {
    if (this.server) {
      try {
        process.kill(-this.server.pid, 'SIGTERM');
      } catch {
        // Exited already.
      }
      this.server = undefined;
    }
    this.shell.close();
  }
}

/** Whether the process still runs (a zombie, exited but not yet waited for, does not). */
function processRuns(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** Whether GET /healthz answers 200 (over TLS, from a server whose certificate the test made). */
function healthy(url: string): Promise<boolean> {
  return new Promise((done) => {
    if (url.startsWith('http:')) {
      fetch(`${url}/healthz`).then((r) => done(r.status === 200), () => done(false));
      return;
    }
    httpsRequest(`${url}/healthz`, { rejectUnauthorized: false }, (res) => {
      res.resume();
      done(res.statusCode === 200);
    })
      .on('error', () => done(false))
      .end();
  });
}

/** A shown line appears in the output: its parts between `...` or `…`, in order. */
function expectShown(output: string, line: string, where: string): void {
  let from = 0;
  for (const part of line.split(/\.\.\.|…/).map((p) => p.trim()).filter((p) => p !== '')) {
    const at = output.indexOf(part, from);
    expect(at, `${where}\nshows ${JSON.stringify(part)}, which the output lacks:\n${output}`).toBeGreaterThanOrEqual(0);
    from = at + part.length;
  }
}

/** Runs one block with its stand-in. */
async function runBlock(doc: string, block: ConsoleBlock, standIn: StandIn | undefined, dir: string): Promise<void> {
  const receiver = standIn?.replace?.some(([, to]) => to.includes('{receiver}')) ? await webhookReceiver() : undefined;
  const values = new Placeholders(receiver?.port);
  const runner = new BlockRunner(doc, dir);
  try {
    await runner.start();
    if (standIn?.setup) await runner.hidden(await values.fill(standIn.setup));
    if (standIn?.server) await runner.run({ text: standIn.server, line: block.line, untilCtrlC: false, shown: [] });
    if (standIn?.prepare) await runner.hidden(await values.fill(standIn.prepare));
    const pairs = await Promise.all((standIn?.replace ?? []).map(async ([from, to]) => [await values.fill(from), await values.fill(to)] as [string, string]));
    runner.replaceFromHere(pairs);
    for (const command of block.commands) {
      const before = standIn?.before?.find((b) => b.match.test(command.text));
      if (before) await runner.hidden(await before.run({ delivery: () => receiver!.delivery(), hidden: (text) => runner.hidden(text) }));
      if (standIn?.stopServerBefore?.test(command.text)) await runner.stopServer();
      await runner.run(command);
    }
  } finally {
    runner.close();
    receiver?.server.close();
    await values.close();
  }
}

describe('the console examples of the README and the guides', () => {
  const found = DOCS.flatMap((doc) => consoleBlocks(readFileSync(join(ROOT, doc), 'utf8')).map((block) => ({ doc, block })));

  for (const [n, { doc, block }] of found.entries()) {
    const standIn = standInOf(doc, block);
    const title = `${doc} line ${block.line} (${block.commands[0]?.text.split('\n')[0] ?? 'empty'})`;
    if (standIn?.notRun) continue;
    it(`${title} runs as written, with the outcome and output it shows`, { timeout: 180_000 }, async () => {
      expect(block.commands.length, 'a console block shows at least one $ command').toBeGreaterThan(0);
      await runBlock(doc, block, standIn, join(work, `block-${n}`));
    });
  }

  it('every stand-in names a block that exists, once', () => {
    for (const standIn of STAND_INS) {
      const matches = found.filter(({ doc, block }) => standInOf(doc, block) === standIn);
      expect(matches.length, `${standIn.doc}: ${standIn.first}`).toBe(1);
    }
  });

  // A replacement that no longer matches leaves the block running what the stand-in says it
  // spares: `$ npm pack ` never matched a command (its text has no prompt), so the package's
  // build ran again inside the test.
  it('every replacement of a stand-in matches its block', () => {
    for (const standIn of STAND_INS) {
      const block = found.find(({ doc, block }) => standInOf(doc, block) === standIn)?.block;
      const text = (block?.commands ?? []).flatMap((command) => [command.text, ...command.shown]).join('\n');
      for (const [from] of standIn.replace ?? []) expect(text, `${standIn.doc}: ${standIn.first}: replaces ${from}`).toContain(from);
    }
  });
});
