/**
 * The access log's line, made as JSON text by rill rather than by pino: the bytes pino
 * writes for the same fields (a test compares them), for a fraction of the cost.
 *
 * A line is seven pieces joined: what comes before the request id (made once a
 * millisecond), the id, the method, route and status with the text around them (made once
 * for each such triple), the duration's whole milliseconds, its decimals with the text
 * before the byte count (a table), the byte count, and the end (one of two). Every piece
 * joined is a string V8 allocates and later walks to encode the line, and the line's
 * fields written one by one made about twenty (docs/performance.md).
 */
import { isAscii, type InfoLines } from './logger.js';

/** The decimals of each thousandth as JavaScript prints a number: '' for none, '.5' for 500, '.025' for 25. */
const THOUSANDTHS = Array.from({ length: 1000 }, (_, i) => (i === 0 ? '' : `.${String(i).padStart(3, '0').replace(/0+$/, '')}`));

/**
 * A duration's decimals and what follows them up to the byte count. Its whole milliseconds
 * and these print `String(micros / 1000)` for a whole count of microseconds without V8's
 * shortest-form conversion of a fraction (about 900 instructions a line): a quotient with
 * three decimals prints as those decimals.
 */
const DECIMALS_THEN_BYTES = THOUSANDTHS.map((decimals) => `${decimals},"bytes":`);

/** Bounds the pieces kept for method, route and status triples, whatever reaches them. */
const MIDDLES_MAX = 2_000;

export interface AccessFields {
  /** Matched CLIENT_ID or was made by rill: nothing in it to escape, and ASCII. */
  reqId: string;
  method: string;
  route: string;
  status: number;
  durationMicros: number;
  bytes: number;
  completed: boolean;
}

export class AccessLines {
  /** The line's start of the current millisecond, and that start with the text up to the id. */
  private start = '';
  private startThenId = '';
  private readonly endCompleted: string;
  private readonly endNotCompleted: string;
  /** Route, then method, then status: the text from the id's closing quote to the duration (ASCII ones only). */
  private readonly middles = new Map<string, Map<string, Map<number, string>>>();
  private middlesKept = 0;

  constructor(private readonly lines: InfoLines) {
    this.endCompleted = `,"completed":true${lines.end}`;
    this.endNotCompleted = `,"completed":false${lines.end}`;
  }

  write(fields: AccessFields): void {
    const { lines } = this;
    const start = lines.start();
    if (start !== this.start) {
      this.start = start;
      this.startThenId = `${start}"reqId":"`;
    }
    let ascii = lines.ascii;
    let middle = this.middles.get(fields.route)?.get(fields.method)?.get(fields.status);
    if (middle === undefined) {
      middle = `","method":${JSON.stringify(fields.method)},"route":${JSON.stringify(fields.route)},"status":${fields.status},"durationMs":`;
      const middleAscii = isAscii(middle);
      if (middleAscii) this.keep(fields, middle);
      ascii &&= middleAscii;
    }
    const whole = Math.floor(fields.durationMicros / 1000);
    const decimals = DECIMALS_THEN_BYTES[fields.durationMicros - whole * 1000]!;
    const end = fields.completed ? this.endCompleted : this.endNotCompleted;
    lines.write(this.startThenId + fields.reqId + middle + whole + decimals + fields.bytes + end, ascii);
  }

  private keep({ route, method, status }: AccessFields, middle: string): void {
    if (this.middlesKept >= MIDDLES_MAX) return;
    let methods = this.middles.get(route);
    if (methods === undefined) this.middles.set(route, (methods = new Map()));
    let statuses = methods.get(method);
    if (statuses === undefined) methods.set(method, (statuses = new Map()));
    statuses.set(status, middle);
    this.middlesKept++;
  }
}
