/**
 * The text form of array parameters (src/storage/postgres/array-params.ts), read back by
 * a real PostgreSQL server: every element arrives as bound, whatever it holds (quotes,
 * backslashes, braces, commas, the word NULL, bytes of every value), and as pg's own
 * form of the same array arrives.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrayParam } from '../../src/storage/postgres/array-params.js';
import { sharedDatabase } from '../helpers/postgres.js';
import { seededRandom } from '../helpers/seed.js';

const rng = seededRandom();
let client: pg.Client;

beforeAll(async () => {
  client = new pg.Client(await sharedDatabase());
  await client.connect();
});

afterAll(async () => {
  await client?.end();
});

/** What PostgreSQL makes of `param` cast to `type`, each element as text (NULL as null). */
async function readBack(param: unknown, type: string): Promise<Array<string | null>> {
  const { rows } = await client.query<{ v: Array<string | null> }>(`SELECT $1::${type}::text[] AS v`, [param]);
  return rows[0]!.v;
}

const ALPHABET = ['a', 'Z', '0', ' ', '"', '\\', '{', '}', ',', "'", '\n', '\t', 'é', '🙂', 'NULL'];
const randomText = () => Array.from({ length: rng.int(0, 7) }, () => rng.pick(ALPHABET)).join('');
const randomBytes = () => Buffer.from(Array.from({ length: rng.int(0, 39) }, () => rng.int(0, 255)));

describe('array parameters in text form, read back by PostgreSQL', () => {
  it('keeps every text element, the awkward ones and random ones, and null', async () => {
    const values = ['', 'NULL', 'null', '"', '\\', '\\"', '"\\', '{', '}', '{}', ',', ' a ', 'é🙂', '\n', null, ...Array.from({ length: 200 }, randomText)];
    const param = arrayParam(values);
    expect(typeof param).toBe('string');
    expect(await readBack(param, 'text[]')).toEqual(values);
    expect(await readBack(values, 'text[]')).toEqual(values);
  });

  it('keeps every number of the bigint, integer and smallint columns, and null', async () => {
    const bigints = [0, -1, 1, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, null, ...Array.from({ length: 200 }, () => rng.int(-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER))];
    expect(await readBack(arrayParam(bigints), 'bigint[]')).toEqual(bigints.map((n) => (n === null ? null : String(n))));
    const smallints = [0, 1, -32768, 32767, null];
    expect(await readBack(arrayParam(smallints), 'smallint[]')).toEqual(smallints.map((n) => (n === null ? null : String(n))));
  });

  it('keeps every byte of bytea elements, empty ones included', async () => {
    const values = [Buffer.alloc(0), Buffer.from([0, 92, 34, 255]), ...Array.from({ length: 100 }, randomBytes)];
    const { rows } = await client.query<{ v: Buffer[] }>('SELECT $1::bytea[] AS v', [arrayParam(values)]);
    expect(rows[0]!.v.map((b) => b.toString('hex'))).toEqual(values.map((b) => b.toString('hex')));
  });

  it('leaves an array holding another type to pg, unchanged', () => {
    const values = [1, true];
    expect(arrayParam(values)).toBe(values);
    expect(arrayParam([[1], [2]])).toEqual([[1], [2]]);
    expect(arrayParam([])).toBe('{}');
  });
});
