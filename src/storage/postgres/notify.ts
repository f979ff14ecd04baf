/**
 * Commit hints between nodes over PostgreSQL's LISTEN/NOTIFY. A batch that changed
 * streams sends, inside its transaction, the names it changed (writes.ts; delivered only
 * if it commits); every node listens on one connection of its own. A hint only says "look
 * again": when the connection drops, hints sent meanwhile are lost, so on reconnecting
 * the listener reports null (look at everything) and the live layer's periodic check
 * covers whatever else goes missing.
 *
 * A node alone sends no hints (issue 41: a batch's NOTIFY woke the node's own listening
 * connection on every commit; without it, 5-27% less server CPU per append in paired
 * runs, docs/performance.md).
 * Nodes count each other by their listening connections' application_name, which
 * pg_stat_activity shows to every role, every second; and a node that starts listening
 * says so on the channel (a hint without names), so that the others hint it from then on
 * rather than from their next count. Until a node has counted, and while it cannot, it
 * hints. A hint missed meanwhile is one more lost hint: a reader late by at most the
 * periodic check, never wrong.
 */
import pg from 'pg';
import type { Queryable } from './chunks.js';

export const HINT_CHANNEL = 'rill_commits';
/** PostgreSQL refuses payloads of 8000 bytes or more. */
const MAX_PAYLOAD_BYTES = 7900;

/** The payloads announcing `names` as changed by node `nodeId`. */
export function hintPayloads(nodeId: string, names: Iterable<string>): string[] {
  const payloads: string[] = [];
  let current = nodeId;
  for (const name of names) {
    if (Buffer.byteLength(current) + 1 + Buffer.byteLength(name) > MAX_PAYLOAD_BYTES) {
      payloads.push(current);
      current = nodeId;
    }
    current += `\n${name}`;
  }
  if (current !== nodeId) payloads.push(current);
  return payloads;
}

/** The application_name of a node's listening connection, by which nodes count each other. */
export function listenerName(nodeId: string): string {
  return `rill-node ${nodeId}`;
}

/** A node's id (PostgresStore.nodeId): 12 hexadecimal digits. */
const NODE_ID = /^[0-9a-f]{12}$/;

/** How often a node counts the other nodes listening. */
const NODES_CHECK_MS = 1_000;

export class HintListener {
  private client: pg.Client | null = null;
  private closed = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private checkTimer: NodeJS.Timeout | null = null;
  private readonly listeners = new Set<(names: string[] | null) => void>();
  /** Whether another node listens, so that commits are worth hinting (see the header). */
  othersListening = true;
  /** Hellos and hints heard from other nodes: a count that began before one of them cannot say "alone". */
  private heard = 0;

  /** `db`: queries besides the listening connection's (which test helpers find by its LISTEN in pg_stat_activity). */
  constructor(
    private readonly config: pg.ClientConfig,
    private readonly nodeId: string,
    private readonly db: Queryable,
    private readonly retryMs = 500,
  ) {}

  onHint(listener: (names: string[] | null) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Connects the first time; resolves once listening, or rejects (later drops reconnect by themselves). */
  async start(): Promise<void> {
    await this.connect();
    await this.countNodes();
    this.checkTimer = setInterval(() => void this.countNodes(), NODES_CHECK_MS);
    this.checkTimer.unref();
  }

  /** Counts the other nodes' listening connections; when it cannot, assumes some. */
  async countNodes(): Promise<void> {
    const heard = this.heard;
    try {
      const { rows } = await this.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'rill-node %' AND application_name <> $1`,
        [listenerName(this.nodeId)],
      );
      if (this.heard === heard) this.othersListening = rows[0]!.n > 0;
    } catch {
      this.othersListening = true;
    }
  }

  private async connect(): Promise<void> {
    const client = new pg.Client(this.config);
    client.on('error', () => this.dropped(client));
    client.on('end', () => this.dropped(client));
    client.on('notification', (message) => this.received(message.payload));
    await client.connect();
    // Set here, not in the config, which an application_name in the database URL would override; before LISTEN,
    // which stays the connection's query in pg_stat_activity (test/helpers/multinode/listeners.ts finds it so).
    await client.query(`SET application_name = '${listenerName(this.nodeId)}'`);
    await client.query(`LISTEN ${HINT_CHANNEL}`);
    if (this.closed) return void (await client.end().catch(() => {}));
    this.client = client;
    // Listening: the others may hint this node from now on. A hint without names, which nodes before this one ignored.
    // Best effort, as every hint: should it fail, the others' next count finds this node.
    await this.db.query('SELECT pg_notify($1, $2)', [HINT_CHANNEL, this.nodeId]).catch(() => {});
  }

  private received(payload: string | undefined): void {
    if (payload === undefined) return;
    const [node, ...names] = payload.split('\n');
    if (node === this.nodeId) return;
    // A hint names streams; a payload without names is a node's hello only if it is a node's id (engine.ts).
    if (names.length === 0 && !NODE_ID.test(node!)) return;
    this.heard++;
    this.othersListening = true;
    if (names.length > 0) this.emit(names);
  }

  private emit(names: string[] | null): void {
    for (const listener of this.listeners) listener(names);
  }

  private dropped(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = null;
    client.end().catch(() => {});
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closed || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.connect().then(
        () => this.emit(null),
        () => this.scheduleReconnect(),
      );
    }, this.retryMs);
    this.retryTimer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.checkTimer) clearInterval(this.checkTimer);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }
}
