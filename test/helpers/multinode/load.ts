/**
 * What the writers and readers of a multi-node load share: the message format, their contexts,
 * and the record of things a correct server never does.
 *
 * Every message is one JSON object {"w": writer, "n": number} on an application/json stream,
 * so each write is identifiable, and its stored form is the compact JSON plus "\n" (ndjson reads
 * return the stored bytes, so offsets are byte positions in them).
 */
import type { ObserveOptions } from './send.js';

export const JSON_TYPE = { 'content-type': 'application/json' };

export function messageOf(writer: string, n: number): string {
  return JSON.stringify({ w: writer, n });
}

export interface LoadContext extends ObserveOptions {
  /** Node base URLs; writers go round robin over them. */
  urls: string[];
  /** The stream's path, e.g. /v1/stream/name. */
  path: string;
  /** Writers finish the write in hand and stop once this is true. */
  stopping: () => boolean;
  /** Hard bound: no writer or reader runs past it. */
  deadline: number;
  /** Things a correct server never does. */
  violations: string[];
  /** Pause after a 5xx answer before trying again. */
  pauseAfter5xxMs?: number;
  /** Share of write attempts whose answer the client drops on purpose (after 0-8 ms). */
  loseChance?: number;
}

export interface ReaderContext {
  urls: string[];
  path: string;
  violations: string[];
  /** The stream's final tail, once known: readers stop on reaching it. */
  finalTail: () => number | undefined;
  deadline: number;
}

/** Enough to show what went wrong; a broken server under load would otherwise fill memory. */
const MAX_VIOLATIONS = 200;

export function violation(ctx: { violations: string[] }, message: string): void {
  if (ctx.violations.length < MAX_VIOLATIONS) ctx.violations.push(message);
}
