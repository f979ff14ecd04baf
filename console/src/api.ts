/**
 * The console's one way to the server: rill's own client (src/client), pointed at the
 * origin that served the page, with the session's token as a bearer token.
 */
import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import { RillClient, isRillError } from '../../src/client/index.js';

const TOKEN_KEY = 'rill.console.token';
const BUCKETS_KEY = 'rill.console.buckets';

/** The token lives in session storage only: it is gone when the tab closes. */
export function loadToken(): string {
  return sessionStorage.getItem(TOKEN_KEY) ?? '';
}

export function saveToken(token: string): void {
  if (token === '') sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, token);
}

export function makeClient(token: string): RillClient {
  return new RillClient({ url: location.origin, headers: token === '' ? {} : { authorization: `Bearer ${token}` } });
}

export const ClientContext = createContext<RillClient | null>(null);

export function useClient(): RillClient {
  const client = useContext(ClientContext);
  if (client === null) throw new Error('the console has no client');
  return client;
}

/** Buckets opened or created in this session: shown when the token may not list the server's. */
export function knownBuckets(): string[] {
  try {
    const parsed: unknown = JSON.parse(sessionStorage.getItem(BUCKETS_KEY) ?? '[]');
    return Array.isArray(parsed) ? parsed.filter((b): b is string => typeof b === 'string') : [];
  } catch {
    return [];
  }
}

export function rememberBucket(id: string, known: boolean): void {
  const rest = knownBuckets().filter((b) => b !== id);
  sessionStorage.setItem(BUCKETS_KEY, JSON.stringify(known ? [...rest, id].sort() : rest));
}

/** What the page shows of a failure: the server's code and message, or the client's. */
export interface Failure {
  code: string;
  status: number | undefined;
  message: string;
}

export function failureOf(error: unknown): Failure {
  if (isRillError(error)) return { code: error.code, status: error.status, message: error.message };
  if (error instanceof Error) return { code: error.name, status: undefined, message: error.message };
  return { code: 'ERROR', status: undefined, message: String(error) };
}
