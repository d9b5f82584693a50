/**
 * Two app instances (Fastify and Express, each with its own pg pool) sharing one PostgreSQL: one quota and one
 * set of categories; costs, bans and the operator's peek and reset seen alike by both (on the run's PostgreSQL, in
 * a schema of their own); and a server of their own killed with SIGKILL in the middle of parallel creates: every
 * create answered 201 is listed exactly once, ids increase, the pools reconnect by themselves.
 */
import { createPetstore, hashApiKey, staticApiKeys, type Petstore, type StaticApiKey, type StoreFailurePolicy } from '@petstore/core';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import { migratePostgres, postgresCategoryStore, postgresRateLimitStore } from '@petstore/storage-postgres';
import { findPostgresBinDir, startPostgresServer, type PostgresServer } from '@petstore/storage-postgres/testing';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { call, servePetstore, type Answer, type Instance } from '../../redis/src/serve.js';
import { GUARD_CALL_TIMEOUT_MS } from '../../../packages/core/test-support/call-timeout.js';

/** The run's PostgreSQL (scripts/test-servers.ts), `null` when its tests are skipped. */
const postgresUrl = inject('postgresUrl');
const installed = findPostgresBinDir() !== undefined;
if (!installed && process.env.PETSTORE_REQUIRE_POSTGRES === '1') throw new Error('PostgreSQL is not installed (PETSTORE_REQUIRE_POSTGRES=1)');
if (!installed) console.warn('[@petstore/postgres-tests] skipped: PostgreSQL is not installed (apt-get install postgresql)');

const WRITER = 'pg-writer-key';
const LIMITED = 'pg-limited-key';
const API_KEYS: StaticApiKey[] = [
  { key: WRITER, plan: 'enterprise', limits: { requestsPerMinute: 1_000_000, requestsPerDay: 10_000_000 } },
  // 25 a day: no window can reset during the test unless it runs across midnight UTC.
  { key: LIMITED, plan: 'enterprise', limits: { requestsPerMinute: 1000, requestsPerDay: 25 } },
];

/**
 * One instance on its own pool: categories and rate limits in PostgreSQL (in `schema`, default `public`),
 * fail-closed; or, with `failOpen`, categories in memory and rate limits in PostgreSQL with a memory insurance store.
 */
async function startInstance(
  framework: 'fastify' | 'express',
  url: string,
  { failOpen = false, callTimeoutMs = 1000, schema }: { failOpen?: boolean; callTimeoutMs?: number; schema?: string } = {},
): Promise<Instance> {
  const pool = new pg.Pool({ connectionString: url, max: 5, connectionTimeoutMillis: callTimeoutMs });
  pool.on('error', () => undefined);
  const onStoreFailure: StoreFailurePolicy = failOpen
    ? { mode: 'fail-open', insuranceStore: memoryRateLimitStore() }
    : { mode: 'fail-closed', retryAfterSeconds: 5 };
  const petstore = createPetstore({
    apiKeys: staticApiKeys(API_KEYS),
    categories: failOpen ? memoryCategoryStore() : postgresCategoryStore({ pool, schema, callTimeoutMs }),
    rateLimit: { store: postgresRateLimitStore({ pool, schema, callTimeoutMs }), onStoreFailure, onStoreError: () => undefined },
    onInternalError: () => undefined,
  });
  return servePetstore(framework, petstore, () => pool.end());
}

/** Polls `done` every 10 ms; fails after 20 s naming what did not happen. */
async function waitUntil(done: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * A fresh, migrated PostgreSQL server with a Fastify and an Express instance on it; stopped after the suite.
 */
function serversForSuite(): { server: PostgresServer; instances: Instance[] } {
  const started = { server: undefined as unknown as PostgresServer, instances: [] as Instance[] };
  beforeAll(async () => {
    started.server = await startPostgresServer();
    const pool = new pg.Pool({ connectionString: started.server.url });
    await migratePostgres({ pool });
    await pool.end();
    started.instances.push(...(await Promise.all([startInstance('fastify', started.server.url), startInstance('express', started.server.url)])));
  });
  afterAll(async () => {
    await Promise.all(started.instances.map((instance) => instance.close()));
    await started.server?.stop();
  });
  return started;
}

/**
 * A freshly migrated schema of its own on the run's PostgreSQL, dropped after the suite (`url` then names the
 * server, `schema` the schema).
 */
function schemaForSuite(): { url: string; schema: string } {
  const suite = { url: postgresUrl ?? '', schema: `postgres_tests_${randomBytes(6).toString('hex')}` };
  beforeAll(async () => {
    const pool = new pg.Pool({ connectionString: suite.url, max: 1 });
    try {
      await migratePostgres({ pool, schema: suite.schema }); // creates the schema
    } finally {
      await pool.end();
    }
  });
  afterAll(async () => {
    const pool = new pg.Pool({ connectionString: suite.url, max: 1 });
    try {
      await pool.query(`DROP SCHEMA IF EXISTS "${suite.schema}" CASCADE`);
    } finally {
      await pool.end();
    }
  });
  return suite;
}

describe.skipIf(postgresUrl === null)('two instances on one PostgreSQL', () => {
  const suite = schemaForSuite();
  const instances: Instance[] = [];
  beforeAll(async () => {
    const options = { schema: suite.schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS };
    instances.push(...(await Promise.all([startInstance('fastify', suite.url, options), startInstance('express', suite.url, options)])));
  });
  afterAll(async () => {
    await Promise.all(instances.map((instance) => instance.close()));
  });

  it('admit exactly the quota of a parallel burst spread over both, and list the same categories', async () => {
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) => call(instances[i % 2] as Instance, '/v1/categories', { apiKey: LIMITED, json: { name: `burst ${i}` } })),
    );
    expect(answers.filter((answer) => answer.status === 201)).toHaveLength(25);
    expect(answers.filter((answer) => answer.status === 429)).toHaveLength(35);
    const lists = await Promise.all(instances.map((instance) => call(instance, '/v1/categories', { apiKey: WRITER })));
    expect(lists[0]?.body).toEqual(lists[1]?.body);
    const created = answers.filter((answer) => answer.status === 201).map((answer) => answer.body);
    expect(lists[0]?.body).toEqual(expect.arrayContaining(created));
    expect(lists[0]?.body).toHaveLength(25);
  });

  it('tag the list alike: a create on one instance changes the ETag both answer; the current tag gets 304 on both', async () => {
    const [first, second] = instances as [Instance, Instance];
    const before = await call(first, '/v1/categories?limit=1000', { apiKey: WRITER });
    const etag = before.headers['etag'] as string;
    expect(etag).toMatch(/^"[^"]+"$/);
    expect((await call(second, '/v1/categories?limit=1000', { apiKey: WRITER, headers: { 'if-none-match': etag } })).status).toBe(304);
    const created = await call(second, '/v1/categories', { apiKey: WRITER, json: { name: 'tagged elsewhere' } });
    expect(created.status).toBe(201);
    for (const instance of [first, second]) {
      const after = await call(instance, '/v1/categories?limit=1000', { apiKey: WRITER, headers: { 'if-none-match': etag } });
      expect(after.status).toBe(200);
      expect(after.body).toContainEqual(created.body);
      expect(after.headers['etag']).not.toBe(etag);
      const full = await call(instance, '/v1/categories', { apiKey: WRITER });
      expect((await call(instance, '/v1/categories', { apiKey: WRITER, headers: { 'if-none-match': full.headers['etag'] as string } })).status).toBe(304);
    }
  });
});

describe.skipIf(!installed)('PostgreSQL killed with SIGKILL during parallel creates', () => {
  const started = serversForSuite();
  const { instances } = started;
  let failOpen: Instance;
  beforeAll(async () => {
    failOpen = await startInstance('fastify', started.server.url, { failOpen: true });
  });
  afterAll(async () => {
    await failOpen?.close();
  });

  it('lists every create answered 201 exactly once, with increasing ids; a 503 create is there at most once', async () => {
    interface Sent {
      name: string;
      answer: Answer;
    }
    const sent: Sent[][] = Array.from({ length: 8 }, () => []);
    const created = () => sent.flat().filter((entry) => entry.answer.status === 201).length;
    const refused = () => sent.flat().filter((entry) => entry.answer.status === 503).length;
    let phase: 'before' | 'down' | 'after' | 'done' = 'before';
    let createdAfterRestart = 0;
    const writer = async (worker: number) => {
      for (let seq = 0; phase !== 'done'; seq++) {
        const name = `w${worker}-${seq}`;
        const answer = await call(instances[worker % 2] as Instance, '/v1/categories', { apiKey: WRITER, json: { name } });
        sent[worker]?.push({ name, answer });
        if (answer.status === 201 && phase === 'after') createdAfterRestart++;
        // Paces a writer while the database is away (no busy loop); nothing here waits for time to pass.
        if (answer.status !== 201) await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    const writers = Array.from({ length: 8 }, (_, worker) => writer(worker));
    try {
      await killAndRestartMidway();
    } finally {
      phase = 'done';
      await Promise.all(writers);
    }
    async function killAndRestartMidway() {
      await waitUntil(() => created() >= 100, '100 creates before the kill');
      await started.server.kill();
      phase = 'down';
      // Fail-open: while the database is away, the limit is charged to the per-process insurance store.
      const whileDown = await call(failOpen, '/v1/categories', { apiKey: LIMITED });
      expect(whileDown.status).toBe(200);
      expect(whileDown.headers['x-ratelimit-limit']).toBe('25');
      // The writers meet the dead database (their creates answer 503) before it comes back.
      await waitUntil(() => refused() >= 8, 'creates answered 503 while the database is down');
      await started.server.restart();
      phase = 'after';
      await waitUntil(() => createdAfterRestart >= 100, '100 creates after the restart (the pools reconnect)');
    }

    const all = sent.flat();
    const statuses = new Set(all.map((entry) => entry.answer.status));
    // Only 201 and 503 (with Retry-After and the Error body): never a 500, never a hang.
    expect([...statuses].sort()).toEqual([201, 503]);
    for (const entry of all.filter((e) => e.answer.status === 503)) {
      expect(entry.answer.body).toMatchObject({ code: 'service_unavailable', status: 503 });
      expect(Number(entry.answer.headers['retry-after'])).toBeGreaterThan(0);
    }

    const listed = (await call(instances[0] as Instance, '/v1/categories', { apiKey: WRITER })).body as Array<{ id: number; name: string }>;
    const listedByName = new Map<string, number>();
    for (const category of listed) listedByName.set(category.name, (listedByName.get(category.name) ?? 0) + 1);
    // Nothing doubled: every name at most once, ids unique and listed in increasing order.
    expect([...listedByName.values()].filter((count) => count > 1)).toEqual([]);
    const ids = listed.map((category) => category.id);
    expect(ids).toEqual([...new Set(ids)].sort((a, b) => a - b));
    // Nothing lost: every 201 is listed, as answered.
    const answered201 = all.filter((entry) => entry.answer.status === 201);
    expect(listed).toEqual(expect.arrayContaining(answered201.map((entry) => entry.answer.body)));
    // Nothing invented: everything listed was sent; besides the 201s, only creates answered 503 (written or not).
    const sentNames = new Set(all.map((entry) => entry.name));
    expect(listed.filter((category) => !sentNames.has(category.name))).toEqual([]);
    const failedNames = new Set(all.filter((entry) => entry.answer.status === 503).map((entry) => entry.name));
    const extra = listed.filter((category) => !answered201.some((entry) => entry.name === category.name));
    expect(extra.filter((category) => !failedNames.has(category.name))).toEqual([]);
    expect(failedNames.size).toBeGreaterThan(0);
    // Each writer's 201 ids increase over time, across the restart too.
    for (const entries of sent) {
      const workerIds = entries.filter((entry) => entry.answer.status === 201).map((entry) => (entry.answer.body as { id: number }).id);
      expect(workerIds).toEqual([...workerIds].sort((a, b) => a - b));
    }
  });
});

describe.skipIf(postgresUrl === null)("the operator's peek and reset, and costs, on one PostgreSQL shared by two instances", () => {
  // One account with two keys: they share the account's windows; a ban falls on the key that earned it.
  const FIRST = 'pg-account-first-key';
  const SECOND = 'pg-account-second-key';
  const apiKeys = staticApiKeys([
    // 7 units a day: no window can reset during the test unless it runs across midnight UTC.
    { key: FIRST, plan: 'enterprise', accountId: 'acct-shared', limits: { requestsPerMinute: 1000, requestsPerDay: 7 } },
    { key: SECOND, plan: 'enterprise', accountId: 'acct-shared', limits: { requestsPerMinute: 1000, requestsPerDay: 7 } },
  ]);
  const suite = schemaForSuite();
  const started = { instances: [] as Instance[], petstores: [] as Petstore[] };
  beforeAll(async () => {
    for (const framework of ['fastify', 'express'] as const) {
      const instancePool = new pg.Pool({ connectionString: suite.url, max: 5 });
      instancePool.on('error', () => undefined);
      const petstore = createPetstore({
        apiKeys,
        categories: postgresCategoryStore({ pool: instancePool, schema: suite.schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }),
        rateLimit: {
          store: postgresRateLimitStore({ pool: instancePool, schema: suite.schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }),
          cost: { createCategory: 3 },
          // The first refusal bans the key for an hour: no ban interval or ban end can pass during the test.
          ban: { rejectedThreshold: 1, intervalMs: 60_000, durationMs: 3_600_000 },
        },
        onInternalError: () => undefined,
      });
      started.petstores.push(petstore);
      started.instances.push(await servePetstore(framework, petstore, () => instancePool.end()));
    }
  });
  afterAll(async () => {
    await Promise.all(started.instances.map((instance) => instance.close()));
  });

  it('charge costs to the account, ban the key that was refused, and obey a reset made on the other instance', async () => {
    const [fastify, express] = started.instances as [Instance, Instance];
    const [onFastify, onExpress] = started.petstores as [Petstore, Petstore];
    const first = (await apiKeys.findPrincipal(hashApiKey(FIRST)))?.keyId as string;
    const second = (await apiKeys.findPrincipal(hashApiKey(SECOND)))?.keyId as string;

    // Two creates of cost 3, one per instance and key: 6 of the account's 7 units.
    const created = await call(fastify, '/v1/categories', { apiKey: FIRST, json: { name: 'one' } });
    expect([created.status, created.headers['x-ratelimit-remaining']]).toEqual([201, '4']);
    const again = await call(express, '/v1/categories', { apiKey: SECOND, json: { name: 'two' } });
    expect([again.status, again.headers['x-ratelimit-remaining']]).toEqual([201, '1']);
    // A create costs more than the 1 unit left: refused, nothing charged, and the first refusal bans the key.
    const refused = await call(fastify, '/v1/categories', { apiKey: FIRST, json: { name: 'three' } });
    expect(refused.status).toBe(429);
    expect((await call(express, '/v1/categories', { apiKey: FIRST })).status).toBe(429);
    // The other key of the account is not banned: its list (cost 1) takes the last unit.
    const last = await call(fastify, '/v1/categories', { apiKey: SECOND });
    expect([last.status, last.headers['x-ratelimit-remaining']]).toEqual([200, '0']);

    // Either instance reads the same record, charging nothing.
    const peeked = await onExpress.rateLimits.peek({ keyId: first });
    expect(peeked.windows.map(({ used, remaining }) => ({ used, remaining }))).toEqual([
      { used: 7, remaining: 993 },
      { used: 7, remaining: 0 },
    ]);
    expect(peeked.bans).toEqual([{ keyId: first, bannedUntilMs: expect.any(Number) }]);
    expect(peeked.bans[0]?.bannedUntilMs).toBeGreaterThan(peeked.nowMs);
    expect((await onFastify.rateLimits.peek({ keyId: second })).bans).toEqual([]);
    const account = await onFastify.rateLimits.peek({ accountId: 'acct-shared' });
    expect(account.windows).toEqual((await onExpress.rateLimits.peek({ accountId: 'acct-shared' })).windows);
    expect(account.bans).toEqual(peeked.bans);

    // A reset by keyId on one instance clears the account's windows and the key's ban for both.
    await onExpress.rateLimits.reset({ keyId: first });
    expect(await onFastify.rateLimits.peek({ accountId: 'acct-shared' })).toMatchObject({ windows: [], bans: [] });
    const afterReset = await call(fastify, '/v1/categories', { apiKey: FIRST });
    expect([afterReset.status, afterReset.headers['x-ratelimit-remaining']]).toEqual([200, '6']);
    const peekedAfter = await onExpress.rateLimits.peek({ keyId: first });
    expect(peekedAfter.windows.map(({ used }) => used)).toEqual([1, 1]);
    expect(peekedAfter.bans).toEqual([]);
  });
});
