/**
 * Checks on the files that hold secrets (the HS256 secret, the TLS private key): a file
 * other users can read hands them the server's identity, and a public key set given as
 * the secret would make a public value the HS256 key. Both stop the start with a message
 * saying what to do.
 */
import { statSync } from 'node:fs';

/**
 * A key file that cannot be used: missing, unreadable, too short or malformed. Typed so
 * that the command naming the file (`rill serve --auth-secret-file`, `rill token
 * --secret-file`) can answer with its own flag and what to do, not a raw ENOENT.
 */
export class KeyFileError extends Error {
  constructor(
    readonly path: string,
    readonly problem: string,
  ) {
    super(`${path}: ${problem}`);
  }
}

/** Refuses a file its group or other users may read (POSIX modes; Windows has none to check). */
export function refuseSharedKeyFile(path: string, what: string): void {
  if (process.platform === 'win32') return;
  const mode = statSync(path).mode & 0o777;
  if ((mode & 0o044) !== 0) {
    throw new KeyFileError(path, `${what} is readable by other users (mode ${mode.toString(8).padStart(3, '0')}); make it private with chmod 600 ${path}`);
  }
}

/**
 * Why a secret's text is not a secret, or null: it parses as a JSON object or list (a
 * JWK or JWKS, public keys meant for --auth-jwks-file), or it is a PEM key or certificate.
 */
export function secretTextProblem(text: string): string | null {
  if (/^-----BEGIN [A-Z0-9 ]+-----/m.test(text)) return 'it is a PEM key or certificate, not a shared secret (asymmetric keys go to --auth-jwks-file as a JWKS)';
  if (/^[[{]/.test(text)) {
    try {
      const parsed = JSON.parse(text) as unknown;
      if (typeof parsed === 'object' && parsed !== null) return 'it is JSON (a JWK or JWKS?), not a shared secret (public keys go to --auth-jwks-file)';
    } catch {
      // Random text that starts with a bracket: a secret.
    }
  }
  return null;
}
