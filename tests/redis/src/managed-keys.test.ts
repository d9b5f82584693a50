/**
 * Managed API keys on two app instances sharing one Redis: each instance has its own ioredis client, its own
 * `redisApiKeyRecordStore` and its own `managedApiKeys` (with its own lookup cache), and a petstore answering
 * with it. A revocation on one instance is obeyed by the other as soon as the other hears the notification
 * (waited for as an event, no sleeping); with its notification connection cut, the other instance is told so by
 * its store and checks keys at Redis until the connection is back.
 */
import { randomUUID } from 'node:crypto';
import { createPetstore, hashApiKey, managedApiKeys, type ApiKeyRecordStore, type ApiKeyRecordWatcher, type ManagedApiKeys, type Petstore } from '@petstore/core';
import { fakeClock } from '@petstore/core/testing';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import { redisApiKeyRecordStore } from '@petstore/storage-redis';
import { Redis, type RedisOptions } from 'ioredis';
import { afterEach, describe, expect, inject, it } from 'vitest';

const redisUrl = inject('redisUrl');
const TTL_MS = 30_000;

const opened: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of opened.splice(0).reverse()) await close();
});

/** A Redis client, closed after the test. */
function client(options: RedisOptions = {}): Redis {
  const redis = new Redis(redisUrl as string, { maxRetriesPerRequest: 1, ...options });
  redis.on('error', () => undefined);
  opened.push(async () => {
    await redis.quit().catch(() => redis.disconnect());
  });
  return redis;
}

/** What an instance's manager was told by its store, in order; `next()` waits for the next event. */
function heard() {
  const events: string[] = [];
  const waiting: Array<() => void> = [];
  let read = 0;
  return {
    events,
    push(event: string) {
      events.push(event);
      waiting.splice(0).forEach((wake) => wake());
    },
    async next(): Promise<string> {
      while (read >= events.length) await new Promise<void>((resolve) => waiting.push(resolve));
      return events[read++] as string;
    },
  };
}

/**
 * `store`, with its watch reporting to `events` what it tells the manager, after the manager was told: when
 * an event is seen, the manager has acted on it.
 */
function reporting(store: ApiKeyRecordStore, events: ReturnType<typeof heard>): ApiKeyRecordStore {
  return {
    create: (record) => store.create(record),
    findByDigest: (digest) => store.findByDigest(digest),
    findByKeyId: (keyId) => store.findByKeyId(keyId),
    list: (options) => store.list(options),
    update: (keyId, change) => store.update(keyId, change),
    watch: (listener: ApiKeyRecordWatcher) =>
      store.watch!({
        onChange(digests) {
          listener.onChange(digests);
          events.push(`change ${digests.map((digest) => Buffer.from(digest).toString('hex')).sort().join(',')}`);
        },
        onDisconnect(error) {
          listener.onDisconnect(error);
          events.push('disconnect');
        },
        onReconnect() {
          listener.onReconnect();
          events.push('reconnect');
        },
      }),
  };
}

interface AppInstance {
  keys: ManagedApiKeys;
  petstore: Petstore;
  /** What this instance's manager heard from its store. */
  heard: ReturnType<typeof heard>;
  /** `GET /categories` with `apiKey`: the status. */
  status(apiKey: string): Promise<number>;
}

/** One app instance: its own client (with `clientOptions`), record store, manager with `clock`, and petstore. */
async function instance(keyPrefix: string, clock: ReturnType<typeof fakeClock>, clientOptions: RedisOptions = {}): Promise<AppInstance> {
  const store = redisApiKeyRecordStore({ client: client(clientOptions), keyPrefix });
  const events = heard();
  const keys = managedApiKeys({ store: reporting(store, events), clock, cache: { ttlMs: TTL_MS } });
  opened.push(async () => {
    await keys.close();
    await store.close();
  });
  await keys.ready();
  const petstore = createPetstore({ apiKeys: keys, categories: memoryCategoryStore(), rateLimit: { store: memoryRateLimitStore() } });
  return {
    keys,
    petstore,
    heard: events,
    async status(apiKey) {
      const answer = await petstore.handle({ method: 'GET', path: '/categories', headers: { authorization: `Bearer ${apiKey}` }, clientAddress: '192.0.2.1' });
      return answer.status;
    },
  };
}

const hex = (key: string) => hashApiKey(key).toString('hex');

describe.skipIf(redisUrl === null)('managed API keys on two instances sharing one Redis', () => {
  it('obeys a revocation made on one instance on the other as soon as the other hears of it', async () => {
    const keyPrefix = `petstore-test:${randomUUID()}:`;
    const clock = fakeClock();
    const [first, second] = [await instance(keyPrefix, clock), await instance(keyPrefix, clock)];
    const issued = await first.keys.issue({ accountId: 'acct_two', plan: 'pro' });
    expect(await second.heard.next()).toBe(`change ${hex(issued.key)}`);
    // Both instances accept the key; the second now holds it in its cache.
    expect(await first.status(issued.key)).toBe(200);
    expect(await second.status(issued.key)).toBe(200);
    expect(await second.keys.findPrincipal(hashApiKey(issued.key))).toMatchObject({ keyId: issued.keyId, accountId: 'acct_two', plan: 'pro' });

    await first.keys.revoke(issued.keyId);
    expect(await first.status(issued.key)).toBe(401);
    // No time passes on the clock: the second instance refuses the key because it heard of the revocation.
    expect(await second.heard.next()).toBe(`change ${hex(issued.key)}`);
    expect(await second.keys.findPrincipal(hashApiKey(issued.key))).toBeUndefined();
    expect(await second.status(issued.key)).toBe(401);

    // A rotation likewise: the new key works on the second instance at once, the old one through its grace.
    const other = await first.keys.issue({ accountId: 'acct_two', plan: 'free' });
    expect(await second.heard.next()).toBe(`change ${hex(other.key)}`);
    expect(await second.status(other.key)).toBe(200);
    const rotated = await first.keys.rotate(other.keyId, { graceMs: 0 });
    expect(await second.heard.next()).toBe(`change ${[hex(other.key), hex(rotated.key)].sort().join(',')}`);
    expect(await second.status(rotated.key)).toBe(200);
    expect(await second.status(other.key)).toBe(401);
  });

  it('with its notification connection cut, is told so, obeys a revocation at once by asking Redis, and hears changes once reconnected', async () => {
    // The second instance logs in as a user of its own. Disabling the user keeps its open connections working but
    // refuses new logins: its cut subscriber stays away until the test enables the user again, so the changes
    // made meanwhile are certainly lost to it.
    const admin = client();
    const user = `managed-keys-${randomUUID()}`;
    await admin.call('ACL', 'SETUSER', user, 'on', '>secret', '~*', '&*', '+@all');
    opened.push(async () => {
      await admin.call('ACL', 'DELUSER', user);
    });
    const keyPrefix = `petstore-test:${randomUUID()}:`;
    const clock = fakeClock();
    const connectionName = `second-${randomUUID()}`;
    const first = await instance(keyPrefix, clock);
    const second = await instance(keyPrefix, clock, { username: user, password: 'secret', connectionName });
    const revoked = await first.keys.issue({ accountId: 'acct_cut', plan: 'pro' });
    expect(await second.heard.next()).toBe(`change ${hex(revoked.key)}`);
    const changed = await first.keys.issue({ accountId: 'acct_cut', plan: 'free' });
    expect(await second.heard.next()).toBe(`change ${hex(changed.key)}`);
    expect(await second.status(revoked.key)).toBe(200);

    // Cut the second instance's subscriber (its own connection name, TYPE pubsub), while it cannot log in again.
    const subscribers = ((await admin.call('CLIENT', 'LIST', 'TYPE', 'pubsub')) as string)
      .split('\n')
      .filter((line) => line.includes(` name=${connectionName} `))
      .map((line) => /^id=(\d+)/.exec(line)?.[1] as string);
    expect(subscribers).toHaveLength(1);
    await admin.call('ACL', 'SETUSER', user, 'off');
    await admin.call('CLIENT', 'KILL', 'ID', subscribers[0] as string);
    // The store tells the manager that its notification path broke.
    expect(await second.heard.next()).toBe('disconnect');

    await first.keys.revoke(revoked.keyId);
    expect(await first.status(revoked.key)).toBe(401);
    // The second instance missed the notification, but while its watch is broken it checks cached keys at Redis
    // (its own client is still logged in): the revocation holds at once, no cache TTL passing.
    expect(await second.status(revoked.key)).toBe(401);
    await first.keys.update(changed.keyId, { plan: 'business' });
    expect((await second.keys.findPrincipal(hashApiKey(changed.key)))?.plan).toBe('business');
    await admin.call('ACL', 'SETUSER', user, 'on');
    // The next thing it hears is the reconnection: the revocation and the update were lost to it.
    expect(await second.heard.next()).toBe('reconnect');
    // And it hears changes again.
    await first.keys.revoke(changed.keyId);
    expect(await second.heard.next()).toBe(`change ${hex(changed.key)}`);
    expect(await second.status(changed.key)).toBe(401);
  });
});
