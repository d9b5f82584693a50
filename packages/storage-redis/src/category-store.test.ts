import { createHash } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { isPetstoreError } from '@petstore/core';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { categoryRedisKeys, redisCategoryStore } from './category-store.js';
import { redisRateLimitStore } from './rate-limit-store.js';
import { isRedisServerInstalled, startRedisServer } from './testing/redis-server.js';
import { closedPort, connect, countCommands, expiresAtMs, redisNowMs, skipRedis, GUARD_CALL_TIMEOUT_MS, track, uniquePrefix } from '../test-support/redis.js';

function newStore(options: { maxCategories?: number; callTimeoutMs?: number } = {}) {
  const client = connect();
  const keyPrefix = uniquePrefix();
  return { client, keyPrefix, keys: categoryRedisKeys(keyPrefix), store: redisCategoryStore({ client, keyPrefix, ...options }) };
}

/** 64 lowercase hex characters made of `label`: the shape of the library's idempotency keys and fingerprints. */
const hex64 = (label: string) => createHash('sha256').update(label).digest('hex');

/** An idempotent create's request with keys made of labels. */
const idempotent = (key: string, fingerprint = 'body', retentionMs = 60_000) => ({ key: hex64(key), fingerprint: hex64(fingerprint), retentionMs });

describe('categoryRedisKeys', () => {
  it('names every key with the {categories} hash tag after the prefix, petstore: by default', () => {
    expect(categoryRedisKeys()).toMatchObject({ records: 'petstore:{categories}', lastId: 'petstore:{categories}:last-id' });
    expect(categoryRedisKeys().idempotency('ab12')).toBe('petstore:{categories}:idempotency:ab12');
    const tagged = categoryRedisKeys('shop:{eu}:');
    expect(tagged).toMatchObject({ records: 'shop:{eu}:{categories}', lastId: 'shop:{eu}:{categories}:last-id' });
    expect(tagged.idempotency('ab12')).toBe('shop:{eu}:{categories}:idempotency:ab12');
    const bare = categoryRedisKeys('');
    expect(bare).toMatchObject({ records: '{categories}', lastId: '{categories}:last-id' });
    expect(bare.idempotency('ab12')).toBe('{categories}:idempotency:ab12');
  });
});

describe.skipIf(skipRedis)('redisCategoryStore against Redis', () => {
  it('pages past records deleted by hand, still answering limit records while more remain, in one call each', async () => {
    const { client, keys, store } = newStore();
    for (let i = 1; i <= 6; i++) await store.create({ name: `c${i}` });
    await client.hdel(keys.records, '2', '3');
    expect((await store.list({ limit: 2, after: 0 })).map((category) => category.id)).toEqual([1, 4]);
    const counter = await countCommands(client);
    expect((await store.list({ limit: 2, after: 4 })).map((category) => category.id)).toEqual([5, 6]);
    expect(counter.count).toBe(1);
    expect(await store.listVersion()).toMatch(/^6@\d+\.\d+$/);
  });

  it('gives 200 parallel creates the distinct ids 1..200 and lists them in id order', async () => {
    const { store } = newStore();
    expect(await store.list()).toEqual([]);
    const created = await Promise.all(Array.from({ length: 200 }, (_, i) => store.create({ name: `c${i}` })));
    expect(created.map((category) => category.id).sort((a, b) => a - b)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    const listed = await store.list();
    expect(listed.map((category) => category.id)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    for (const category of created) expect(listed[category.id - 1]).toEqual(category);
  });

  it('gives parallel creates from several clients (processes) distinct ids', async () => {
    const keyPrefix = uniquePrefix();
    const stores = Array.from({ length: 4 }, () => redisCategoryStore({ client: connect(), keyPrefix, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }));
    const created = await Promise.all(Array.from({ length: 100 }, (_, i) => stores[i % 4]!.create({ name: `c${i}` })));
    expect(new Set(created.map((category) => category.id)).size).toBe(100);
    expect((await stores[0]!.list()).length).toBe(100);
  });

  it('stores no description key when there is none, and the description as given when there is', async () => {
    const { client, keys, store } = newStore();
    const dogs = await store.create({ name: 'Dogs' });
    const cats = await store.create({ name: 'Cats', description: 'Feline breeds' });
    const empty = await store.create({ name: 'Birds', description: '' });
    expect(dogs).toEqual({ id: 1, name: 'Dogs' });
    expect('description' in dogs).toBe(false);
    expect(cats).toEqual({ id: 2, name: 'Cats', description: 'Feline breeds' });
    expect(empty).toEqual({ id: 3, name: 'Birds', description: '' });
    const listed = await store.list();
    expect(listed).toEqual([dogs, cats, empty]);
    expect('description' in listed[0]!).toBe(false);
    expect(await client.hgetall(keys.records)).toEqual({
      1: '{"name":"Dogs"}',
      2: '{"name":"Cats","description":"Feline breeds"}',
      3: '{"name":"Birds","description":""}',
    });
    expect(await client.get(keys.lastId)).toBe('3');
    expect(await client.pttl(keys.records)).toBe(-1); // data: never expires
  });

  it('refuses creates past maxCategories with storage_full and writes nothing', async () => {
    const { client, keys, store } = newStore({ maxCategories: 2 });
    await store.create({ name: 'a' });
    await store.create({ name: 'b' });
    const failures = await Promise.allSettled(Array.from({ length: 5 }, () => store.create({ name: 'overflow' })));
    for (const failure of failures) {
      expect(failure.status).toBe('rejected');
      const reason = (failure as PromiseRejectedResult).reason as unknown;
      expect(isPetstoreError(reason) && [reason.code, reason.status]).toEqual(['storage_full', 507]);
    }
    expect((await store.list()).map((category) => category.name)).toEqual(['a', 'b']);
    expect(await client.get(keys.lastId)).toBe('2'); // no id was burnt
    expect(await client.hlen(keys.records)).toBe(2);
  });

  it('gives out ids up to Number.MAX_SAFE_INTEGER and no further', async () => {
    const { client, keys, store } = newStore();
    await client.set(keys.lastId, String(Number.MAX_SAFE_INTEGER - 1));
    expect((await store.create({ name: 'last' })).id).toBe(Number.MAX_SAFE_INTEGER);
    const failure = await store.create({ name: 'one too many' }).catch((error: unknown) => error);
    expect(isPetstoreError(failure) && failure.code).toBe('storage_full');
    expect(await client.get(keys.lastId)).toBe(String(Number.MAX_SAFE_INTEGER));
    expect((await store.list()).map((category) => category.id)).toEqual([Number.MAX_SAFE_INTEGER]);
  });

  it('writes the category, the counter and the record with a TTL of retentionMs in one script call; a replay writes nothing', async () => {
    const { client, keys, store } = newStore();
    const request = idempotent('k1', 'body', 30_000);
    const before = await redisNowMs(client);
    const commands = await countCommands(client);
    const first = await store.createIdempotent({ name: 'Dogs', description: 'Canine' }, request);
    expect(commands.count).toBe(1);
    const after = await redisNowMs(client);
    expect(first).toEqual({ outcome: 'created', category: { id: 1, name: 'Dogs', description: 'Canine' } });
    const recordKey = keys.idempotency(request.key);
    expect(JSON.parse((await client.get(recordKey)) as string)).toEqual({
      fingerprint: request.fingerprint,
      id: 1,
      category: { name: 'Dogs', description: 'Canine' },
    });
    // PX retentionMs, from Redis's clock when the script ran (between `before` and `after`).
    const expiry = await expiresAtMs(client, recordKey);
    expect(expiry).toBeGreaterThanOrEqual(before + 30_000);
    expect(expiry).toBeLessThanOrEqual(after + 30_000);
    expect(await client.hgetall(keys.records)).toEqual({ 1: '{"name":"Dogs","description":"Canine"}' });

    // A replay and a mismatch: one call each, nothing written (the counter, the hash and the record's TTL stay).
    await client.pexpire(recordKey, 20_000);
    const sent = commands.count;
    expect(await store.createIdempotent({ name: 'Dogs', description: 'Canine' }, request)).toEqual({
      outcome: 'replayed',
      category: { id: 1, name: 'Dogs', description: 'Canine' },
    });
    expect(await store.createIdempotent({ name: 'Cats' }, idempotent('k1', 'other body', 30_000))).toEqual({ outcome: 'mismatch' });
    expect(commands.count - sent).toBe(2);
    expect(await client.pttl(recordKey)).toBeLessThanOrEqual(20_000);
    expect(await client.get(keys.lastId)).toBe('1');
    expect(await client.hlen(keys.records)).toBe(1);
  });

  it('keeps an id near 2^53 exact in the record (no rounding in Lua), and records nothing past the last id', async () => {
    const { client, keys, store } = newStore();
    await client.set(keys.lastId, String(Number.MAX_SAFE_INTEGER - 1));
    const first = await store.createIdempotent({ name: 'last' }, idempotent('last'));
    expect(first).toEqual({ outcome: 'created', category: { id: Number.MAX_SAFE_INTEGER, name: 'last' } });
    expect(await store.createIdempotent({ name: 'last' }, idempotent('last'))).toEqual({ outcome: 'replayed', category: { id: Number.MAX_SAFE_INTEGER, name: 'last' } });
    const failure = await store.createIdempotent({ name: 'too many' }, idempotent('too many')).catch((error: unknown) => error);
    expect(isPetstoreError(failure) && failure.code).toBe('storage_full');
    expect(await client.exists(keys.idempotency(idempotent('too many').key))).toBe(0);
  });

  it('records nothing when maxCategories are held', async () => {
    const { client, keys, store } = newStore({ maxCategories: 1 });
    await store.create({ name: 'a' });
    const failure = await store.createIdempotent({ name: 'b' }, idempotent('full')).catch((error: unknown) => error);
    expect(isPetstoreError(failure) && [failure.code, failure.status]).toEqual(['storage_full', 507]);
    expect(await client.exists(keys.idempotency(idempotent('full').key))).toBe(0);
    expect(await client.get(keys.lastId)).toBe('1');
  });

  it('fails only the call whose record key holds foreign data (WRONGTYPE, a plain Error), writing nothing', async () => {
    const { client, keys, store } = newStore();
    await client.hset(keys.idempotency(idempotent('foreign').key), 'some', 'hash');
    const failure = await store.createIdempotent({ name: 'Dogs' }, idempotent('foreign')).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(Error);
    expect(isPetstoreError(failure)).toBe(false);
    expect(String(((failure as Error).cause as Error).message)).toMatch(/WRONGTYPE/);
    expect(await client.exists(keys.lastId)).toBe(0);
    expect(await store.createIdempotent({ name: 'Dogs' }, idempotent('other'))).toEqual({ outcome: 'created', category: { id: 1, name: 'Dogs' } });
    expect(await store.create({ name: 'Cats' })).toEqual({ id: 2, name: 'Cats' });
  });

  it('answers a plain Error for a record it did not write, and refuses a retentionMs that is not whole before sending', async () => {
    const { client, keys, store } = newStore();
    await client.set(keys.idempotency(idempotent('odd').key), '{"fingerprint":1}');
    const failure = await store.createIdempotent({ name: 'Dogs' }, idempotent('odd')).catch((error: unknown) => error);
    expect(isPetstoreError(failure)).toBe(false);
    expect((failure as Error).message).toMatch(/not a record of this store/);
    const commands = await countCommands(client);
    for (const retentionMs of [0, 1.5, Number.NaN]) {
      await expect(store.createIdempotent({ name: 'Dogs' }, idempotent('bad', 'body', retentionMs))).rejects.toThrow(TypeError);
    }
    expect(commands.count).toBe(0);
  });

  it('answers a plain Error (500), not service_unavailable, when its keys hold foreign data', async () => {
    const { client, keys, store } = newStore();
    await client.set(keys.records, 'not a hash');
    const failure = await store.list().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(Error);
    expect(isPetstoreError(failure)).toBe(false);
    expect(String(((failure as Error).cause as Error).message)).toMatch(/WRONGTYPE/);
  });
});

describe('redisCategoryStore when Redis fails', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('throws service_unavailable with Retry-After when Redis is unreachable', async () => {
    const client = track(new Redis({ port: await closedPort(), host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 0 }));
    const store = redisCategoryStore({ client, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    for (const call of [() => store.list(), () => store.create({ name: 'Dogs' }), () => store.createIdempotent({ name: 'Dogs' }, idempotent('down'))]) {
      const failure = await call().catch((error: unknown) => error);
      expect(isPetstoreError(failure) && [failure.code, failure.status, failure.retryAfterSeconds]).toEqual([
        'service_unavailable',
        503,
        5,
      ]);
      expect((failure as Error).message).toBe('The category store is unavailable; retry later.');
      expect((failure as Error).cause).toBeInstanceOf(Error);
    }
    // Every caller of a turn whose shared read failed gets the failure.
    const failures = await Promise.all([store.listVersion(), store.listVersion()].map((version) => version.catch((error: unknown) => error)));
    for (const failure of failures) expect(isPetstoreError(failure) && [failure.code, failure.status]).toEqual(['service_unavailable', 503]);
  });

  it.skipIf(!isRedisServerInstalled())('both stores fail at callTimeoutMs while the server does not answer', async () => {
    // A server of its own, stopped (SIGSTOP) so that it answers nothing, and continued before it is shut down. The
    // stores' deadlines run on fake timers: time moves only when the test advances it, while the sockets stay real.
    const server = await startRedisServer();
    const client = track(new Redis(server.url));
    const pid = await serverPid(client);
    try {
      const store = redisCategoryStore({ client, keyPrefix: uniquePrefix(), callTimeoutMs: 300 });
      const rateLimits = redisRateLimitStore({ client, keyPrefix: uniquePrefix(), callTimeoutMs: 300 });
      // The scripts loaded, the connection up, through a store with time to spare (a busy machine can take longer
      // than 300 ms for that); the 300 ms stores are used only while the server is stopped, on fake timers.
      await redisCategoryStore({ client, keyPrefix: uniquePrefix(), callTimeoutMs: GUARD_CALL_TIMEOUT_MS }).create({ name: 'before' });
      process.kill(pid, 'SIGSTOP');
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const settled = vi.fn();
      const calls = [
        store.create({ name: 'paused' }),
        store.list(),
        store.createIdempotent({ name: 'paused' }, idempotent('paused')),
        rateLimits.consume('key:paused', { windows: [{ name: 'minute', limit: 5, windowMs: 60_000 }], cost: 1, nowMs: 0, ban: undefined, banSubject: '' }),
      ].map((call) => call.then(() => expect.fail('expected the call to fail'), (error: unknown) => error).finally(settled));
      await new Promise((resolve) => setImmediate(resolve)); // the consume's batch goes out at the end of this turn
      await vi.advanceTimersByTimeAsync(299);
      expect(settled).not.toHaveBeenCalled();
      await vi.advanceTimersByTimeAsync(1);
      for (const failure of await Promise.all(calls)) {
        expect(isPetstoreError(failure) && [failure.code, failure.status, failure.retryAfterSeconds]).toEqual(['service_unavailable', 503, 5]);
        expect((failure as Error).cause).toMatchObject({ name: 'RedisTimeoutError', callTimeoutMs: 300 });
      }
    } finally {
      vi.useRealTimers();
      process.kill(pid, 'SIGCONT');
      await server.stop();
    }
  });
});

describe.skipIf(skipRedis)('redisCategoryStore list version reads', () => {
  it('answers the listVersion() calls of one turn with one MGET, and a call made after that read was sent with a new one', async () => {
    const { client, keyPrefix, store } = newStore();
    const other = redisCategoryStore({ client: connect(), keyPrefix });
    await store.create({ name: 'Dogs' });
    const commands = await countCommands(client);
    const versions = await Promise.all(Array.from({ length: 20 }, () => store.listVersion()));
    expect(commands.count).toBe(1);
    expect(new Set(versions).size).toBe(1);
    // The MGET of `sent` goes at the end of its turn; a call after that, before its reply, waits for one of its own.
    const sent = store.listVersion();
    await new Promise((resolve) => setImmediate(resolve));
    expect(commands.count).toBe(2);
    const later = store.listVersion();
    expect([await sent, await later]).toEqual([versions[0], versions[0]]);
    expect(commands.count).toBe(3);
    // A create through another client between two calls: the second call's read started after it.
    await other.create({ name: 'Cats' });
    expect(await store.listVersion()).not.toBe(versions[0]);
  });
});

describe.skipIf(!isRedisServerInstalled())('redisCategoryStore over a server restart', () => {
  it('never answers a list version again for another list after its keys were lost (FLUSHALL)', async () => {
    // A server of its own: FLUSHALL on the shared one would empty the other files' keys.
    const server = await startRedisServer();
    try {
      const client = track(new Redis(server.url));
      const store = redisCategoryStore({ client, callTimeoutMs: 5000 });
      expect(await store.listVersion()).toBe('0');
      await store.create({ name: 'Dogs' });
      await store.create({ name: 'Cats' });
      const before = await store.listVersion();
      await client.flushall();
      expect(await store.listVersion()).toBe('0'); // the empty list: the same answer as any empty store
      await store.create({ name: 'Lizards' });
      expect((await store.createIdempotent({ name: 'Snakes' }, idempotent('after-flush'))).outcome).toBe('created');
      expect((await store.list()).map((category) => category.name)).toEqual(['Lizards', 'Snakes']);
      const after = await store.listVersion();
      expect(after).not.toBe(before); // same counter (2), another list: another version
      expect(after.split('@')[0]).toBe(before.split('@')[0]);
      // A counter left by a release without the epoch gets one at its next create.
      await client.del(categoryRedisKeys().epoch);
      await store.create({ name: 'Frogs' });
      expect(await store.listVersion()).toMatch(/^3@\d+\.\d+$/);
    } finally {
      await server.stop();
      await rm(server.dir, { recursive: true, force: true });
    }
  });

  it('keeps categories and the id counter with appendOnly', async () => {
    const server = await startRedisServer({ appendOnly: true });
    try {
      const client = track(new Redis(server.url, { maxRetriesPerRequest: 5 }));
      const store = redisCategoryStore({ client, callTimeoutMs: 5000 });
      await store.create({ name: 'Dogs' });
      await store.create({ name: 'Cats', description: 'Feline breeds' });
      await server.restart();
      expect(await store.list()).toEqual([
        { id: 1, name: 'Dogs' },
        { id: 2, name: 'Cats', description: 'Feline breeds' },
      ]);
      expect((await store.create({ name: 'Birds' })).id).toBe(3);
    } finally {
      await server.stop();
      await rm(server.dir, { recursive: true, force: true });
    }
  });
});

/** The process id of the Redis server `client` is connected to (`INFO server`). */
async function serverPid(client: Redis): Promise<number> {
  const pid = Number(/^process_id:(\d+)/m.exec(await client.info('server'))?.[1]);
  expect(pid).toBeGreaterThan(0);
  return pid;
}
