/**
 * What the soak's clients believe about their writes. Every write is one or more lines
 * (text records or JSON messages) that carry the write's unique key and their index in
 * it, so the checker can find each write in a stream, whole or torn, once or twice.
 *
 *  - acked:   the server acknowledged it; it must be present exactly once.
 *  - pending: sent, outcome unknown, and the client still retries it unchanged.
 *  - maybe:   outcome unknown and abandoned (plain appends cannot be retried safely).
 *  Pending and maybe writes may be present at most once.
 */

export type WriteState = 'acked' | 'pending' | 'maybe';

export interface WriteRecord {
  key: string;
  stream: string;
  lines: string[];
  state: WriteState;
  /** Where the acknowledgement said the bytes landed. */
  receipt?: { start: number; next: number };
  /** Stream-Seq values (event counts) this commit was sent with. */
  seqCandidates?: number[];
}

export interface StreamSpec {
  /** Short name in the soak's reports. */
  name: string;
  path: string;
  contentType: string;
  incarnation: string | null;
  /** The write that closed the stream was acknowledged. */
  closeAcked: boolean;
  /** Streams the soak closes on purpose; any other must stay open. */
  closable: boolean;
}

const TEXT_LINE = /^([A-Za-z0-9.]+)#(\d+)\|[A-Za-z0-9]*$/;

export function textLine(key: string, index: number, pad: string): string {
  return `${key}#${index}|${pad}`;
}

export function jsonLine(key: string, index: number, pad: string): string {
  return JSON.stringify({ k: key, i: index, p: pad });
}

/** The key and index a stored line claims, or null for a line no client wrote. */
export function parseLine(line: string, json: boolean): { key: string; index: number } | null {
  if (json) {
    try {
      const value = JSON.parse(line) as { k?: unknown; i?: unknown };
      return typeof value.k === 'string' && typeof value.i === 'number' ? { key: value.k, index: value.i } : null;
    } catch {
      return null;
    }
  }
  const match = TEXT_LINE.exec(line);
  return match ? { key: match[1]!, index: Number(match[2]) } : null;
}

export class Ledger {
  readonly writes = new Map<string, WriteRecord>();
  /** The same writes, by stream, in the order they were sent. */
  readonly byStream = new Map<string, WriteRecord[]>();
  readonly streams = new Map<string, StreamSpec>();
  readonly ackedByKind = new Map<string, number>();
  readonly unknownReasons = new Map<string, number>();
  readonly lost = new Set<string>();
  readonly duplicated = new Set<string>();
  readonly violations: string[] = [];
  violationCount = 0;

  get acknowledged(): number {
    let n = 0;
    for (const count of this.ackedByKind.values()) n += count;
    return n;
  }

  sent(record: Omit<WriteRecord, 'state'>): WriteRecord {
    const entry: WriteRecord = { ...record, state: 'pending' };
    this.writes.set(record.key, entry);
    const list = this.byStream.get(record.stream);
    if (list) list.push(entry);
    else this.byStream.set(record.stream, [entry]);
    return entry;
  }

  ack(record: WriteRecord, kind: string, receipt?: { start: number; next: number }): void {
    if (record.state === 'acked') return;
    record.state = 'acked';
    if (receipt) record.receipt = receipt;
    this.ackedByKind.set(kind, (this.ackedByKind.get(kind) ?? 0) + 1);
  }

  unknown(reason: string): void {
    const short = reason.split(' ')[0]!;
    this.unknownReasons.set(short, (this.unknownReasons.get(short) ?? 0) + 1);
  }

  violation(message: string): void {
    this.violationCount++;
    if (this.violations.length < 50) this.violations.push(message);
  }
}

/** Reads the receipt headers of an acknowledged write. */
export function receiptOf(res: Response): { start: number; next: number } | undefined {
  const start = res.headers.get('stream-offset');
  const next = res.headers.get('stream-next-offset');
  return start !== null && next !== null ? { start: Number(start), next: Number(next) } : undefined;
}
