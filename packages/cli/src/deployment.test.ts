/**
 * The servers' deployment record (`recordDeployment`, what the example servers call at start-up) read by the
 * command: servers that keep the rate limits in Redis and the keys in PostgreSQL, and an operator who sets only
 * one of the two variables, get one line naming the other (exit 2) rather than the empty store's "full quotas".
 * A PostgreSQL database of this file's own (created here, dropped after) and a Redis database of its own (the
 * record there would steer other files' Redis-only commands).
 */
import { randomBytes } from 'node:crypto';
import { createRateLimiter } from '@petstore/core';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DEPLOYMENT_REDIS_KEY, recordDeployment } from './deployment.js';
import { petstore, petstoreJson } from '../test-support/petstore.js';

const postgresUrl = inject('postgresUrl');
const redisUrl = inject('redisUrl');
const run = randomBytes(4).toString('hex');
const database = `petstore_cli_deployment_${run}`;
const readerRole = `petstore_deployment_reader_${run}`;
const readerPassword = `reader-${run}`;
/** The Redis database of this file (the shared run's Redis keeps others' in database 0). */
const REDIS_DATABASE = 14;

let skipReason: string | null = inject('postgresSkipReason') ?? inject('redisSkipReason');
let admin: pg.Client | undefined;
let pool: pg.Pool | undefined;
let redis: Redis | undefined;
let databaseUrl = '';
let readerUrl = '';
let ownRedisUrl = '';

beforeAll(async () => {
  if (skipReason !== null || postgresUrl === null || redisUrl === null) return;
  admin = new pg.Client({ connectionString: postgresUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${database}`);
    await admin.query(`CREATE ROLE ${readerRole} LOGIN PASSWORD '${readerPassword}'`);
  } catch (error) {
    skipReason = `cannot create a database and a role on the test PostgreSQL: ${(error as Error).message}`;
    return;
  }
  const url = new URL(postgresUrl);
  url.pathname = `/${database}`;
  databaseUrl = url.toString();
  url.username = readerRole;
  url.password = readerPassword;
  readerUrl = url.toString();
  const redisDatabase = new URL(redisUrl);
  redisDatabase.pathname = `/${REDIS_DATABASE}`;
  ownRedisUrl = redisDatabase.toString();
  redis = new Redis(ownRedisUrl);
  await redis.del(DEPLOYMENT_REDIS_KEY);
  const migrated = await petstore(['migrate'], { PETSTORE_DATABASE_URL: databaseUrl });
  expect(migrated, migrated.stderr).toMatchObject({ code: 0, stderr: '' });
  // A role that may only read, granted after `petstore migrate` (which creates the record's table), as an
  // operator would grant it; the servers write the record later.
  await admin.query(`GRANT CONNECT ON DATABASE ${database} TO ${readerRole}`);
  const owner = new pg.Client({ connectionString: databaseUrl });
  await owner.connect();
  await owner.query(`GRANT USAGE ON SCHEMA public TO ${readerRole}`);
  await owner.query(`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${readerRole}`);
  await owner.end();
  pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  pool.on('error', () => undefined); // the database's drop ends a connection the pool may still be closing
});

afterAll(async () => {
  await pool?.end();
  if (redis !== undefined) {
    await redis.del(DEPLOYMENT_REDIS_KEY);
    await redis.quit();
  }
  if (admin === undefined) return;
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
  await admin.query(`DROP ROLE IF EXISTS ${readerRole}`).catch(() => undefined);
  await admin.end();
});

interface PeekJson {
  windows: Array<{ name: string; limit: number; used: number; remaining: number }>;
}

describe('servers that keep the rate limits in Redis and the keys in PostgreSQL', () => {
  it('limits show with PETSTORE_DATABASE_URL alone: one line naming PETSTORE_REDIS_URL, exit 2; with both: the usage the servers charged', async (context) => {
    if (skipReason !== null) return context.skip(skipReason);
    // As the example servers record it at start-up with both variables set, in each store.
    await recordDeployment({ apiKeys: 'postgresql', categories: 'postgresql', rateLimits: 'redis' }, { pool, redis });
    const both = { PETSTORE_DATABASE_URL: databaseUrl, PETSTORE_REDIS_URL: ownRedisUrl };
    const accountId = `acme-${run}`;
    const { keyId } = await petstoreJson<{ keyId: string }>(['keys', 'issue', '--account', accountId, '--plan', 'free', '--limits', '60:60'], both);
    // The servers charge the account 60 of its 60 a day, in Redis.
    const { redisRateLimitStore } = await import('@petstore/storage-redis');
    const limiter = createRateLimiter({ store: redisRateLimitStore({ client: redis!, blockCache: false }) });
    const principal = { keyId, accountId, plan: 'free' as const, limits: { requestsPerMinute: 60, requestsPerDay: 60 } };
    expect((await limiter.consume({ principal }, { cost: 60 })).allowed).toBe(true);

    const databaseOnly = { PETSTORE_DATABASE_URL: databaseUrl };
    for (const args of [
      ['limits', 'show', '--account', accountId],
      ['limits', 'show', '--key-id', keyId],
      ['limits', 'reset', '--account', accountId],
    ]) {
      expect(await petstore(args, databaseOnly)).toEqual({
        code: 2,
        stdout: '',
        stderr: 'petstore: rate limits are kept in Redis by the servers: set PETSTORE_REDIS_URL\n',
      });
    }
    // Keys are in PostgreSQL: PETSTORE_REDIS_URL alone is refused the same way.
    expect(await petstore(['keys', 'list'], { PETSTORE_REDIS_URL: ownRedisUrl })).toEqual({
      code: 2,
      stdout: '',
      stderr: 'petstore: API keys are kept in PostgreSQL by the servers: set PETSTORE_DATABASE_URL\n',
    });
    // What needs only PostgreSQL works with it alone.
    expect((await petstoreJson<{ keys: unknown[] }>(['keys', 'list', '--account', accountId], databaseOnly)).keys).toHaveLength(1);

    const peeked = await petstoreJson<PeekJson>(['limits', 'show', '--account', accountId], both);
    expect(peeked.windows).toEqual([
      expect.objectContaining({ name: 'minute', limit: 60 }),
      expect.objectContaining({ name: 'day', limit: 60, used: 60, remaining: 0 }),
    ]);
    const table = await petstore(['limits', 'show', '--account', accountId], both);
    expect(table.stdout).toMatch(/^day +60 +60 +0 +\d{4}-/m);

    // A role that may only SELECT reads the record too.
    expect(await petstore(['limits', 'show', '--account', accountId], { PETSTORE_DATABASE_URL: readerUrl })).toEqual({
      code: 2,
      stdout: '',
      stderr: 'petstore: rate limits are kept in Redis by the servers: set PETSTORE_REDIS_URL\n',
    });
    const read = await petstoreJson<PeekJson>(['limits', 'show', '--key-id', keyId], { PETSTORE_DATABASE_URL: readerUrl, PETSTORE_REDIS_URL: ownRedisUrl });
    expect(read.windows).toEqual([expect.objectContaining({ name: 'minute' }), expect.objectContaining({ name: 'day', used: 60 })]);
  });

  it('the newest record wins where PostgreSQL and Redis disagree (servers moved); one this release cannot read is refused', async (context) => {
    if (skipReason !== null) return context.skip(skipReason);
    const accountId = `moved-${run}`;
    // Servers once on PostgreSQL alone, later on both: PostgreSQL's record is the newer.
    await recordDeployment({ apiKeys: 'postgresql', categories: 'postgresql', rateLimits: 'redis' }, { redis }, 1_000);
    await recordDeployment({ apiKeys: 'postgresql', categories: 'postgresql', rateLimits: 'postgresql' }, { pool }, 2_000);
    const both = { PETSTORE_DATABASE_URL: databaseUrl, PETSTORE_REDIS_URL: ownRedisUrl };
    const { postgresRateLimitStore } = await import('@petstore/storage-postgres');
    await createRateLimiter({ store: postgresRateLimitStore({ pool: pool! }) }).consume({ principal: { keyId: `key_${run}`, accountId, plan: 'pro' } });
    expect((await petstoreJson<PeekJson>(['limits', 'show', '--account', accountId], both)).windows).toEqual([
      expect.objectContaining({ name: 'minute' }),
      expect.objectContaining({ name: 'day', used: 1 }),
    ]);

    await redis!.set(DEPLOYMENT_REDIS_KEY, JSON.stringify({ apiKeys: 'postgresql', categories: 'postgresql', rateLimits: 'valkey', recordedAtMs: 3_000 }));
    const refused = await petstore(['limits', 'show', '--account', accountId], both);
    expect({ code: refused.code, stdout: refused.stdout }).toEqual({ code: 1, stdout: '' });
    expect(refused.stderr).toBe(
      "petstore: PETSTORE_REDIS_URL: the servers' record of where they keep their data (key petstore:deployment: rateLimits is \"valkey\", not postgresql or redis) is not one this petstore understands: use the @petstore/cli of the servers' release\n",
    );
    await redis!.del(DEPLOYMENT_REDIS_KEY);
  });
});
