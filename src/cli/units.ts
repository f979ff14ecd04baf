/**
 * Durations and sizes on the command line: parsed from the forms the flags accept
 * (`500ms`, `20s`, `7d`, the unit required; `4096`, `64KiB`, `32MiB`) and shown in `--help` in those same
 * forms, so a default can be copied into a flag as it is printed.
 */
import { InvalidArgumentError, Option } from 'commander';
import { UsageError } from './errors.js';

const UNITS_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const UNITS_BYTES: Record<string, number> = { b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 };

/** Counts on the command line: a whole number of at least 1. */
export function parsePositiveInteger(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError('expected a positive integer');
  return n;
}

/** Counts where 0 means none, or off: a whole number of at least 0. */
export function parseNonNegativeInteger(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError('expected a non-negative integer');
  return n;
}

/**
 * Durations: a number with its unit (ms, s, m, h, d). A bare number is refused (but 0, the
 * same in every unit): `--long-poll-timeout 30` meant seconds to one reader and
 * milliseconds to the parser, so the unit is always written.
 */
export function parseDurationMs(value: string): number {
  const text = value.trim();
  if (/^\d+$/.test(text) && Number(text) !== 0) throw new InvalidArgumentError(`"${text}" has no unit: write ${text}s, ${text}ms or ${text}m (units: ms, s, m, h, d)`);
  const match = /^(\d+)(ms|s|m|h|d)?$/.exec(text);
  if (!match) throw new InvalidArgumentError('expected a duration such as 500ms, 30s, 1h or 7d');
  return Number(match[1]) * UNITS_MS[match[2] ?? 'ms']!;
}

/** Sizes: a number of bytes (at least `minBytes`, 1 unless told), optionally with a unit (B, KiB, MiB, GiB). */
export function parseBytes(value: string, minBytes = 1): number {
  const match = /^(\d+)\s*(b|kib|mib|gib)?$/i.exec(value.trim());
  const bytes = match ? Number(match[1]) * UNITS_BYTES[(match[2] ?? 'b').toLowerCase()]! : NaN;
  if (!Number.isSafeInteger(bytes) || bytes < minBytes) throw new InvalidArgumentError(`expected a size such as 4096, 64KiB or 32MiB${minBytes === 0 ? ', or 0' : ''}`);
  return bytes;
}

/** The largest whole unit: 20000 -> `20s`, 604800000 -> `7d`, 1500 -> `1500ms`. */
export function formatDurationMs(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    const size = UNITS_MS[unit]!;
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** The largest whole binary unit: 33554432 -> `32MiB`, 1000 -> `1000`. */
export function formatBytes(bytes: number): string {
  for (const unit of ['GiB', 'MiB', 'KiB'] as const) {
    const size = UNITS_BYTES[unit.toLowerCase()]!;
    if (bytes >= size && bytes % size === 0) return `${bytes / size}${unit}`;
  }
  return String(bytes);
}

/** A floor under a duration flag, and why it is there (the refusal says it). */
export interface DurationFloor {
  minMs: number;
  reason: string;
}

/** A duration of at least `floor.minMs`; a shorter one is refused with the floor's reason. */
export function parseDurationAtLeastMs(value: string, floor: DurationFloor): number {
  const ms = parseDurationMs(value);
  if (ms < floor.minMs) throw new InvalidArgumentError(`expected at least ${formatDurationMs(floor.minMs)}: ${floor.reason}`);
  return ms;
}

/** A `--flag <duration>` option whose default `--help` shows as the flag would take it. */
export function durationOption(flags: string, description: string, defaultMs: number, floor?: DurationFloor): Option {
  const parse = floor === undefined ? parseDurationMs : (value: string) => parseDurationAtLeastMs(value, floor);
  return new Option(flags, description).argParser(parse).default(defaultMs, formatDurationMs(defaultMs));
}

/** A `--flag <size>` option whose default `--help` shows as the flag would take it. */
export function bytesOption(flags: string, description: string, defaultBytes: number, minBytes = 1): Option {
  return new Option(flags, description).argParser((value) => parseBytes(value, minBytes)).default(defaultBytes, formatBytes(defaultBytes));
}
