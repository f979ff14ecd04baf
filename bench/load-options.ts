/**
 * The options of the tools that run the appends load on one rill target and report on it
 * (pg-statements.js, sched.js): `--producers`, `--streams`, `--seconds`, `--top` and
 * `--rill`, and any options of the tool's own.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

export interface LoadOptions {
  producers: boolean;
  streams: number;
  seconds: number;
  top: number;
  rill: string | undefined;
  /** Every option as parsed, the tool's own among them. */
  values: Record<string, string | boolean | undefined>;
}

export function loadOptions(defaultSeconds: number, own: NonNullable<ParseArgsConfig['options']> = {}): LoadOptions {
  const { values } = parseArgs({
    options: {
      producers: { type: 'boolean', default: false },
      streams: { type: 'string', default: '500' },
      seconds: { type: 'string', default: String(defaultSeconds) },
      top: { type: 'string', default: '8' },
      rill: { type: 'string' },
      ...own,
    },
  });
  const parsed = values as Record<string, string | boolean | undefined>;
  const whole = (name: 'streams' | 'seconds' | 'top') => {
    const n = Number(parsed[name]);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} takes a whole number above 0`);
    return n;
  };
  const rill = parsed.rill;
  return { producers: parsed.producers === true, streams: whole('streams'), seconds: whole('seconds'), top: whole('top'), rill: typeof rill === 'string' ? rill : undefined, values: parsed };
}
