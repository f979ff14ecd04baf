/**
 * Readers that follow a stream across nodes: when their node dies they resume from their last
 * offset on the next one, as a real client does with Stream-Next-Offset (long-poll) and the
 * control event's streamNextOffset (SSE). Each checks that what it takes covers exactly the
 * bytes between its offset and the next, so a gap or a repeat shows as a violation.
 */
import { offset as pad20 } from '../http.js';
import { sseBlocks } from '../sse.js';
import { violation, type ReaderContext } from './load.js';
import { NoAnswer, send, sleep, type Answer } from './send.js';

// These pauses are the readers' backoff, the behaviour of a real client, not waits for an event.
/** Pause before asking the next node after a lost connection. */
const MOVE_PAUSE_MS = 20;
/** Pause after a 503 (the node is up but its storage is not). */
const UNAVAILABLE_PAUSE_MS = 100;

abstract class Reader {
  /** Messages received, compact JSON, in order. */
  readonly messages: string[] = [];
  offset = 0;
  /** Connections lost (error or refused) that made the reader move to another node. */
  moves = 0;
  /** Responses (long-poll) or control events (SSE) taken. */
  reads = 0;
  protected at: number;

  constructor(
    readonly id: string,
    protected readonly ctx: ReaderContext,
    home: number,
  ) {
    this.at = home;
  }

  get url(): string {
    return this.ctx.urls[this.at % this.ctx.urls.length]! + this.ctx.path;
  }

  /** After a lost connection: the next node, after a short pause. */
  protected async moveOn(): Promise<void> {
    this.at += 1;
    this.moves += 1;
    await sleep(MOVE_PAUSE_MS); // backoff before the next node
  }

  protected finished(): boolean {
    const tail = this.ctx.finalTail();
    return (tail !== undefined && this.offset >= tail) || Date.now() > this.ctx.deadline;
  }

  /** Takes messages covering [offset, next). */
  protected take(messages: string[], next: number): void {
    const bytes = messages.reduce((sum, m) => sum + Buffer.byteLength(m) + 1, 0);
    if (next - this.offset !== bytes) {
      violation(this.ctx, `${this.id}: ${messages.length} messages (${bytes} bytes) from ${this.offset} to ${next}`);
    }
    this.messages.push(...messages);
    this.offset = next;
    this.reads += 1;
  }

  abstract run(): Promise<void>;
}

/** Long-poll reads (ndjson) from its offset; on a lost connection it asks the next node. */
export class LongPollReader extends Reader {
  async run(): Promise<void> {
    while (!this.finished()) {
      let answer: Answer;
      try {
        answer = await send(`${this.url}?offset=${pad20(this.offset)}&live=long-poll&timeout_ms=2000`, { headers: { accept: 'application/x-ndjson' }, timeoutMs: 15_000 });
      } catch (error) {
        if (!(error instanceof NoAnswer)) throw error;
        await this.moveOn();
        continue;
      }
      await this.handle(answer);
    }
  }

  private async handle(answer: Answer): Promise<void> {
    const next = Number(answer.headers.get('stream-next-offset'));
    if (answer.status === 200) {
      this.take(answer.text.split('\n').slice(0, -1), next);
    } else if (answer.status === 204) {
      if (next !== this.offset) violation(this.ctx, `${this.id}: 204 at ${this.offset} with Stream-Next-Offset ${next}`);
    } else if (answer.status === 503) {
      await sleep(UNAVAILABLE_PAUSE_MS); // backoff after a 503
    } else {
      violation(this.ctx, `${this.id}: long-poll at ${this.offset} answered ${answer.status} ${answer.text.slice(0, 200)}`);
      await sleep(200); // backoff after an answer it cannot use
    }
  }
}

/** The type (default "message") and data of one SSE event block. */
function parseEvent(block: string): { type: string; data: string } {
  let type = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith('event:')) type = line.slice(6).trim();
    else if (line.startsWith('data:')) data.push(line.slice(5));
  }
  return { type, data: data.join('\n') };
}

/**
 * SSE: keeps a data event's messages only once the control event after it has arrived (a cut
 * connection resends them), and resumes from the last control event's streamNextOffset; a
 * connection ended by the server (its lifetime) resumes on the same node, a lost one on the next.
 */
export class SseReader extends Reader {
  /** Connections the server ended on its own (lifetime), resumed on the same node. */
  ends = 0;

  async run(): Promise<void> {
    while (!this.finished()) {
      const outcome = await this.follow();
      if (outcome === 'lost') await this.moveOn();
      else if (outcome === 'ended') this.ends += 1;
      else if (outcome === 'unavailable') await sleep(UNAVAILABLE_PAUSE_MS); // backoff after a 503
    }
  }

  private async follow(): Promise<'ended' | 'lost' | 'unavailable' | 'done'> {
    const abort = new AbortController();
    // The stream's end may come while no event does: stop waiting once finished.
    const watchdog = setInterval(() => this.finished() && abort.abort(), 50);
    try {
      const res = await fetch(`${this.url}?offset=${pad20(this.offset)}&live=sse`, { signal: abort.signal });
      if (res.status !== 200 || !res.body) {
        await res.arrayBuffer().catch(() => {});
        if (res.status !== 503) violation(this.ctx, `${this.id}: SSE at ${this.offset} answered ${res.status}`);
        return 'unavailable';
      }
      await this.takeEvents(res);
      return this.finished() ? 'done' : 'ended';
    } catch {
      return this.finished() ? 'done' : 'lost';
    } finally {
      clearInterval(watchdog);
      abort.abort();
    }
  }

  /** Takes each data event's messages when the control event after it arrives. */
  private async takeEvents(res: Response): Promise<void> {
    let pending: string[] | null = null;
    for await (const block of sseBlocks(res)) {
      const { type, data } = parseEvent(block);
      if (type === 'data') {
        pending = (JSON.parse(data) as unknown[]).map((v) => JSON.stringify(v));
      } else if (type === 'control') {
        const control = JSON.parse(data) as { streamNextOffset: string };
        this.take(pending ?? [], Number(control.streamNextOffset));
        pending = null;
      }
    }
  }
}
