/**
 * `petstore keys purge --older-than <duration> [--dry-run]`, on stores of this file's own (a purge removes every
 * revoked key of its store, so never on the shared ones other suites use): a PostgreSQL database created here, and
 * a Redis database number no other suite uses, emptied first.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { petstore, petstoreJson } from '../test-support/petstore.js';

const postgresUrl = inject('postgresUrl');
const redisUrl = inject('redisUrl');
const database = `petstore_purge_${randomBytes(4).toString('hex')}`;
/** The Redis database (SELECT index) of this file. */
const REDIS_DB = 11;

let admin: pg.Client | undefined;
let postgresSkip: string | null = inject('postgresSkipReason');
const redisSkip: string | null = inject('redisSkipReason');

function withPath(url: string, path: string): string {
  const parsed = new URL(url);
  parsed.pathname = path;
  return parsed.toString();
}

beforeAll(async () => {
  if (redisSkip === null) {
    const client = new Redis(withPath(redisUrl!, `/${REDIS_DB}`));
    await client.flushdb();
    await client.quit();
  }
  if (postgresSkip !== null) return;
  admin = new pg.Client({ connectionString: postgresUrl! });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${database}`);
  } catch (error) {
    postgresSkip = `cannot create a database on the test PostgreSQL: ${(error as Error).message}`;
    return;
  }
  const migrated = await petstore(['migrate'], { PETSTORE_DATABASE_URL: withPath(postgresUrl!, `/${database}`) });
  expect(migrated, migrated.stderr).toMatchObject({ code: 0, stderr: '' });
});

afterAll(async () => {
  if (admin === undefined) return;
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
  await admin.end();
});

interface KeyJson {
  keyId: string;
  status: string;
}

describe.each([
  { backend: 'PostgreSQL', env: () => ({ PETSTORE_DATABASE_URL: withPath(postgresUrl!, `/${database}`) }), skipReason: () => postgresSkip },
  { backend: 'Redis', env: () => ({ PETSTORE_REDIS_URL: withPath(redisUrl!, `/${REDIS_DB}`) }), skipReason: () => redisSkip },
])('petstore keys purge on $backend', ({ env: envOf, skipReason }) => {
  it('removes the keys revoked longer ago than the retention, only those; --dry-run counts them, removing nothing', async (context) => {
    const skip = skipReason();
    if (skip !== null) return context.skip(skip);
    const env = envOf();
    const revoked = await petstoreJson<KeyJson>(['keys', 'issue', '--account', 'acme', '--plan', 'free'], env);
    const active = await petstoreJson<KeyJson>(['keys', 'issue', '--account', 'acme', '--plan', 'free', '--expires-in', '30d'], env);
    await petstoreJson(['keys', 'revoke', revoked.keyId], env);

    // Revoked just now: not longer ago than an hour.
    expect(await petstoreJson(['keys', 'purge', '--older-than', '1h'], env)).toEqual({ removed: 0, beforeMs: expect.any(Number) });
    expect(await petstoreJson(['keys', 'purge', '--older-than', '0', '--dry-run'], env)).toEqual({ dryRun: true, wouldRemove: 1, beforeMs: expect.any(Number) });
    const dryTable = await petstore(['keys', 'purge', '--older-than', '0', '--dry-run'], env);
    expect(dryTable).toEqual({ code: 0, stdout: expect.stringMatching(/^dry run: would remove 1 key record\(s\) revoked or expired at or before \S+Z; nothing removed\n$/), stderr: '' });
    expect((await petstoreJson<{ keys: KeyJson[] }>(['keys', 'list'], env)).keys).toHaveLength(2);

    const purged = await petstore(['keys', 'purge', '--older-than', '0'], env);
    expect(purged).toEqual({ code: 0, stdout: expect.stringMatching(/^removed 1 key record\(s\) revoked or expired at or before \S+Z\n$/), stderr: '' });
    expect(await petstoreJson(['keys', 'list'], env)).toEqual({ keys: [expect.objectContaining({ keyId: active.keyId, status: 'active' })] });
    const shown = await petstore(['keys', 'show', revoked.keyId], env);
    expect(shown).toEqual({ code: 1, stdout: '', stderr: `petstore: no key with keyId ${revoked.keyId}\n` });
  });
});

describe('petstore keys purge: usage', () => {
  it('needs --older-than, a duration; exit 2 before opening any store', async () => {
    const nowhere = { PETSTORE_DATABASE_URL: 'postgres://127.0.0.1:1/petstore' };
    expect(await petstore(['keys', 'purge'], nowhere)).toEqual({ code: 2, stdout: '', stderr: 'petstore: keys purge: --older-than is required\n' });
    expect(await petstore(['keys', 'purge', '--older-than', '30'], nowhere)).toEqual({
      code: 2,
      stdout: '',
      stderr: 'petstore: keys purge: --older-than needs a unit, e.g. 30m, 12h or 30d, not "30"\n',
    });
  });
});
