/**
 * Both stores on a real 3-master Redis Cluster through an ioredis `Cluster` client: keys spread over every
 * master, the category keys share one slot for any prefix, and the stores keep their state while a slot
 * moves from one master to another (ASK during the move, MOVED after it).
 */
import { isPetstoreError, type ConsumeRequest } from '@petstore/core';
import { Cluster, Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { categoryRedisKeys, redisCategoryStore } from './category-store.js';
import { CONSUME_LUA } from './rate-limit-script.js';
import { redisRateLimitStore } from './rate-limit-store.js';
import { isRedisCliInstalled, startRedisCluster, type RedisClusterNode } from './testing/redis-cluster.js';
import { isRedisServerInstalled } from './testing/redis-server.js';
import { connectCluster, countCommands, redisCluster, skipCluster, GUARD_CALL_TIMEOUT_MS, track, uniquePrefix } from '../test-support/redis.js';

const minute = (limit: number, nowMs = 0): ConsumeRequest => ({
  windows: [{ name: 'minute', limit, windowMs: 60_000 }],
  cost: 1,
  nowMs,
  ban: undefined,
  banSubject: '',
});

/** A plain connection to one node, closed after the test. */
function nodeClient(node: RedisClusterNode): Redis {
  return track(new Redis({ host: node.host, port: node.port, maxRetriesPerRequest: 1 }));
}

/** Owner of every slot, as `host:port` per slot index, from CLUSTER SLOTS of `admin`. */
async function slotOwners(admin: Redis): Promise<string[]> {
  const ranges = (await admin.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number, string]]>;
  const owners: string[] = new Array<string>(16_384);
  for (const [start, end, [host, port]] of ranges) owners.fill(`${host}:${port}`, start, end + 1);
  return owners;
}

async function keySlot(admin: Redis, key: string): Promise<number> {
  return Number(await admin.call('CLUSTER', 'KEYSLOT', key));
}

/** One field of `INFO <section>` as a number (e.g. `errorstat_MOVED` → its `count`), 0 when absent. */
async function infoCount(node: Redis, section: string, field: string): Promise<number> {
  const match = new RegExp(`^${field}:(?:count=|calls=)?(\\d+)`, 'm').exec(await node.info(section));
  return match === null ? 0 : Number(match[1]);
}

/** The standard slot migration, in two steps: start it and move the keys (ASK phase), then finish it (MOVED). */
async function startSlotMove(slot: number, from: Redis, to: Redis, toNode: RedisClusterNode): Promise<void> {
  const fromId = (await from.call('CLUSTER', 'MYID')) as string;
  const toId = (await to.call('CLUSTER', 'MYID')) as string;
  await to.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', fromId);
  await from.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', toId);
  for (;;) {
    const keys = (await from.call('CLUSTER', 'GETKEYSINSLOT', slot, 100)) as string[];
    if (keys.length === 0) break;
    await from.call('MIGRATE', toNode.host, toNode.port, '', 0, 5000, 'KEYS', ...keys);
  }
}

async function finishSlotMove(slot: number, to: Redis, masters: Redis[]): Promise<void> {
  const toId = (await to.call('CLUSTER', 'MYID')) as string;
  await to.call('CLUSTER', 'SETSLOT', slot, 'NODE', toId); // the new owner first, then every other master
  for (const master of masters) if (master !== to) await master.call('CLUSTER', 'SETSLOT', slot, 'NODE', toId);
}

/** Every string over `{`, `}`, `a`, `:` up to 4 characters long (341 prefixes), the empty one included. */
function trickyPrefixes(): string[] {
  let level = [''];
  const all = [''];
  for (let length = 1; length <= 4; length++) {
    level = level.flatMap((prefix) => ['{', '}', 'a', ':'].map((char) => prefix + char));
    all.push(...level);
  }
  return all;
}

describe.skipIf(skipCluster)('the Redis stores on a 3-master Redis Cluster', () => {
  const nodes = redisCluster ?? [];

  it('spreads rate-limit keys over all three masters and counts each key exactly on every one', async () => {
    const client = connectCluster();
    const store = redisRateLimitStore({ client, keyPrefix: uniquePrefix('cluster'), time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    // Twenty keys share a hash tag, hence a slot; the others spread.
    const keys = Array.from({ length: 300 }, (_, i) => (i < 20 ? `key:{team}:${i}` : `key:${i}`));
    // Script calls, counted at the client: the consumes of one turn go out in one call per hash slot. (The
    // script is loaded on every master first: a fresh client's first calls may otherwise be answered NOSCRIPT
    // and sent again.)
    for (const node of nodes) await nodeClient(node).script('LOAD', CONSUME_LUA);
    const calls = await countCommands(client);
    // Three consumes per key with a limit of 2, all 900 in parallel: 2 admitted, 1 refused on every key.
    const results = await Promise.all(keys.flatMap((key) => [1, 2, 3].map(() => store.consume(key, minute(2)).then((result) => ({ key, result })))));
    for (const key of keys) {
      const mine = results.filter((entry) => entry.key === key).map((entry) => entry.result);
      expect(mine.filter((result) => result.allowed)).toHaveLength(2);
      expect(mine.filter((result) => !result.allowed && result.reason === 'rate_limited')).toHaveLength(1);
    }
    // Where the keys live: every master holds some, found by scanning each node for the store's keys.
    const held = await Promise.all(
      nodes.map(async (node) => {
        const found: string[] = [];
        for await (const batch of nodeClient(node).scanStream({ match: `${store.redisKey('')}*`, count: 1000 })) found.push(...(batch as string[]));
        return found.length;
      }),
    );
    expect(held).toHaveLength(3);
    for (const count of held) expect(count).toBeGreaterThan(0);
    expect(held.reduce((sum, count) => sum + count, 0)).toBe(300);
    // Slots as Redis computes them: one call per slot the keys fall in (the shared slot's 60 consumes fit in one).
    const admin = nodeClient(nodes[0]!);
    const slots = new Set(await Promise.all(keys.map((key) => keySlot(admin, store.redisKey(key)))));
    expect(slots.size).toBeLessThanOrEqual(281);
    expect(calls.count).toBe(slots.size);
  });

  it('serves parallel category creates from several Cluster clients with distinct ids', async () => {
    const keyPrefix = uniquePrefix('cluster');
    const stores = Array.from({ length: 3 }, () => redisCategoryStore({ client: connectCluster(), keyPrefix, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }));
    const created = await Promise.all(Array.from({ length: 60 }, (_, i) => stores[i % 3]!.create({ name: `c${i}` })));
    expect(created.map((category) => category.id).sort((a, b) => a - b)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    for (const store of stores) expect((await store.list()).map((category) => category.name)).toHaveLength(60);
  });

  it('puts every category key in one slot for any prefix, and refuses the one prefix that cannot (an empty "{}" tag)', async () => {
    const admin = nodeClient(nodes[0]!);
    const shared: string[] = [];
    const refused: string[] = [];
    const lazy = connectCluster({ lazyConnect: true });
    for (const prefix of [...trickyPrefixes(), 'petstore:', 'tenant:{eu}:', 'x}{y', '{{}}', '}{}']) {
      const keys = categoryRedisKeys(prefix);
      const recordsSlot = await keySlot(admin, keys.records);
      const sameSlot =
        recordsSlot === (await keySlot(admin, keys.lastId)) &&
        recordsSlot === (await keySlot(admin, keys.epoch)) &&
        recordsSlot === (await keySlot(admin, keys.idempotency('0a1b2c')));
      let accepted = true;
      try {
        redisCategoryStore({ client: lazy, keyPrefix: prefix });
      } catch (error) {
        expect(error).toBeInstanceOf(TypeError);
        accepted = false;
      }
      // The store takes exactly the prefixes whose keys share a slot.
      expect({ prefix, accepted }).toEqual({ prefix, accepted: sameSlot });
      (sameSlot ? shared : refused).push(prefix);
    }
    expect(refused).toContain('a{}');
    expect(refused.every((prefix) => /^[^{]*\{\}/.test(prefix))).toBe(true);
    expect(shared).toContain('tenant:{eu}:');
    // The client's own ioredis keyPrefix counts too; a plain Redis client takes any prefix.
    expect(() => redisCategoryStore({ client: connectCluster({ lazyConnect: true, keyPrefix: 'app{}' }), keyPrefix: 'x:' })).toThrow(TypeError);
    expect(() => redisCategoryStore({ client: track(new Redis({ lazyConnect: true })), keyPrefix: '{}' })).not.toThrow();
    // The tag: `{categories}` unless the prefix has its own.
    expect(await keySlot(admin, categoryRedisKeys('tenant:{eu}:').records)).toBe(await keySlot(admin, 'eu'));
    expect(await keySlot(admin, categoryRedisKeys().records)).toBe(await keySlot(admin, 'categories'));
  });

  it('creates idempotently through a Cluster client: one script call on the slot\'s master, the record beside the categories', async () => {
    const client = connectCluster();
    const plain = uniquePrefix('cluster');
    const keyPrefix = `${plain}{${plain}}:`;
    const store = redisCategoryStore({ client, keyPrefix, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const keys = categoryRedisKeys(keyPrefix);
    const request = { key: 'ab'.repeat(32), fingerprint: 'cd'.repeat(32), retentionMs: 60_000 };
    const admin = nodeClient(nodes[0]!);
    const slot = await keySlot(admin, keys.records);
    expect(await keySlot(admin, keys.idempotency(request.key))).toBe(slot);
    const calls = await countCommands(client);
    const results = await Promise.all(Array.from({ length: 20 }, () => store.createIdempotent({ name: 'Once' }, request)));
    expect(calls.count).toBe(20);
    expect(results.filter((result) => result.outcome === 'created')).toHaveLength(1);
    expect(results.filter((result) => result.outcome === 'replayed')).toHaveLength(19);
    expect(await store.list()).toEqual([{ id: 1, name: 'Once' }]);
    // The record lives on the slot's master, with its TTL.
    const owners = await slotOwners(admin);
    const owner = nodeClient(nodes.find((node) => `${node.host}:${node.port}` === owners[slot])!);
    const ttl = await owner.pttl(keys.idempotency(request.key));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });

  it('keeps counting a rate-limit key and serving categories while their slot moves to another master (ASK, then MOVED)', async () => {
    const client = connectCluster();
    const masters = nodes.map(nodeClient);
    // A tag of its own puts this store's rate-limit key and category keys in one slot that no other test uses.
    const plain = uniquePrefix('cluster');
    const keyPrefix = `${plain}{${plain}}:`;
    const rateLimits = redisRateLimitStore({ client, keyPrefix, time: 'request' });
    const categories = redisCategoryStore({ client, keyPrefix });
    const slot = await keySlot(masters[0]!, rateLimits.redisKey('key:moving'));
    expect(await keySlot(masters[0]!, categoryRedisKeys(keyPrefix).records)).toBe(slot);

    expect((await rateLimits.consume('key:moving', minute(5))).windows[0]!.used).toBe(1);
    await categories.create({ name: 'Dogs' });
    const owners = await slotOwners(masters[0]!);
    const fromIndex = nodes.findIndex((node) => `${node.host}:${node.port}` === owners[slot]);
    const toIndex = (fromIndex + 1) % nodes.length;
    const [from, to, toNode] = [masters[fromIndex]!, masters[toIndex]!, nodes[toIndex]!];

    // Step 1: the slot is migrating and its keys are already on the target: the source answers ASK.
    await startSlotMove(slot, from, to, toNode);
    const askingBefore = await infoCount(to, 'commandstats', 'cmdstat_asking');
    expect((await rateLimits.consume('key:moving', minute(5))).windows[0]!.used).toBe(2);
    await categories.create({ name: 'Cats' });
    expect((await categories.list()).map((category) => category.name)).toEqual(['Dogs', 'Cats']);
    expect(await infoCount(to, 'commandstats', 'cmdstat_asking')).toBeGreaterThan(askingBefore);

    // Step 2: the target owns the slot: the client's slot map is stale, the source answers MOVED.
    await finishSlotMove(slot, to, masters);
    const movedBefore = await infoCount(from, 'errorstats', 'errorstat_MOVED');
    expect((await rateLimits.consume('key:moving', minute(5))).windows[0]!.used).toBe(3);
    expect(await infoCount(from, 'errorstats', 'errorstat_MOVED')).toBeGreaterThan(movedBefore);
    expect(await categories.create({ name: 'Birds' })).toEqual({ id: 3, name: 'Birds' });
    expect((await categories.list()).map((category) => category.name)).toEqual(['Dogs', 'Cats', 'Birds']);
    // State lives on the new owner now, and only there.
    expect(await to.exists(rateLimits.redisKey('key:moving'))).toBe(1);
    expect(await from.call('CLUSTER', 'COUNTKEYSINSLOT', slot)).toBe(0);
    // Usage carries on to the limit: 2 more admitted, then refused.
    expect((await rateLimits.consume('key:moving', minute(5))).allowed).toBe(true);
    expect((await rateLimits.consume('key:moving', minute(5))).allowed).toBe(true);
    expect(await rateLimits.consume('key:moving', minute(5))).toMatchObject({ allowed: false, reason: 'rate_limited' });
  });
});

describe.skipIf(!isRedisServerInstalled() || !isRedisCliInstalled())('the Redis stores when a cluster slot has no master', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('reject with service_unavailable at callTimeoutMs while the slot is unserved, and serve again once it has a master', async () => {
    // A cluster of its own: an unserved slot takes the whole cluster down (cluster-require-full-coverage).
    const cluster = await startRedisCluster();
    try {
      const client = track(new Cluster([...cluster.nodes], { redisOptions: { maxRetriesPerRequest: 1 } }));
      const masters = cluster.nodes.map(nodeClient);
      const rateLimits = redisRateLimitStore({ client, callTimeoutMs: 300, time: 'request' });
      const categories = redisCategoryStore({ client, callTimeoutMs: 300 });
      // Before and after the outage through stores with time to spare on the same client (a new cluster connection
      // can take longer than 300 ms on a busy machine); the 300 ms stores are used on fake timers and to wait.
      const patientRateLimits = redisRateLimitStore({ client, callTimeoutMs: GUARD_CALL_TIMEOUT_MS, time: 'request' });
      await redisCategoryStore({ client, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }).create({ name: 'Dogs' });
      expect((await patientRateLimits.consume('key:a', minute(5))).allowed).toBe(true);
      const slot = await keySlot(masters[0]!, categoryRedisKeys().records);
      const owners = await slotOwners(masters[0]!);
      const owner = masters[cluster.nodes.findIndex((node) => `${node.host}:${node.port}` === owners[slot])]!;

      for (const master of masters) await master.call('CLUSTER', 'DELSLOTS', slot);
      // ioredis answers CLUSTERDOWN by retrying after a timer of its own (retryDelayOnClusterDown); the store's
      // deadline answers first. Both run on fake timers here, so no real time passes for the deadline.
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const settled = vi.fn();
      const calls = [categories.list(), categories.create({ name: 'Cats' }), rateLimits.consume('key:a', minute(5))].map((call) =>
        call.then(() => expect.fail('expected the call to fail'), (error: unknown) => error).finally(settled),
      );
      await new Promise((resolve) => setImmediate(resolve)); // the consume's batch goes out at the end of this turn
      await vi.advanceTimersByTimeAsync(299);
      expect(settled).not.toHaveBeenCalled();
      await vi.advanceTimersByTimeAsync(1);
      for (const failure of await Promise.all(calls)) {
        expect(isPetstoreError(failure) && [failure.code, failure.status]).toEqual(['service_unavailable', 503]);
      }
      vi.useRealTimers();

      await owner.call('CLUSTER', 'ADDSLOTS', slot);
      const ownerId = (await owner.call('CLUSTER', 'MYID')) as string;
      for (const master of masters) if (master !== owner) await master.call('CLUSTER', 'SETSLOT', slot, 'NODE', ownerId);
      // Waits for the slot to be served again (a real event), asking through the same stores.
      const deadline = Date.now() + 15_000;
      let listed: unknown = await categories.list().catch((error: unknown) => error);
      while (!Array.isArray(listed) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        listed = await categories.list().catch((error: unknown) => error);
      }
      // Nothing was lost. The create and the consume that timed out may still have been applied: ioredis
      // retries CLUSTERDOWN for a while after the store's deadline answered (as documented, "a create that
      // timed out may still be written later") — but never twice.
      expect([[{ id: 1, name: 'Dogs' }], [{ id: 1, name: 'Dogs' }, { id: 2, name: 'Cats' }]]).toContainEqual(listed);
      expect([2, 3]).toContain((await patientRateLimits.consume('key:a', minute(5))).windows[0]!.used);
    } finally {
      await cluster.stop();
    }
    // stop() ended every node.
    const probe = track(new Redis({ ...cluster.nodes[0]!, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null }));
    await expect(probe.ping()).rejects.toThrow();
  }, 60_000);
});
