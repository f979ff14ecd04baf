/**
 * Commit hints between nodes over PostgreSQL's LISTEN/NOTIFY. A batch that changed
 * streams sends, inside its transaction, the names it changed (writes.ts; delivered only
 * if it commits); every node listens on one connection of its own. A hint only says "look
 * again": when the connection drops, hints sent meanwhile are lost, so on reconnecting
 * the listener reports null (look at everything) and the live layer's periodic check
 * covers whatever else goes missing.
 */
import pg from 'pg';

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

export class HintListener {
  private client: pg.Client | null = null;
  private closed = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private readonly listeners = new Set<(names: string[] | null) => void>();

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly nodeId: string,
    private readonly retryMs = 500,
  ) {}

  onHint(listener: (names: string[] | null) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Connects the first time; resolves once listening, or rejects (later drops reconnect by themselves). */
  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    const client = new pg.Client(this.config);
    client.on('error', () => this.dropped(client));
    client.on('end', () => this.dropped(client));
    client.on('notification', (message) => this.received(message.payload));
    await client.connect();
    await client.query(`LISTEN ${HINT_CHANNEL}`);
    if (this.closed) return void (await client.end().catch(() => {}));
    this.client = client;
  }

  private received(payload: string | undefined): void {
    if (payload === undefined) return;
    const [node, ...names] = payload.split('\n');
    if (node === this.nodeId || names.length === 0) return;
    this.emit(names);
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
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }
}
