/**
 * What the server's settings and the `rill` command need of the PostgreSQL engine without
 * loading it (and `pg`): its defaults, and a database URL fit for logs.
 */

export const POSTGRES_DEFAULTS = { poolSize: 10, statementTimeoutMs: 10_000, connectTimeoutMs: 5_000 };

/**
 * A database URL without its password, for logs: the user-info form
 * (`postgres://u:secret@h/db`) and the query form (`?password=secret`, which pg reads
 * too), and any other query parameter whose name holds `password` (`sslpassword`).
 */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    for (const name of [...parsed.searchParams.keys()]) {
      if (/password/i.test(name)) parsed.searchParams.set(name, '***');
    }
    return parsed.toString();
  } catch {
    return '(unparsable URL)';
  }
}
