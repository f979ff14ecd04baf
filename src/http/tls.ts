/**
 * HTTPS settings: the suites offered, the oldest version, and the certificate read again
 * when its files change (checked every CERTIFICATE_CHECK_MS), so a renewed certificate
 * is served without a restart. New connections get it; open ones keep theirs.
 */
import { readFileSync, statSync } from 'node:fs';
import type { Server as TlsServer, SecureContextOptions } from 'node:tls';
import { refuseSharedKeyFile } from '../auth/key-files.js';

/**
 * Forward-secret AEAD suites only: TLS 1.3's three, and on TLS 1.2 ECDHE with AES-GCM or
 * ChaCha20-Poly1305 (no RSA key exchange, no CBC, no SHA-1 MACs). Node passes the TLS_
 * names to TLS 1.3 and the rest to TLS 1.2.
 */
export const TLS_CIPHERS = [
  'TLS_AES_128_GCM_SHA256',
  'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

/** A year: browsers then reach this host over HTTPS only. */
export const HSTS = 'max-age=31536000';

/** How often the certificate and key files are checked for changes. */
export const CERTIFICATE_CHECK_MS = 1_000;

export interface CertificateFiles {
  certFile: string;
  keyFile: string;
}

/** The certificate and key as the TLS context takes them; throws on a key file others may read. */
export function readCertificate(files: CertificateFiles): SecureContextOptions {
  refuseSharedKeyFile(files.keyFile, 'the TLS private key');
  return { cert: readFileSync(files.certFile), key: readFileSync(files.keyFile), ciphers: TLS_CIPHERS, honorCipherOrder: true };
}

function versionOf(files: CertificateFiles): string {
  return [files.certFile, files.keyFile].map((path) => {
    const s = statSync(path);
    return `${s.ino}:${s.size}:${s.mtimeMs}`;
  }).join('|');
}

/**
 * Serves the files' new certificate once they change. A pair that does not load (half
 * written, the key not yet matching the certificate) keeps the one in use and is tried
 * again at the next check. Answers the function that stops watching.
 */
export function watchCertificate(server: TlsServer, files: CertificateFiles): () => void {
  let version = versionOf(files);
  const timer = setInterval(() => {
    try {
      const next = versionOf(files);
      if (next === version) return;
      server.setSecureContext(readCertificate(files));
      version = next;
    } catch {
      // Mid-rotation: the next check tries again.
    }
  }, CERTIFICATE_CHECK_MS);
  timer.unref();
  return () => clearInterval(timer);
}
