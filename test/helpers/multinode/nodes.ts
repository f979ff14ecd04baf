/**
 * A rill node for multi-node tests: a real `rill serve --store postgres` child process on a
 * database it shares with other nodes, which a test can SIGKILL and restart on the same port (so
 * that clients holding its URL find it again, as they would a restarted server behind a fixed
 * address).
 */
import { removeDir, startServer, type ServerProcess } from '../server.js';
import { sleep } from './send.js';

/** Starts after a kill may find the port still briefly taken: this many tries, this far apart. */
const RESTART_TRIES = 5;
const RESTART_RETRY_PAUSE_MS = 200;

export class RillNode {
  /** Times this node was started after a kill. */
  restarts = 0;
  /** How long each restart took until /healthz answered. */
  readonly restartMs: number[] = [];

  private constructor(
    readonly name: string,
    readonly postgresUrl: string,
    readonly port: number,
    readonly args: string[],
    private server: ServerProcess | null,
  ) {}

  static async start(name: string, postgresUrl: string, args: string[] = [], port?: number): Promise<RillNode> {
    const server = await startServer({ process: true, postgresUrl, port, args });
    return new RillNode(name, postgresUrl, server.port, args, server);
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.server?.child.pid;
  }

  /** The process is running (started and not exited). */
  get alive(): boolean {
    const child = this.server?.child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  output(): string {
    return this.server?.output() ?? '';
  }

  /** SIGKILL; resolves once the process is gone (its unused data dir is removed). */
  async kill(): Promise<void> {
    const server = this.server;
    this.server = null;
    await server?.kill();
    if (server) removeDir(server.dataDir);
  }

  /** Starts the node again on its port (a few tries: the port may be briefly taken). */
  async restart(): Promise<void> {
    if (this.server) throw new Error(`${this.name} is still running`);
    const started = Date.now();
    let lastError: unknown;
    for (let attempt = 0; attempt < RESTART_TRIES; attempt++) {
      try {
        this.server = await startServer({ process: true, postgresUrl: this.postgresUrl, port: this.port, args: this.args });
        this.restarts += 1;
        this.restartMs.push(Date.now() - started);
        return;
      } catch (error) {
        lastError = error;
        await sleep(RESTART_RETRY_PAUSE_MS); // backoff before the next start, as a supervisor's
      }
    }
    throw lastError;
  }

  /** For afterAll: SIGKILL whatever is running (the database is dropped with the run). */
  async dispose(): Promise<void> {
    await this.kill().catch(() => {});
  }
}
