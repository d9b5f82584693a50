/**
 * Managed API keys on one PostgreSQL shared by two app instances (Fastify and Express, each with its own pool,
 * record store, LISTEN connection and `managedApiKeys` cache on a clock of its own): a revocation, rotation or
 * plan change made on one instance is obeyed by the other once its notification arrives (the test waits for that
 * event, never for time); with the other's LISTEN connection killed, its store tells it at once, and it obeys the
 * change by checking keys at the store until its watcher is back.
 */
import { createPetstore, hashApiKey, managedApiKeys, type ApiKeyRecordStore, type ApiKeyRecordWatcher, type ManagedApiKeys } from '@petstore/core';
import { fakeClock, type FakeClock } from '@petstore/core/testing';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import { migratePostgres, postgresApiKeyRecordStore } from '@petstore/storage-postgres';
import { findPostgresBinDir, startPostgresServer, type PostgresServer } from '@petstore/storage-postgres/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, servePetstore, type Instance } from '../../redis/src/serve.js';

const installed = findPostgresBinDir() !== undefined;
if (!installed && process.env.PETSTORE_REQUIRE_POSTGRES === '1') throw new Error('PostgreSQL is not installed (PETSTORE_REQUIRE_POSTGRES=1)');

/** The managers' cache TTL of known keys, in ms (the default). */
const TTL_MS = 30_000;

/**
 * What the store told the manager, recorded after the manager has handled it: a test waits for "the other instance
 * has dropped this key's digest" with `nextChange(key)` (called before the change), and for "it has dropped
 * everything" with `reconnected(count)`.
 */
function observed(store: ApiKeyRecordStore) {
  const changes: string[][] = [];
  let reconnects = 0;
  let disconnects = 0;
  let waiters: Array<() => void> = [];
  const wake = () => {
    const current = waiters;
    waiters = [];
    for (const resolve of current) resolve();
  };
  const until = async (done: () => boolean) => {
    while (!done()) await new Promise<void>((resolve) => waiters.push(resolve));
  };
  const watched: ApiKeyRecordStore = {
    ...store,
    watch: (listener: ApiKeyRecordWatcher) =>
      (store.watch as NonNullable<ApiKeyRecordStore['watch']>)({
        onChange(digests) {
          listener.onChange(digests);
          changes.push(digests.map((digest) => Buffer.from(digest).toString('hex')));
          wake();
        },
        onDisconnect(error) {
          listener.onDisconnect(error);
          disconnects++;
          wake();
        },
        onReconnect() {
          listener.onReconnect();
          reconnects++;
          wake();
        },
      }),
  };
  return {
    store: watched,
    /** Resolves once some change naming the digest of `key` has been handled (a key's creation, say). */
    heard(key: string): Promise<void> {
      const digest = hashApiKey(key).toString('hex');
      return until(() => changes.some((digests) => digests.includes(digest)));
    },
    /** Resolves once a change told after this call, naming the digest of `key`, has been handled. */
    nextChange(key: string): Promise<void> {
      const since = changes.length;
      const digest = hashApiKey(key).toString('hex');
      return until(() => changes.slice(since).some((digests) => digests.includes(digest)));
    },
    /** Resolves once `count` disconnections have been handled in all. */
    disconnected: (count: number) => until(() => disconnects >= count),
    /** Resolves once `count` reconnections have been handled in all. */
    reconnected: (count: number) => until(() => reconnects >= count),
  };
}

interface ManagedInstance {
  http: Instance;
  keys: ManagedApiKeys;
  clock: FakeClock;
  events: ReturnType<typeof observed>;
}

/** An instance on its own pool: managed keys in PostgreSQL (its own clock), categories and rate limits in memory. */
async function startInstance(framework: 'fastify' | 'express', url: string, listenClient?: () => pg.Client): Promise<ManagedInstance> {
  const pool = new pg.Pool({ connectionString: url, max: 5 });
  pool.on('error', () => undefined);
  const recordStore = postgresApiKeyRecordStore({ pool, ...(listenClient === undefined ? {} : { listenClient }) });
  const events = observed(recordStore);
  const clock = fakeClock(Date.now());
  const keys = managedApiKeys({ store: events.store, clock, cache: { ttlMs: TTL_MS } });
  await keys.ready();
  const petstore = createPetstore({
    apiKeys: keys,
    categories: memoryCategoryStore(),
    rateLimit: { store: memoryRateLimitStore() },
    onInternalError: () => undefined,
  });
  const http = await servePetstore(framework, petstore, async () => {
    await keys.close();
    await recordStore.close();
    await pool.end();
  });
  return { http, keys, clock, events };
}

/** The status of `GET /v1/categories` with `key` on an instance. */
async function statusWith(instance: ManagedInstance, key: string): Promise<number> {
  return (await call(instance.http, '/v1/categories', { apiKey: key })).status;
}

describe.skipIf(!installed)('managed keys on two instances sharing one PostgreSQL', () => {
  let server: PostgresServer;
  const instances: ManagedInstance[] = [];
  // The second instance's LISTEN connection: named, so the test can kill it; while `refuse` holds, a new one
  // goes to a port where nothing listens (the database unreachable from that instance).
  let refuse = false;
  let onListenClient: () => void = () => undefined;
  const listenClient = () => {
    onListenClient();
    const target = refuse ? 'postgres://postgres@127.0.0.1:1/postgres' : server.url;
    return new pg.Client({ connectionString: target, application_name: 'petstore-managed-keys-b' });
  };

  beforeAll(async () => {
    server = await startPostgresServer();
    const pool = new pg.Pool({ connectionString: server.url });
    await migratePostgres({ pool });
    await pool.end();
    instances.push(await startInstance('fastify', server.url), await startInstance('express', server.url, listenClient));
  });
  afterAll(async () => {
    await Promise.all(instances.map((instance) => instance.http.close()));
    await server?.stop();
  });

  it('obey a revocation, a rotation and a plan change made on the other instance once its notification arrives', async () => {
    const [a, b] = instances as [ManagedInstance, ManagedInstance];
    const issued = await a.keys.issue({ accountId: 'acct-propagation', plan: 'pro' });
    await b.events.heard(issued.key); // the creation's notification: none of it may arrive later, mid-test
    const first = await call(b.http, '/v1/categories', { apiKey: issued.key });
    expect([first.status, first.headers['x-ratelimit-limit']]).toEqual([200, '300']); // cached on b from now on

    const updated = b.events.nextChange(issued.key);
    await a.keys.update(issued.keyId, { plan: 'business' });
    await updated;
    expect((await call(b.http, '/v1/categories', { apiKey: issued.key })).headers['x-ratelimit-limit']).toBe('1000');

    const replaced = b.events.nextChange(issued.key);
    const rotated = await a.keys.rotate(issued.keyId, { graceMs: 3_600_000 });
    await replaced;
    expect([await statusWith(b, rotated.key), await statusWith(b, issued.key)]).toEqual([200, 200]); // the old one in its grace period

    const revoked = b.events.nextChange(rotated.key);
    await a.keys.revoke(issued.keyId);
    await revoked;
    // b's clock has not moved: its cache still held both keys; the notification alone made it ask again.
    expect([await statusWith(b, rotated.key), await statusWith(b, issued.key)]).toEqual([401, 401]);
    expect([await statusWith(a, rotated.key), await statusWith(a, issued.key)]).toEqual([401, 401]);
  });

  it('with the LISTEN connection killed, are told so and obey a revocation at once by asking the store, then hear changes once back', async () => {
    const [a, b] = instances as [ManagedInstance, ManagedInstance];
    const one = await a.keys.issue({ accountId: 'acct-lost', plan: 'free' });
    const two = await a.keys.issue({ accountId: 'acct-lost', plan: 'free' });
    await Promise.all([b.events.heard(one.key), b.events.heard(two.key)]);
    expect([await statusWith(b, one.key), await statusWith(b, two.key)]).toEqual([200, 200]);

    // Kill b's LISTEN session; b cannot listen again until `refuse` is lifted.
    refuse = true;
    const reconnecting = new Promise<void>((resolve) => (onListenClient = resolve));
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    try {
      const { rows } = await admin.query<{ ended: boolean }>(
        `SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE application_name = 'petstore-managed-keys-b'`,
      );
      expect(rows).toEqual([{ ended: true }]);
    } finally {
      await admin.end();
    }
    // b's store tells its manager of the break at once, and tries to connect again (and fails, while refused).
    await b.events.disconnected(1);
    await reconnecting;

    await a.keys.revoke(one.keyId);
    expect(await statusWith(a, one.key)).toBe(401);
    // The notification never reached b, but while its watch is broken b checks cached keys at the store: no TTL
    // passes on its clock.
    expect(await statusWith(b, one.key)).toBe(401);
    expect(await statusWith(b, two.key)).toBe(200);
    await a.keys.revoke(two.keyId);
    expect(await statusWith(b, two.key)).toBe(401);
    refuse = false;
    await b.events.reconnected(1); // listening again
    expect(await statusWith(b, two.key)).toBe(401);

    // And b hears the changes again.
    const three = await a.keys.issue({ accountId: 'acct-lost', plan: 'free' });
    await b.events.heard(three.key);
    expect(await statusWith(b, three.key)).toBe(200);
    const revoked = b.events.nextChange(three.key);
    await a.keys.revoke(three.keyId);
    await revoked;
    expect(await statusWith(b, three.key)).toBe(401);
  });
});
