/**
 * Configuration of `rill serve` from three places besides its flags: every flag `--name`
 * also comes from the environment variable `RILL_NAME` and from the key `name` of a config
 * file (`--config FILE`, TOML or JSON). Flag beats environment beats file beats default.
 *
 * It works over the command's own option list, so a flag added later gets its variable
 * and key with nothing more to write: the file's values go through the flag's own parser
 * and choices, and a key or value the flag would refuse is refused at startup, naming
 * the key and the file.
 */
import { readFileSync } from 'node:fs';
import { InvalidArgumentError, type Command, type Option } from 'commander';

/** Where an option's value came from, as commander records it (plus 'config' for the file). */
export type ValueSource = 'default' | 'config' | 'env' | 'cli' | 'implied' | undefined;

/** `--max-body` -> `RILL_MAX_BODY`. */
export function envNameOf(option: Option): string {
  return `RILL_${keyOf(option).toUpperCase().replace(/-/g, '_')}`;
}

/** `--max-body` -> `max-body`: the option's key in a config file. */
export function keyOf(option: Option): string {
  return option.long!.replace(/^--/, '');
}

export class ConfigError extends Error {}

/** The options a flag-less source may set: every long option but `--config` itself. */
function settable(command: Command): Map<string, Option> {
  const byKey = new Map(command.options.filter((o) => o.long).map((o) => [keyOf(o), o]));
  byKey.delete('config');
  return byKey;
}

/** Whether a value from `source` may still be replaced by one from the environment or a file. */
function replaceable(command: Command, option: Option, by: 'env' | 'config'): boolean {
  const source = command.getOptionValueSource(option.attributeName()) as ValueSource;
  return source === undefined || source === 'default' || (by === 'env' ? false : source === 'config');
}

/**
 * The parser of a repeatable flag (`--cors-origin a --cors-origin b`): each use adds a
 * value. Such an option takes a list in a config file and a comma-separated list in its
 * variable.
 */
export function repeatable(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** A repeatable option's values given as one text (a variable): comma-separated. */
function listFrom(option: Option, text: string, bad: (why: string) => Error): string[] {
  return text.split(',').map((part) => part.trim()).filter((part) => part !== '').flatMap((part) => valueFor(option, part, bad) as string[]);
}

/**
 * Names each option's variable in `--help` ("env: RILL_PORT"). Only the help reads it:
 * commander binds a variable to an option when the option is declared, so these are read
 * by applyEnvironment.
 */
export function showEnvironmentInHelp(command: Command): void {
  for (const option of settable(command).values()) option.envVar ??= envNameOf(option);
}

/**
 * Applies RILL_<FLAG> variables to the options no flag set (run before the file, so that
 * the environment wins over it). Commander reads an option's variable only when the option
 * is declared with it; doing it here covers every option, whoever declared it.
 */
export function applyEnvironment(command: Command, env: NodeJS.ProcessEnv): void {
  for (const option of settable(command).values()) {
    const name = option.envVar ?? envNameOf(option);
    const raw = env[name];
    if (raw === undefined || !replaceable(command, option, 'env')) continue;
    const bad = (why: string) => new ConfigError(`environment variable ${name}: ${why}`);
    const value = option.isBoolean() || option.negate ? parseBoolean(raw, name, option) : option.parseArg === repeatable ? listFrom(option, raw, bad) : valueFor(option, raw, bad);
    command.setOptionValueWithSource(option.attributeName(), value, 'env');
  }
}

function parseBoolean(raw: string, name: string, option: Option): boolean {
  const truth = { true: true, '1': true, false: false, '0': false }[raw.toLowerCase()];
  if (truth === undefined) throw new ConfigError(`environment variable ${name}: "${raw}": expected true or false`);
  return option.negate ? !truth : truth;
}

/** Reads a config file into a flat table of keys; nested tables are refused (keys are flag names). */
export async function readConfigFile(path: string): Promise<Record<string, unknown>> {
  // Loaded here, not at the top: every rill command loads this file, few read a config.
  const { parse: parseToml } = await import('smol-toml');
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`config file ${path}: ${(error as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = path.endsWith('.json') ? JSON.parse(text) : parseToml(text);
  } catch (error) {
    throw new ConfigError(`config file ${path} is not valid ${path.endsWith('.json') ? 'JSON' : 'TOML'}: ${(error as Error).message.split('\n')[0]}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new ConfigError(`config file ${path} must hold a table of keys`);
  return parsed as Record<string, unknown>;
}

/**
 * Applies the file's keys to `command`'s options whose value came from no flag and no
 * environment variable. Throws ConfigError naming the first unknown key or bad value.
 */
export function applyConfigFile(command: Command, path: string, table: Record<string, unknown>): void {
  const byKey = settable(command);
  for (const [key, raw] of Object.entries(table)) {
    const option = byKey.get(key);
    if (!option) throw new ConfigError(`config file ${path}: unknown key "${key}" (keys are the flags of rill serve without "--": ${[...byKey.keys()].join(', ')})`);
    if (!replaceable(command, option, 'config')) continue;
    const bad = (why: string) => new ConfigError(`config file ${path}: key "${key}": ${why}`);
    let value: unknown;
    if (option.isBoolean() || option.negate) {
      if (typeof raw !== 'boolean') throw bad('expected true or false');
      value = option.negate ? !raw : raw;
    } else if (option.parseArg === repeatable && Array.isArray(raw)) {
      // A list, for a flag that may be given several times.
      if (!raw.every((item) => typeof item === 'string')) throw bad('expected a list of strings');
      value = (raw as string[]).flatMap((item) => valueFor(option, item, bad) as string[]);
    } else {
      if (typeof raw !== 'string' && typeof raw !== 'number' && typeof raw !== 'bigint') throw bad(`expected a string or a number, not ${Array.isArray(raw) ? 'a list' : typeof raw}`);
      value = valueFor(option, String(raw), bad);
    }
    command.setOptionValueWithSource(option.attributeName(), value, 'config');
  }
}

/** A value given as text, through the option's own choices and parser. */
function valueFor(option: Option, text: string, bad: (why: string) => Error): unknown {
  if (option.argChoices && !option.argChoices.includes(text)) throw bad(`"${text}" is not one of ${option.argChoices.join(', ')}`);
  if (!option.parseArg) return text;
  try {
    return option.parseArg(text, undefined);
  } catch (error) {
    if (error instanceof InvalidArgumentError) throw bad(`"${text}": ${error.message}`);
    throw error;
  }
}

/** `RILL_*` variables that name no option: not refused (other tools share the prefix), but reported. */
export function unknownEnvironment(command: Command, env: NodeJS.ProcessEnv): string[] {
  const known = new Set(command.options.filter((o) => o.long).map((o) => o.envVar ?? envNameOf(o)));
  return Object.keys(env).filter((name) => name.startsWith('RILL_') && !known.has(name));
}

const SECRET_KEY = /(secret|password|token|credential)(?!.*-file$)/;

/**
 * Every option's effective value, secrets hidden, and where each value that is not a
 * default came from ('cli', 'env', 'config'), for the startup log.
 */
export function effectiveConfiguration(command: Command, redactUrl: (url: string) => string): { values: Record<string, unknown>; sources: Record<string, string> } {
  const opts = command.opts();
  const values: Record<string, unknown> = {};
  const sources: Record<string, string> = {};
  for (const option of command.options) {
    if (!option.long) continue;
    const name = option.attributeName();
    const key = keyOf(option);
    let value = opts[name];
    // A --no-X flag keeps X's value (true unless set); the log names it no-X, as files and variables do.
    if (option.negate && typeof value === 'boolean') value = !value;
    if (typeof value === 'string' && /url$/.test(key)) value = redactUrl(value);
    else if (value !== undefined && SECRET_KEY.test(key)) value = '[redacted]';
    values[key] = value ?? null;
    const source = command.getOptionValueSource(name);
    if (source !== undefined && source !== 'default') sources[key] = source;
  }
  return { values, sources };
}
