/**
 * `/v1/auth/revocations`: `POST {"jti": ...}` or `{"sub": ...}` (with an optional
 * `until`) revokes tokens; `GET` lists the revocations in force. Admin on `*` only
 * (access.ts); with auth off there is nothing to revoke and the route is missing.
 *
 * Revocations are kept durably in the store's meta table (as the webhook signing keys
 * are) so that every node sharing the store honours them. Each node holds the list in
 * memory and re-reads it once `checkMs` has passed since its last read: the request that
 * finds it stale waits for that one read, so a revocation made on another node applies
 * here within `checkMs` of it (plus one read); one made here applies at once.
 *
 * The list is one JSON value changed by compare-and-set; revocations past their time are
 * dropped whenever it is written, and it holds at most MAX_REVOCATIONS.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { indexRevocations, liveRevocations, revocationOf, revocationRefusal, type Revocation, type RevocableToken, type RevocationIndex } from '../core/token.js';
import { protocolError, type ProtocolError } from '../protocol/errors.js';
import { updateMeta, type MetaStore } from '../subscriptions/meta.js';
import type { HandlerContext } from './context.js';
import { readBody } from './request.js';
import { sendBodyRefusal, sendError, sendJson } from './response.js';

export const REVOCATIONS_META_KEY = 'auth.revocations';
/** Revocations in force at once: they are one value in the store, and every node holds them all in memory. */
export const MAX_REVOCATIONS = 10_000;

type Stored = { jti?: string; sub?: string; until_ms: number };

function parseStored(text: string | undefined): Revocation[] {
  if (text === undefined) return [];
  const parsed = JSON.parse(text) as Stored[];
  return parsed.map((s) => (s.jti !== undefined ? { jti: s.jti, untilMs: s.until_ms } : { sub: s.sub!, untilMs: s.until_ms }));
}

function storedOf(revocations: Revocation[]): string {
  return JSON.stringify(revocations.map((r): Stored => ('jti' in r ? { jti: r.jti, until_ms: r.untilMs } : { sub: r.sub, until_ms: r.untilMs })));
}

/** A revocation's answer shape (HTTP and CLI). */
export function revocationJson(r: Revocation): Record<string, string> {
  return { ...('jti' in r ? { jti: r.jti } : { sub: r.sub }), until: new Date(r.untilMs).toISOString() };
}

export class Revocations {
  private list: Revocation[] = [];
  private index: RevocationIndex = indexRevocations([]);
  /** -Infinity: never read, so the first request after a start reads them. */
  private readAtMs = Number.NEGATIVE_INFINITY;
  private reading: Promise<void> | null = null;
  /** Counts lists stored here: a read begun before one was stored must not put back the list before it. */
  private stores = 0;

  constructor(
    private readonly meta: MetaStore,
    private readonly checkMs: number,
  ) {}

  /** Whether the list must be re-read before judging a request at `nowMs`. */
  stale(nowMs: number): boolean {
    // A clock set back reads at once rather than never.
    return nowMs < this.readAtMs || nowMs - this.readAtMs >= this.checkMs;
  }

  /**
   * Re-reads the list (one read shared by the requests that wait on it). A failed read
   * keeps the list in use and is tried again after `checkMs`: the store failing fails
   * those requests' work anyway.
   */
  refresh(nowMs: number): Promise<void> {
    const stores = this.stores;
    this.reading ??= this.meta
      .getMeta(REVOCATIONS_META_KEY)
      .then((text) => {
        if (stores === this.stores) this.use(parseStored(text));
      })
      .catch(() => undefined)
      .finally(() => {
        this.readAtMs = nowMs;
        this.reading = null;
      });
    return this.reading;
  }

  /** Why this token is refused as revoked at `nowMs`, or null. */
  refusal(token: RevocableToken, nowMs: number): ProtocolError | null {
    return this.list.length === 0 ? null : revocationRefusal(token, this.index, nowMs);
  }

  private use(list: Revocation[]): void {
    this.list = list;
    this.index = indexRevocations(list);
  }

  /** The revocations in force at `nowMs`, as last read. */
  current(nowMs: number): Revocation[] {
    return liveRevocations(this.list, nowMs);
  }

  /** Adds a revocation durably (a later `until` for the same name replaces an earlier one); the list stored, or a refusal. */
  async add(revocation: Revocation, nowMs: number): Promise<Revocation[] | ProtocolError> {
    let full = false;
    const stored = await updateMeta(this.meta, REVOCATIONS_META_KEY, (text) => {
      const kept = liveRevocations(parseStored(text), nowMs).filter((r) => !sameName(r, revocation) || r.untilMs > revocation.untilMs);
      const next = kept.some((r) => sameName(r, revocation)) ? kept : [...kept, revocation];
      full = next.length > MAX_REVOCATIONS;
      return full ? (text ?? '[]') : storedOf(next);
    });
    if (full) return protocolError('REVOCATION_LIMIT', `at most ${MAX_REVOCATIONS} revocations may be in force at once`);
    this.stores++;
    this.use(parseStored(stored));
    return this.list;
  }
}

function sameName(a: Revocation, b: Revocation): boolean {
  return 'jti' in a ? 'jti' in b && a.jti === b.jti : 'sub' in b && a.sub === b.sub;
}

/** A revocation body is one small object. */
const MAX_BODY_BYTES = 4 * 1024;
/** Longest a revocation may be asked to last. */
export const MAX_REVOCATION_AHEAD_MS = 366 * 86_400_000;

export async function handleRevocations(req: IncomingMessage, res: ServerResponse, ctx: HandlerContext): Promise<void> {
  const revocations = ctx.access.revocations;
  if (revocations === null) return sendError(res, protocolError('NOT_FOUND', 'auth is off: there are no tokens to revoke'));
  const nowMs = ctx.now();
  if (req.method === 'GET' || req.method === 'HEAD') return sendJson(res, 200, { revocations: revocations.current(nowMs).map(revocationJson) });
  if (req.method !== 'POST') return sendError(res, protocolError('METHOD_NOT_ALLOWED', `${req.method} is not allowed here`), { allow: 'GET, HEAD, POST, OPTIONS' });
  const body = await readBody(req, MAX_BODY_BYTES);
  if (!body.ok) return sendBodyRefusal(res, body.error);
  let value: unknown;
  try {
    value = JSON.parse(body.body.toString('utf8')) as unknown;
  } catch {
    return sendError(res, protocolError('INVALID_JSON', 'the body is not valid JSON'));
  }
  const revocation = revocationOf(value, ctx.settings.auth.maxTtlMs, MAX_REVOCATION_AHEAD_MS, nowMs);
  if ('code' in revocation) return sendError(res, revocation);
  const stored = await revocations.add(revocation, nowMs);
  if ('code' in stored) return sendError(res, stored);
  // A later revocation of the same name stays in force: answer the one stored.
  const name = 'jti' in revocation ? revocation.jti : revocation.sub;
  const kept = stored.find((r) => ('jti' in r ? r.jti : r.sub) === name && 'jti' in r === 'jti' in revocation) ?? revocation;
  sendJson(res, 201, revocationJson(kept));
}
