/**
 * What the PostgreSQL API-key record store adds to the core's conformance suite: one statement per call, the
 * statement's conditions under concurrency, notifications delivered at commit to every watcher of the table (and
 * only of that table), the LISTEN connection broken and restored, and failures.
 */
import { hashApiKey, isPetstoreError, type ApiKeyRecord, type ApiKeyRecordWatcher } from '@petstore/core';
import { once } from 'node:events';
import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import pg from 'pg';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LISTEN_HEARTBEAT_INTERVAL_MS, LISTEN_RECONNECT_INITIAL_DELAY_MS, postgresApiKeyRecordStore } from './api-key-record-store.js';
import { migratePostgres } from './migrate.js';
import { postgresApiKeysChannel } from './names.js';
import { countStatements } from '../test-support/count-statements.js';
import { connectPool, GUARD_CALL_TIMEOUT_MS, migratedSchema, postgresUrl, skipPostgres, uniqueSchema } from '../test-support/postgres.js';

const T0 = Date.UTC(2026, 0, 1);
const digestOf = (key: string): Uint8Array => new Uint8Array(hashApiKey(key));
const hex = (digest: Uint8Array): string => Buffer.from(digest).toString('hex');

/** A record of account `acct-1` on the free plan, created at T0, with the digest of `key-<keyId>`. */
function record(keyId: string, fields: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  return { keyId, accountId: 'acct-1', plan: 'free', createdAtMs: T0, updatedAtMs: T0, digest: digestOf(`key-${keyId}`), ...fields };
}

/** A watcher that records what it is told, with promises of the next event of each kind. */
function recordingWatcher() {
  const changes: string[][] = [];
  const disconnectErrors: Error[] = [];
  let reconnects = 0;
  let waiters: Array<() => void> = [];
  const wake = () => {
    const current = waiters;
    waiters = [];
    for (const resolve of current) resolve();
  };
  const until = async (done: () => boolean) => {
    while (!done()) await new Promise<void>((resolve) => waiters.push(resolve));
  };
  const listener: ApiKeyRecordWatcher = {
    onChange(digests) {
      changes.push(digests.map(hex).sort());
      wake();
    },
    onDisconnect(error) {
      disconnectErrors.push(error);
      wake();
    },
    onReconnect() {
      reconnects++;
      wake();
    },
  };
  return {
    listener,
    changes,
    /** The errors `onDisconnect` was told, in order. */
    disconnectErrors,
    get reconnects() {
      return reconnects;
    },
    /** Resolves once `count` changes have arrived in all. */
    changesReach: (count: number) => until(() => changes.length >= count),
    /** Resolves once `count` disconnections have been reported in all. */
    disconnectsReach: (count: number) => until(() => disconnectErrors.length >= count),
    /** Resolves once `count` reconnections have been reported in all. */
    reconnectsReach: (count: number) => until(() => reconnects >= count),
  };
}

/** The backend pids of the LISTEN connections on `channel` (what `pg_stat_activity` shows as their last statement). */
async function listeningPids(pool: pg.Pool, channel: string): Promise<number[]> {
  const { rows } = await pool.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE query = $1 ORDER BY pid`, [`LISTEN "${channel}"`]);
  return rows.map((row) => row.pid);
}

/**
 * A TCP proxy to the test server whose `freeze()` stops forwarding in both directions without closing anything:
 * to the client, a connection that died without a word (a dropped network path).
 */
async function freezableProxy(): Promise<{ url: string; freeze(): void; close(): Promise<void> }> {
  const target = new URL(postgresUrl as string);
  const sockets = new Set<Socket>();
  let frozen = false;
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(from);
      from.on('data', (chunk) => {
        if (!frozen) to.write(chunk);
      });
      from.on('error', () => undefined);
      from.on('close', () => to.destroy());
    }
  }).listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    freeze: () => {
      frozen = true;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

afterEach(() => {
  vi.useRealTimers();
});

describe.skipIf(skipPostgres)('postgresApiKeyRecordStore', () => {
  it('round-trips every field exactly, and absent fields stay absent', async () => {
    const { pool, schema } = await migratedSchema('keys');
    const store = postgresApiKeyRecordStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const full = record('key_full', {
      accountId: '__proto__',
      plan: 'enterprise',
      limits: { requestsPerMinute: 9_007_199_254_740_991, requestsPerDay: 0 },
      name: `O'Brien's "key" — ünïcødé 🐕 \\ ;--`,
      expiresAtMs: T0 + 1000,
      revokedAtMs: T0 + 2000,
      updatedAtMs: T0 + 3000,
      previousDigest: digestOf('old-full'),
      previousValidUntilMs: T0 + 4000,
    });
    const bare = record('key_bare');
    await store.create(full);
    await store.create(bare);
    expect(await store.findByKeyId('key_full')).toStrictEqual(full);
    expect(await store.findByKeyId('key_bare')).toStrictEqual(bare);
    expect(await store.findByDigest(digestOf('old-full'))).toStrictEqual(full);
    expect(await store.findByKeyId('key_none')).toBeUndefined();
    expect(await store.findByDigest(digestOf('none'))).toBeUndefined();
    expect(Object.getPrototypeOf((await store.list({ accountId: '__proto__' })).records[0])).toBe(Object.prototype);
  });

  it('sends one statement per call', async () => {
    const { pool, schema } = await migratedSchema('keys');
    const store = postgresApiKeyRecordStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const statements = countStatements(pool);
    await store.create(record('key_a'));
    await store.findByDigest(digestOf('key-key_a'));
    await store.findByKeyId('key_a');
    await store.list();
    await store.list({ accountId: 'acct-1', after: 'key_', limit: 5 });
    await store.update('key_a', { kind: 'update', nowMs: T0 + 1, name: 'a' });
    await store.update('key_a', { kind: 'rotate', nowMs: T0 + 2, digest: digestOf('rotated'), previousValidUntilMs: T0 + 10 });
    await store.update('key_a', { kind: 'revoke', nowMs: T0 + 3 });
    await store.update('key_a', { kind: 'update', nowMs: T0 + 4, name: 'b' });
    expect(statements.count).toBe(9);
  });

  it('refuses a duplicate key id, digest, or a digest that is a previous digest, writing nothing', async () => {
    const { pool, schema } = await migratedSchema('keys');
    const store = postgresApiKeyRecordStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const watcher = recordingWatcher();
    const watching = await store.watch(watcher.listener);
    await store.create(record('key_a', { previousDigest: digestOf('old-a'), previousValidUntilMs: T0 + 1 }));
    await watcher.changesReach(1);
    for (const duplicate of [
      record('key_a', { digest: digestOf('other') }),
      record('key_b', { digest: digestOf('key-key_a') }),
      record('key_c', { digest: digestOf('old-a') }),
    ]) {
      const refused = await store.create(duplicate).catch((error: unknown) => error);
      expect(isPetstoreError(refused) && refused.code).toBe('internal_error');
    }
    const { rows } = await pool.query(`SELECT key_id FROM "${schema}".petstore_api_keys`);
    expect(rows).toEqual([{ key_id: 'key_a' }]);
    // A marker change after the refusals: had a refused create notified, it would have arrived before it.
    await store.update('key_a', { kind: 'update', nowMs: T0 + 1 });
    await watcher.changesReach(2);
    expect(watcher.changes).toEqual([[hex(digestOf('key-key_a')), hex(digestOf('old-a'))].sort(), [hex(digestOf('key-key_a')), hex(digestOf('old-a'))].sort()]);
    await watching.close();
  });

  it('applies 50 parallel rotations of one record from 5 pools one after the other: a chain, none lost', async () => {
    const { schema } = await migratedSchema('keys');
    const stores = Array.from({ length: 5 }, () => postgresApiKeyRecordStore({ pool: connectPool({ max: 10 }), schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }));
    await stores[0]?.create(record('key_r'));
    const digests = Array.from({ length: 50 }, (_, i) => digestOf(`rotation-${i}`));
    const results = await Promise.all(
      digests.map((digest, i) => stores[i % 5]?.update('key_r', { kind: 'rotate', nowMs: T0 + i, digest, previousValidUntilMs: T0 + 1000 })),
    );
    // Each answer's previous digest is the digest the one before it set (or the original): one chain of 51.
    const previousOf = new Map(results.map((result) => [hex(result?.digest as Uint8Array), hex(result?.previousDigest as Uint8Array)]));
    const after = new Set(previousOf.values());
    const original = hex(digestOf('key-key_r'));
    expect(after.size).toBe(50);
    expect(after.has(original)).toBe(true);
    const last = [...previousOf.keys()].filter((digest) => !after.has(digest));
    expect(last).toHaveLength(1);
    let steps = 0;
    for (let digest = last[0] as string; digest !== original; digest = previousOf.get(digest) as string) steps++;
    expect(steps).toBe(50);
    expect(hex((await stores[0]?.findByKeyId('key_r'))?.digest as Uint8Array)).toBe(last[0]);
  });

  it('lets a revocation win over parallel updates and rotations, and keeps its first time', async () => {
    const { schema } = await migratedSchema('keys');
    const stores = Array.from({ length: 3 }, () => postgresApiKeyRecordStore({ pool: connectPool({ max: 10 }), schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }));
    const store = stores[0] as (typeof stores)[0];
    await store.create(record('key_v'));
    const calls = Array.from({ length: 30 }, (_, i) => {
      const target = stores[i % 3] as (typeof stores)[0];
      if (i === 15) return target.update('key_v', { kind: 'revoke', nowMs: T0 + 500 });
      if (i % 2 === 0) return target.update('key_v', { kind: 'update', nowMs: T0 + i, name: `name ${i}` });
      return target.update('key_v', { kind: 'rotate', nowMs: T0 + i, digest: digestOf(`v-${i}`), previousValidUntilMs: T0 + 1000 });
    });
    const results = await Promise.all(calls);
    const final = await store.findByKeyId('key_v');
    expect(final?.revokedAtMs).toBe(T0 + 500);
    expect(final?.previousDigest).toBeUndefined();
    // Every change answered before the revocation was applied (the answer shows its own name or digest); every one
    // answered after it found the record revoked and left it as it was.
    results.forEach((result, i) => {
      if (result?.revokedAtMs !== undefined) expect(result).toStrictEqual(final);
      else if (i % 2 === 0) expect(result?.name).toBe(`name ${i}`);
      else expect(result?.digest).toEqual(digestOf(`v-${i}`));
    });
    expect(results.filter((result) => result?.revokedAtMs === undefined).length).toBeGreaterThan(0);
    expect(await store.update('key_v', { kind: 'revoke', nowMs: T0 + 9000 })).toStrictEqual(final);
  });

  it('lists by key id in byte order, per account or all, a page at a time', async () => {
    const { pool, schema } = await migratedSchema('keys');
    const store = postgresApiKeyRecordStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    // Upper case sorts before lower case, as JavaScript compares (not as a linguistic collation would).
    const ids = ['key_b', 'key_A', 'key_a', 'key_Z', 'key_0', 'key_z1', 'key_z'];
    for (const [i, keyId] of ids.entries()) await store.create(record(keyId, { accountId: i % 2 === 0 ? 'even' : 'odd' }));
    const sorted = [...ids].sort();
    const pages: string[][] = [];
    let after: string | undefined;
    for (;;) {
      const page = await store.list({ limit: 3, after });
      pages.push(page.records.map((r) => r.keyId));
      if (page.next === undefined) break;
      after = page.next;
    }
    expect(pages).toEqual([sorted.slice(0, 3), sorted.slice(3, 6), sorted.slice(6)]);
    expect((await store.list({ accountId: 'odd' })).records.map((r) => r.keyId)).toEqual(ids.filter((_, i) => i % 2 === 1).sort());
    const even = ids.filter((_, i) => i % 2 === 0).sort();
    expect((await store.list({ accountId: 'even', limit: 3 })).next).toBe(even[2]);
    expect((await store.list({ accountId: 'even', limit: 4 })).next).toBeUndefined();
    expect(await store.list({ accountId: 'odd', after: 'key_Z' })).toEqual({ records: [await store.findByKeyId('key_z1')] });
    expect(await store.list({ accountId: 'none' })).toEqual({ records: [] });
    for (const limit of [0, 1001, 1.5]) await expect(store.list({ limit })).rejects.toThrow(/^limit must be a whole number from 1 to 1000/);
  });

  it("notifies every watcher of the table at commit, with the change's digests before and after, and no other table's", async () => {
    const { pool, schema } = await migratedSchema('keys');
    await migratePostgres({ pool, schema, apiKeysTable: 'other_keys' });
    const writer = postgresApiKeyRecordStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const otherTable = postgresApiKeyRecordStore({ pool, schema, apiKeysTable: 'other_keys', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const reader = postgresApiKeyRecordStore({ pool: connectPool(), schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const watcher = recordingWatcher();
    const watching = await reader.watch(watcher.listener);
    const [a, b, c] = ['key-a', 'rot-1', 'rot-2'].map((key) => hex(digestOf(key)));
    await otherTable.create(record('key_other'));
    await writer.create(record('key_w', { digest: digestOf('key-a') }));
    await watcher.changesReach(1);
    await writer.update('key_w', { kind: 'update', nowMs: T0 + 1, plan: 'pro' });
    await watcher.changesReach(2);
    await writer.update('key_w', { kind: 'rotate', nowMs: T0 + 2, digest: digestOf('rot-1'), previousValidUntilMs: T0 + 10 });
    await watcher.changesReach(3);
    await writer.update('key_w', { kind: 'rotate', nowMs: T0 + 3, digest: digestOf('rot-2'), previousValidUntilMs: T0 + 10 });
    await watcher.changesReach(4);
    await writer.update('key_w', { kind: 'revoke', nowMs: T0 + 4 });
    await watcher.changesReach(5);
    expect(watcher.changes).toEqual([[a], [a], [a, b].sort(), [a, b, c].sort(), [b, c].sort()]);
    // Changes that change nothing (a revoked record; an unknown key id) notify nothing: the marker arrives next.
    await writer.update('key_w', { kind: 'update', nowMs: T0 + 5, name: 'ignored' });
    await writer.update('key_none', { kind: 'revoke', nowMs: T0 + 5 });
    await writer.create(record('key_marker'));
    await watcher.changesReach(6);
    expect(watcher.changes.slice(5)).toEqual([[hex(digestOf('key-key_marker'))]]);
    expect(watcher.reconnects).toBe(0);
    await watching.close();
  });

  it('delivers nothing of a transaction rolled back, and the change of a committed one', async () => {
    const { pool, schema } = await migratedSchema('keys');
    const store = postgresApiKeyRecordStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const watcher = recordingWatcher();
    const watching = await store.watch(watcher.listener);
    await store.create(record('key_t'));
    await watcher.changesReach(1);
    // The store's statement inside a transaction of the host's (a client of the pool used as the store's pool).
    const client = await pool.connect();
    try {
      const inTransaction = postgresApiKeyRecordStore({ pool: client as unknown as pg.Pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
      await client.query('BEGIN');
      await inTransaction.update('key_t', { kind: 'rotate', nowMs: T0 + 1, digest: digestOf('rolled-back'), previousValidUntilMs: T0 + 9 });
      await client.query('ROLLBACK');
      await client.query('BEGIN');
      await inTransaction.update('key_t', { kind: 'update', nowMs: T0 + 2, name: 'committed' });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    await watcher.changesReach(2);
    // Notifications arrive in commit order: the rotation's (naming its new digest) would have come first.
    expect(watcher.changes[1]).toEqual([hex(digestOf('key-key_t'))]);
    expect((await store.findByKeyId('key_t'))?.name).toBe('committed');
    expect((await store.findByDigest(digestOf('rolled-back')))).toBeUndefined();
    await watching.close();
  });

  it('listens again after its connection is terminated, telling the watcher to drop everything; close ends it', async () => {
    const { pool, schema } = await migratedSchema('keys');
    const store = postgresApiKeyRecordStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const channel = postgresApiKeysChannel({ schema });
    const watcher = recordingWatcher();
    const watching = await store.watch(watcher.listener);
    const [pid] = await listeningPids(pool, channel);
    expect(pid).toBeTypeOf('number');
    await pool.query('SELECT pg_terminate_backend($1)', [pid]);
    await watcher.reconnectsReach(1);
    expect(watcher.disconnectErrors).toHaveLength(1);
    expect(watcher.disconnectErrors[0]?.message).toMatch(/^The API-key store's LISTEN connection broke: /);
    const pids = await listeningPids(pool, channel);
    expect(pids).toHaveLength(1);
    expect(pids[0]).not.toBe(pid);
    // The new connection hears the changes.
    await store.create(record('key_after'));
    await watcher.changesReach(1);
    await watching.close();
    expect(await listeningPids(pool, channel)).toEqual([]);
  });

  it('tells onDisconnect once while the server refuses the new connection, retries with backoff, then reports the reconnection once', async () => {
    const { pool, schema } = await migratedSchema('keys');
    let made = 0;
    let refusing = false;
    let refused = 0;
    let allow: () => void = () => undefined;
    const enough = new Promise<void>((resolve) => (allow = resolve));
    const store = postgresApiKeyRecordStore({
      pool,
      schema,
      listenClient: () => {
        made++;
        // While refusing: a client to a port where nothing listens (a server still down).
        if (!refusing) return new pg.Client({ connectionString: postgresUrl as string });
        if (++refused >= 3) {
          refusing = false;
          allow();
        }
        return new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:1/postgres' });
      },
      callTimeoutMs: GUARD_CALL_TIMEOUT_MS,
    });
    const watcher = recordingWatcher();
    const watching = await store.watch(watcher.listener);
    const [pid] = await listeningPids(pool, postgresApiKeysChannel({ schema }));
    refusing = true;
    await pool.query('SELECT pg_terminate_backend($1)', [pid]);
    await enough;
    // Told at the break, not again at each refused try; no reconnection yet.
    expect(watcher.disconnectErrors).toHaveLength(1);
    expect(watcher.reconnects).toBe(0);
    await watcher.reconnectsReach(1);
    expect(made).toBe(5); // the first, three refused, the one that listens
    expect(watcher.reconnects).toBe(1);
    expect(watcher.disconnectErrors).toHaveLength(1);
    await store.create(record('key_back'));
    await watcher.changesReach(1);
    await watching.close();
  });

  it('replaces a connection that died without a word when its heartbeat goes unanswered', async () => {
    const { pool, schema } = await migratedSchema('keys');
    const proxy = await freezableProxy();
    let made = 0;
    // The first connection goes through the proxy; the replacement straight to the server.
    const listenClient = () => new pg.Client({ connectionString: made++ === 0 ? proxy.url : (postgresUrl as string) });
    const store = postgresApiKeyRecordStore({ pool, schema, listenClient, callTimeoutMs: 1000 });
    // Only the store's timers are faked (the heartbeat, the deadline, the backoff); sockets and Date stay real.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const watcher = recordingWatcher();
    const watching = await store.watch(watcher.listener);
    proxy.freeze();
    await store.create(record('key_lost')); // its notification never arrives through the frozen proxy
    await vi.advanceTimersByTimeAsync(LISTEN_HEARTBEAT_INTERVAL_MS); // the heartbeat's LISTEN goes unanswered …
    expect(made).toBe(1);
    await vi.advanceTimersByTimeAsync(999);
    expect(watcher.disconnectErrors).toEqual([]);
    await vi.advanceTimersByTimeAsync(1); // … past callTimeoutMs: the connection is let go, and the watcher told
    expect(watcher.disconnectErrors.map((error) => error.message)).toEqual([
      "The API-key store's LISTEN connection broke: PostgreSQL did not answer within callTimeoutMs (1000 ms)",
    ]);
    await vi.advanceTimersByTimeAsync(LISTEN_RECONNECT_INITIAL_DELAY_MS); // the first retry, at most this long after
    await watcher.reconnectsReach(1);
    expect(made).toBe(2);
    expect(watcher.changes).toEqual([]);
    vi.useRealTimers();
    await store.create(record('key_heard'));
    await watcher.changesReach(1);
    expect(watcher.changes).toEqual([[hex(digestOf('key-key_heard'))]]);
    await watching.close();
    await proxy.close();
  });

  it('tells the watcher to drop everything on a notification that is not a list of digests (an operator NOTIFY)', async () => {
    const { pool, schema } = await migratedSchema('keys');
    const store = postgresApiKeyRecordStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const watcher = recordingWatcher();
    const watching = await store.watch(watcher.listener);
    await pool.query(`NOTIFY "${postgresApiKeysChannel({ schema })}"`);
    await watcher.reconnectsReach(1);
    expect(watcher.changes).toEqual([]);
    await watching.close();
  });

  it('closes every watcher with the store, leaving the pool open', async () => {
    const { pool, schema } = await migratedSchema('keys');
    const store = postgresApiKeyRecordStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    await store.watch(recordingWatcher().listener);
    await store.watch(recordingWatcher().listener);
    const channel = postgresApiKeysChannel({ schema });
    expect(await listeningPids(pool, channel)).toHaveLength(2);
    await store.close();
    expect(await listeningPids(pool, channel)).toEqual([]);
    expect(await store.findByKeyId('key_x')).toBeUndefined();
  });

  it('answers 503 service_unavailable when the database is unreachable (watch too), and a clear error when the table is missing', async () => {
    const away = postgresApiKeyRecordStore({ pool: connectPool({ connectionString: 'postgres://postgres@127.0.0.1:1/postgres' }), callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const unavailable = { code: 'service_unavailable', retryAfterSeconds: 5 };
    await expect(away.findByDigest(digestOf('x'))).rejects.toMatchObject(unavailable);
    await expect(away.update('key_x', { kind: 'revoke', nowMs: T0 })).rejects.toMatchObject(unavailable);
    await expect(away.watch(recordingWatcher().listener)).rejects.toMatchObject(unavailable);
    const unmigrated = postgresApiKeyRecordStore({ pool: connectPool(), schema: uniqueSchema('missing'), callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const missing = await unmigrated.findByKeyId('key_x').catch((error: unknown) => error);
    expect(isPetstoreError(missing)).toBe(false);
    expect((missing as Error).message).toMatch(/run migratePostgres/);
  });

  it('refuses wrong options when created, naming the option', async () => {
    const pool = new pg.Pool();
    expect(() => postgresApiKeyRecordStore({ pool, apiKeysTable: 'api-keys' })).toThrow(/^apiKeysTable must be 1-47 .*"api-keys"/);
    expect(() => postgresApiKeyRecordStore({ pool, apiKeysTable: 'k'.repeat(48) })).toThrow(/^apiKeysTable must be 1-47 /);
    expect(() => postgresApiKeyRecordStore({ pool, schema: 'a b' })).toThrow(/^schema must be/);
    expect(() => postgresApiKeyRecordStore({ pool, callTimeoutMs: 0 })).toThrow(/^callTimeoutMs must be a whole number >= 1, got 0/);
    expect(() => postgresApiKeyRecordStore({ pool, listenClient: 'pg' as unknown as () => pg.Client })).toThrow(/^listenClient must be a function/);
    expect(() => postgresApiKeyRecordStore({ pool: {} as pg.Pool })).toThrow(/Pool/);
    // A pool-like object without a Client class: watch needs listenClient.
    const store = postgresApiKeyRecordStore({ pool: { query: pool.query.bind(pool) } as unknown as pg.Pool });
    await expect(store.watch(recordingWatcher().listener)).rejects.toThrow(/listenClient/);
    await pool.end();
  });
});

describe('postgresApiKeysChannel', () => {
  it('is <schema>.<apiKeysTable> when that fits in 63 bytes, else a 63-byte name with a hash of it', () => {
    expect(postgresApiKeysChannel()).toBe('public.petstore_api_keys');
    expect(postgresApiKeysChannel({ schema: 'Shop', apiKeysTable: 'Keys' })).toBe('Shop.Keys');
    const long = { schema: 's'.repeat(63), apiKeysTable: 'k'.repeat(47) };
    const channel = postgresApiKeysChannel(long);
    expect(channel).toHaveLength(63);
    expect(channel).toMatch(/^s{46}_[0-9a-f]{16}$/);
    expect(postgresApiKeysChannel({ ...long, apiKeysTable: 'k'.repeat(46) })).not.toBe(channel);
    expect(() => postgresApiKeysChannel({ apiKeysTable: 'a.b' })).toThrow(/^apiKeysTable must be/);
  });
});
