/** `rill token`: prints an HS256 token for the grants asked, signed with the server's secret file. */
import { Command, InvalidArgumentError } from 'commander';
import { isPermission, type Permission } from '../core/access.js';
import { ConfigMistake } from './errors.js';
import { durationOption } from './units.js';

interface TokenFlags {
  secretFile: string;
  bucket: string[];
  can: Permission[];
  prefix?: string;
  ttl: number;
  sub?: string;
  issuer?: string;
  audience?: string;
  jti?: string;
}

function parsePermissions(value: string): Permission[] {
  const list = value.split(',').map((p) => p.trim()).filter((p) => p.length > 0);
  const wrong = list.filter((p) => !isPermission(p));
  if (list.length === 0 || wrong.length > 0) throw new InvalidArgumentError('expected a comma-separated list of read, write, manage, admin');
  return list as Permission[];
}

function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

export function addTokenCommand(program: Command): void {
  program
    .command('token')
    .description('print a token (HS256) granting permissions on buckets, signed with the secret file the server uses')
    .requiredOption('--secret-file <file>', 'the secret file given to rill serve --auth-secret-file')
    .requiredOption('--bucket <bucket>', 'a bucket id, "v1" for /v1/stream, or "*" for every bucket (repeatable)', collect)
    .requiredOption('--can <permissions>', 'read, write, manage, admin (comma-separated; each includes those before it)', parsePermissions)
    .option('--prefix <prefix>', 'only the streams whose names start with this')
    .addOption(durationOption('--ttl <duration>', 'lifetime (such as 15m, 1h, 7d)', 3_600_000))
    .option('--sub <subject>', 'the subject (quotas count per subject)')
    .option('--issuer <iss>', 'the issuer, when the server checks one (--auth-issuer)')
    .option('--audience <aud>', 'the audience, when the server checks one (--auth-audience)')
    .option('--jti <id>', 'the token id, which rill revoke --jti names (default: a random UUID)')
    .action(async (flags: TokenFlags) => {
      // jose is loaded for this command only, so that the others start faster.
      const { signTokenWithFile } = await import('../auth/sign.js');
      const grants = flags.bucket.map((bucket) => ({ bucket, can: flags.can, ...(flags.prefix ? { prefix: flags.prefix } : {}) }));
      const request = {
        grants,
        ttlMs: flags.ttl,
        nowMs: Date.now(),
        ...(flags.sub ? { subject: flags.sub } : {}),
        ...(flags.issuer ? { issuer: flags.issuer } : {}),
        ...(flags.audience ? { audience: flags.audience } : {}),
        ...(flags.jti ? { jti: flags.jti } : {}),
      };
      let token: string;
      try {
        token = await signTokenWithFile(flags.secretFile, request);
      } catch (error) {
        throw await secretFileMistake(error);
      }
      process.stdout.write(`${token}\n`);
    });
}

/** A missing or too-short --secret-file as the user's mistake (CONFIG, exit 2), saying what to do. */
async function secretFileMistake(error: unknown): Promise<unknown> {
  const { KeyFileError } = await import('../auth/verifier.js');
  if (!(error instanceof KeyFileError)) return error;
  return new ConfigMistake(`--secret-file ${error.path}: ${error.problem}; give the file rill serve --auth-secret-file reads (write one with: openssl rand -base64 32 > ${error.path})`);
}
