/**
 * `petstore limits show|reset` (through `runCli`, what the built command runs) against the rate-limit store the example servers use
 * (PostgreSQL alone, or Redis): requests are charged here through the core's rate limiter on the same store, as
 * a server would charge them; the command reads and clears what they left.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { createRateLimiter, type Principal, type RateLimitStore } from '@petstore/core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { petstore, petstoreJson, redisWithoutRecord } from '../test-support/petstore.js';

const postgresUrl = inject('postgresUrl');
const redisUrl = inject('redisUrl');
const run = randomBytes(4).toString('hex');
const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const close of closers.splice(0)) await close();
});
// The commands never change the schema: the test database's tables come from `petstore migrate`, as an operator's.
beforeAll(async () => {
  if (postgresUrl === null) return;
  const migrated = await petstore(['migrate'], { PETSTORE_DATABASE_URL: postgresUrl });
  expect(migrated, migrated.stderr).toMatchObject({ code: 0, stderr: '' });
});

async function postgresStore(): Promise<RateLimitStore> {
  const [{ default: pg }, { migratePostgres, postgresRateLimitStore }] = await Promise.all([import('pg'), import('@petstore/storage-postgres')]);
  const pool = new pg.Pool({ connectionString: postgresUrl!, max: 2 });
  closers.push(() => pool.end());
  await migratePostgres({ pool });
  return postgresRateLimitStore({ pool });
}

async function redisStore(url = redisUrl!): Promise<RateLimitStore> {
  const [{ Redis }, { redisRateLimitStore }] = await Promise.all([import('ioredis'), import('@petstore/storage-redis')]);
  const client = new Redis(url);
  closers.push(async () => void (await client.quit()));
  // Without the block cache: a server's cache obeys a reset made elsewhere only once its answer is a second old.
  return redisRateLimitStore({ client, blockCache: false });
}

interface PeekJson {
  owner: Record<string, string>;
  nowMs: number;
  windows: Array<{ name: string; limit: number; used: number; remaining: number; windowMs: number; resetAtMs: number }>;
  bans: Array<{ keyId?: string; bannedUntilMs: number }>;
}

const backends: Array<{ backend: string; env: Record<string, string>; store: () => Promise<RateLimitStore>; skipReason: string | undefined }> = [
  { backend: 'PostgreSQL', env: { PETSTORE_DATABASE_URL: postgresUrl ?? '' }, store: postgresStore, skipReason: inject('postgresSkipReason') ?? undefined },
  { backend: 'Redis', env: { PETSTORE_REDIS_URL: redisUrl ?? '' }, store: redisStore, skipReason: inject('redisSkipReason') ?? undefined },
];

describe.each(backends)('petstore limits on $backend', ({ backend, env, store, skipReason }) => {
  it("show and reset by --key-id and --account: the account's windows and its key's ban", async (context) => {
    if (skipReason !== undefined) return context.skip(skipReason);
    const accountId = `limits-${backend}-${run}`;
    const { keyId } = await petstoreJson<{ keyId: string }>(['keys', 'issue', '--account', accountId, '--plan', 'free'], env);
    // As a server charges this key: one request a day admitted, then rejections until the ban (20 in a minute).
    const limiter = createRateLimiter({ store: await store() });
    const principal: Principal = { keyId, accountId, plan: 'free', limits: { requestsPerMinute: 1, requestsPerDay: 1 } };
    const reasons = [];
    // Until banned (20 rejections in one ban interval), with a bound: a minute that turns mid-loop needs more.
    for (let i = 0; i < 60 && reasons.at(-1) !== 'banned'; i++) reasons.push((await limiter.consume({ principal })).reason);
    expect(reasons[0]).toBeUndefined();
    expect(reasons.at(-1)).toBe('banned');

    const peeked = await petstoreJson<PeekJson>(['limits', 'show', '--key-id', keyId], env);
    expect(peeked).toEqual({
      owner: { accountId, keyId },
      nowMs: expect.any(Number),
      windows: [
        // The minute may have turned since (used 0 then); the day cannot, but across midnight UTC.
        expect.objectContaining({ name: 'minute', limit: 1 }),
        expect.objectContaining({ name: 'day', limit: 1, used: 1, remaining: 0 }),
      ],
      bans: [{ keyId, bannedUntilMs: expect.any(Number) }],
    });
    const bannedUntil = new Date(peeked.bans[0]!.bannedUntilMs).toISOString();

    const table = await petstore(['limits', 'show', '--account', accountId], env);
    expect({ code: table.code, stderr: table.stderr }).toEqual({ code: 0, stderr: '' });
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(new RegExp(`^account ${accountId}, as of \\d{4}-\\d\\d-\\d\\dT`));
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^WINDOW +LIMIT +USED +REMAINING +RESETS AT$/),
        expect.stringMatching(/^minute +1 +[01] +[01] +\d{4}-/),
        expect.stringMatching(/^day +1 +1 +0 +\d{4}-/),
        `banned until ${bannedUntil}: key ${keyId}`,
      ]),
    );

    const reset = await petstore(['limits', 'reset', '--key-id', keyId], env);
    expect(reset).toEqual({
      code: 0,
      stdout: `reset: account ${accountId} (of key ${keyId}): the windows its keys share, and the bans of all its keys\n`,
      stderr: '',
    });
    expect(await petstoreJson<PeekJson>(['limits', 'show', '--account', accountId], env)).toEqual({ owner: { accountId }, nowMs: expect.any(Number), windows: [], bans: [] });
    const empty = await petstore(['limits', 'show', '--key-id', keyId], env);
    expect(empty.stdout).toContain('no requests counted in the current windows: full quotas');
    expect(empty.stdout).toContain('bans: none');
    // Full quota again: the next request is admitted.
    expect((await limiter.consume({ principal })).allowed).toBe(true);
  });

  it('show and reset by --address: a caller without a valid key', async (context) => {
    if (skipReason !== undefined) return context.skip(skipReason);
    const address = `198.51.100.${randomInt(1, 255)}`;
    const limiter = createRateLimiter({ store: await store() });
    await limiter.reset({ clientAddress: address }); // from an earlier run on a shared server
    for (let i = 0; i < 3; i++) expect((await limiter.consume({ clientAddress: address })).allowed).toBe(true);
    const peeked = await petstoreJson<PeekJson>(['limits', 'show', '--address', address], env);
    expect(peeked.owner).toEqual({ clientAddress: address });
    expect(peeked.windows).toEqual([expect.objectContaining({ name: 'minute' }), expect.objectContaining({ name: 'day', used: 3 })]);
    expect(await petstoreJson(['limits', 'reset', '--address', address], env)).toEqual({ owner: { clientAddress: address }, reset: true });
    expect((await petstoreJson<PeekJson>(['limits', 'show', '--address', address], env)).windows).toEqual([]);
  });
});

describe('limits with both variables set', () => {
  it('no servers\' record: reads the rate limits in Redis and resolves the keyId in PostgreSQL, as servers of the previous release store them', async (context) => {
    const skipReason = inject('postgresSkipReason') ?? inject('redisSkipReason');
    if (skipReason !== null) return context.skip(skipReason);
    const accountId = `limits-both-${run}`;
    const both = { PETSTORE_DATABASE_URL: postgresUrl!, PETSTORE_REDIS_URL: redisWithoutRecord(redisUrl!) };
    const { keyId } = await petstoreJson<{ keyId: string }>(['keys', 'issue', '--account', accountId, '--plan', 'pro'], both);
    await createRateLimiter({ store: await redisStore(both.PETSTORE_REDIS_URL) }).consume({ principal: { keyId, accountId, plan: 'pro' } });
    const peeked = await petstoreJson<PeekJson>(['limits', 'show', '--key-id', keyId], both);
    expect(peeked.windows).toEqual([expect.objectContaining({ name: 'minute' }), expect.objectContaining({ name: 'day', used: 1 })]);
    // PostgreSQL alone has counted nothing for the account.
    expect((await petstoreJson<PeekJson>(['limits', 'show', '--key-id', keyId], { PETSTORE_DATABASE_URL: postgresUrl! })).windows).toEqual([]);
  });
});
