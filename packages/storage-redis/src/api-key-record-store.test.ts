/**
 * The API-key record store on one Redis server: layout, atomicity, the rules of the record contract, paging,
 * notifications to other instances (also after the subscriber connection was cut) and failures.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { isPetstoreError, type ApiKeyRecord, type ApiKeyRecordWatcher } from '@petstore/core';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { apiKeyRedisKeys, redisApiKeyRecordStore, type RedisApiKeyRecordStore } from './api-key-record-store.js';
import { digestsOfMessage, WATCH_HEARTBEAT_INTERVAL_MS, WATCH_HEARTBEAT_TIMEOUT_MS } from './api-key-watch.js';
import { closedPort, connect, countCommands, freezableProxy, GUARD_CALL_TIMEOUT_MS, skipRedis, track, uniquePrefix } from '../test-support/redis.js';

/** A SHA-256 digest made of `label` (the store never sees keys, only digests like this one). */
const digest = (label: string) => new Uint8Array(createHash('sha256').update(label).digest());
const hexOf = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');

let keyIds = 0;
/** A record with every required field; `keyId` unique in the run unless given. */
function record(overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  keyIds += 1;
  const keyId = overrides.keyId ?? `key_${String(keyIds).padStart(6, '0')}${randomUUID().slice(0, 8)}`;
  return { keyId, accountId: 'acct_1', plan: 'free', createdAtMs: 1_000, updatedAtMs: 1_000, digest: digest(keyId), ...overrides };
}

function newStore(options: { keyPrefix?: string; maxRecords?: number; client?: Redis } = {}) {
  const client = options.client ?? connect();
  const keyPrefix = options.keyPrefix ?? uniquePrefix();
  return { client, keyPrefix, keys: apiKeyRedisKeys(keyPrefix), store: redisApiKeyRecordStore({ client, keyPrefix, maxRecords: options.maxRecords }) };
}

/** What a watcher heard, in order (the errors of `onDisconnect` apart); `next()` waits for the next event (a real one: no timer). */
function recorder() {
  const events: Array<{ kind: 'change'; digests: string[] } | { kind: 'disconnect' } | { kind: 'reconnect' }> = [];
  const errors: Error[] = [];
  const waiting: Array<() => void> = [];
  let read = 0;
  const push = (event: (typeof events)[number]) => {
    events.push(event);
    waiting.splice(0).forEach((wake) => wake());
  };
  const listener: ApiKeyRecordWatcher = {
    onChange: (digests) => push({ kind: 'change', digests: digests.map(hexOf).sort() }),
    onDisconnect: (error) => {
      errors.push(error);
      push({ kind: 'disconnect' });
    },
    onReconnect: () => push({ kind: 'reconnect' }),
  };
  return {
    listener,
    events,
    errors,
    async next() {
      while (read >= events.length) await new Promise<void>((resolve) => waiting.push(resolve));
      return events[read++]!;
    },
  };
}

/** Waits until Redis's ACL log counts `count` refusals of a channel to `user` (polled: the log is the only witness). */
async function untilChannelRefused(admin: Redis, user: string, count: number): Promise<void> {
  for (;;) {
    const entries = (await admin.call('ACL', 'LOG')) as string[][];
    let refused = 0;
    for (const entry of entries) {
      const fields = new Map<string, unknown>();
      for (let i = 0; i < entry.length; i += 2) fields.set(entry[i] as string, entry[i + 1]);
      if (fields.get('username') === user && fields.get('reason') === 'channel') refused += Number(fields.get('count'));
    }
    if (refused >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The client id of the subscriber connection named `name` (the duplicate carries its client's connectionName). */
async function subscriberIds(admin: Redis, name: string): Promise<string[]> {
  const list = (await admin.call('CLIENT', 'LIST', 'TYPE', 'pubsub')) as string;
  return list
    .split('\n')
    .filter((line) => line.includes(` name=${name} `))
    .map((line) => /^id=(\d+)/.exec(line)![1]!);
}

describe('apiKeyRedisKeys', () => {
  it('names every key with the {apikeys} hash tag after the prefix, and the channel without it', () => {
    const keys = apiKeyRedisKeys();
    expect(keys.record('key_a')).toBe('petstore:{apikeys}:record:key_a');
    expect(keys.digest(new Uint8Array(32).fill(0xab))).toBe(`petstore:{apikeys}:digest:${'ab'.repeat(32)}`);
    expect(keys.account('acct_1')).toBe('petstore:{apikeys}:account:acct_1');
    expect(keys.all).toBe('petstore:{apikeys}:all');
    expect(keys.channel).toBe('petstore:apikeys');
    expect(apiKeyRedisKeys('shop:{eu}:').all).toBe('shop:{eu}:{apikeys}:all');
  });

  it('reads a change message as its digests and skips anything that is not one', () => {
    const a = digest('a');
    expect(digestsOfMessage(`${hexOf(a)},nonsense,${'AB'.repeat(32)}`)).toEqual([a]);
    expect(digestsOfMessage('')).toEqual([]);
  });
});

describe('redisApiKeyRecordStore options', () => {
  it('refuses malformed options with a TypeError naming them', () => {
    const client = track(new Redis({ lazyConnect: true }));
    expect(() => redisApiKeyRecordStore({ client, callTimeoutMs: 0 })).toThrow(/callTimeoutMs/);
    expect(() => redisApiKeyRecordStore({ client, maxRecords: 1.5 })).toThrow(/maxRecords/);
    expect(() => redisApiKeyRecordStore({ client, keyPrefix: 1 as unknown as string })).toThrow(/keyPrefix/);
  });
});

describe.skipIf(skipRedis)('redisApiKeyRecordStore against Redis', () => {
  it('keeps a record as a hash of readable fields, indexed by digest, account and keyId; round-trips it exactly', async () => {
    const { client, keys, store } = newStore();
    const full = record({
      accountId: '__proto__',
      plan: 'enterprise',
      limits: { requestsPerMinute: 5000, requestsPerDay: 0 },
      name: 'Ünïcödé "quoted" \'name\' 🐾 \\ , ;',
      createdAtMs: 1_700_000_000_000,
      updatedAtMs: 1_700_000_000_001,
      expiresAtMs: 9_007_199_254_740_991,
      revokedAtMs: 1_700_000_000_002,
      previousDigest: digest('older'),
      previousValidUntilMs: 1_700_000_086_400,
    });
    const bare = record({ accountId: 'constructor' });
    await store.create(full);
    await store.create(bare);
    expect(await store.findByKeyId(full.keyId)).toEqual(full);
    expect(await store.findByDigest(full.digest)).toEqual(full);
    expect(await store.findByDigest(full.previousDigest!)).toEqual(full);
    const found = await store.findByKeyId(bare.keyId);
    expect(found).toEqual(bare);
    expect(Object.keys(found!).sort()).toEqual(['accountId', 'createdAtMs', 'digest', 'keyId', 'plan', 'updatedAtMs']);
    expect(found!.digest).toBeInstanceOf(Uint8Array);
    // No prototype was touched by the account ids.
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(found)).toBe(Object.prototype);
    expect((await store.list({ accountId: '__proto__' })).records).toEqual([full]);
    expect((await store.list({ accountId: 'constructor' })).records).toEqual([bare]);
    // The layout, as documented.
    expect(await client.hgetall(keys.record(bare.keyId))).toEqual({
      accountId: 'constructor',
      plan: 'free',
      createdAtMs: '1000',
      updatedAtMs: '1000',
      digest: hexOf(bare.digest),
    });
    expect(await client.get(keys.digest(full.digest))).toBe(full.keyId);
    expect(await client.get(keys.digest(full.previousDigest!))).toBe(full.keyId);
    expect(await client.zrange(keys.account('__proto__'), 0, -1)).toEqual([full.keyId]);
    expect((await client.zrange(keys.all, 0, -1)).sort()).toEqual([full.keyId, bare.keyId].sort());
    // Nothing expires: records are data.
    expect(await client.pttl(keys.record(full.keyId))).toBe(-1);
    expect(await store.findByDigest(digest('unknown'))).toBeUndefined();
    expect(await store.findByKeyId('key_unknown')).toBeUndefined();
  });

  it('refuses a second record with a keyId or a digest that exists, and writes nothing', async () => {
    const { client, keyPrefix, store } = newStore();
    const first = record({ previousDigest: digest('first-previous'), previousValidUntilMs: 5_000 });
    await store.create(first);
    const stored = async () => (await client.keys(`${keyPrefix}*`)).sort();
    const before = await stored();
    const conflicts = [
      record({ keyId: first.keyId }),
      record({ digest: first.digest }),
      record({ digest: first.previousDigest }),
      record({ previousDigest: first.digest, previousValidUntilMs: 5_000 }),
    ];
    for (const duplicate of conflicts) {
      const failure = await store.create(duplicate).catch((error: unknown) => error);
      expect(isPetstoreError(failure) && failure.code).toBe('internal_error');
    }
    expect(await stored()).toEqual(before);
  });

  it('refuses a create past maxRecords with storage_full, and writes nothing', async () => {
    const { client, keyPrefix, store } = newStore({ maxRecords: 2 });
    await store.create(record());
    await store.create(record());
    const before = (await client.keys(`${keyPrefix}*`)).length;
    const failure = await store.create(record()).catch((error: unknown) => error);
    expect(isPetstoreError(failure) && [failure.code, failure.status]).toEqual(['storage_full', 507]);
    expect((await client.keys(`${keyPrefix}*`)).length).toBe(before);
  });

  it('updates plan, limits and name, clears them with null, and leaves absent fields alone', async () => {
    const { store } = newStore();
    const key = record({ limits: { requestsPerMinute: 1, requestsPerDay: 2 }, name: 'old' });
    await store.create(key);
    expect(await store.update(key.keyId, { kind: 'update', nowMs: 2_000, plan: 'pro' })).toEqual({ ...key, plan: 'pro', updatedAtMs: 2_000 });
    expect(await store.update(key.keyId, { kind: 'update', nowMs: 3_000, limits: { requestsPerMinute: 7, requestsPerDay: 8 }, name: 'new' })).toEqual({
      ...key,
      plan: 'pro',
      limits: { requestsPerMinute: 7, requestsPerDay: 8 },
      name: 'new',
      updatedAtMs: 3_000,
    });
    const cleared = await store.update(key.keyId, { kind: 'update', nowMs: 4_000, limits: null, name: null });
    expect(cleared).toEqual({ ...key, plan: 'pro', limits: undefined, name: undefined, updatedAtMs: 4_000 });
    expect(cleared).not.toHaveProperty('limits');
    expect(cleared).not.toHaveProperty('name');
    expect(await store.findByKeyId(key.keyId)).toEqual(cleared);
    expect(await store.update('key_missing', { kind: 'update', nowMs: 1, plan: 'pro' })).toBeUndefined();
    expect(await store.update('key_missing', { kind: 'revoke', nowMs: 1 })).toBeUndefined();
  });

  it('rotates: both digests find the record, a second rotation drops the older previous digest and its index entry', async () => {
    const { client, keys, store } = newStore();
    const key = record();
    await store.create(key);
    const second = digest(`${key.keyId}-2`);
    const rotated = await store.update(key.keyId, { kind: 'rotate', nowMs: 2_000, digest: second, previousValidUntilMs: 90_000 });
    expect(rotated).toEqual({ ...key, digest: second, previousDigest: key.digest, previousValidUntilMs: 90_000, updatedAtMs: 2_000 });
    expect(await store.findByDigest(key.digest)).toEqual(rotated);
    expect(await store.findByDigest(second)).toEqual(rotated);

    const third = digest(`${key.keyId}-3`);
    const again = await store.update(key.keyId, { kind: 'rotate', nowMs: 3_000, digest: third, previousValidUntilMs: 95_000 });
    expect(again).toMatchObject({ digest: third, previousDigest: second, previousValidUntilMs: 95_000 });
    expect(await store.findByDigest(key.digest)).toBeUndefined();
    expect(await client.exists(keys.digest(key.digest))).toBe(0);
    expect(await store.findByDigest(second)).toEqual(again);

    // A new digest that is indexed already (here: the record's own previous one) is refused; nothing changes.
    const failure = await store.update(key.keyId, { kind: 'rotate', nowMs: 4_000, digest: second, previousValidUntilMs: 1 }).catch((error: unknown) => error);
    expect(isPetstoreError(failure) && failure.code).toBe('internal_error');
    expect(await store.findByKeyId(key.keyId)).toEqual(again);
  });

  it('revokes once: keeps the first time, drops the previous digest, and leaves update and rotate without effect', async () => {
    const { client, keys, store } = newStore();
    const key = record();
    await store.create(key);
    const next = digest(`${key.keyId}-next`);
    await store.update(key.keyId, { kind: 'rotate', nowMs: 2_000, digest: next, previousValidUntilMs: 90_000 });
    const revoked = await store.update(key.keyId, { kind: 'revoke', nowMs: 3_000 });
    expect(revoked).toEqual({ ...key, digest: next, revokedAtMs: 3_000, updatedAtMs: 3_000 });
    expect(await client.exists(keys.digest(key.digest))).toBe(0);
    expect(await store.findByDigest(next)).toEqual(revoked);
    expect(await store.update(key.keyId, { kind: 'revoke', nowMs: 4_000 })).toEqual(revoked);
    expect(await store.update(key.keyId, { kind: 'update', nowMs: 5_000, plan: 'business', name: 'x' })).toEqual(revoked);
    expect(await store.update(key.keyId, { kind: 'rotate', nowMs: 6_000, digest: digest('later'), previousValidUntilMs: 9 })).toEqual(revoked);
    expect(await client.exists(keys.digest(digest('later')))).toBe(0);
    expect(await store.findByKeyId(key.keyId)).toEqual(revoked);
  });

  it('applies 50 parallel rotations from 5 clients one after another: every previous digest is exactly one other rotation\'s', async () => {
    const keyPrefix = uniquePrefix();
    const stores = Array.from({ length: 5 }, () => newStore({ keyPrefix }).store);
    const key = record();
    await stores[0]!.create(key);
    const digests = Array.from({ length: 50 }, (_, i) => digest(`${key.keyId}-rotation-${i}`));
    const results = await Promise.all(
      digests.map((next, i) => stores[i % 5]!.update(key.keyId, { kind: 'rotate', nowMs: 2_000 + i, digest: next, previousValidUntilMs: 10_000 })),
    );
    // Chain: each rotation's previous digest is the digest that was current just before it; following the chain
    // from the original digest visits every rotation exactly once.
    const byPrevious = new Map(results.map((result) => [hexOf(result!.previousDigest!), hexOf(result!.digest)]));
    expect(byPrevious.size).toBe(50);
    let current = hexOf(key.digest);
    const visited: string[] = [];
    while (byPrevious.has(current)) {
      current = byPrevious.get(current)!;
      visited.push(current);
    }
    expect(visited.sort()).toEqual(digests.map(hexOf).sort());
    const final = await stores[0]!.findByKeyId(key.keyId);
    expect(hexOf(final!.digest)).toBe(current);
    // Only the current and the one previous digest stay indexed.
    const found = await Promise.all([key.digest, ...digests].map((each) => stores[1]!.findByDigest(each)));
    expect(found.filter((each) => each !== undefined)).toHaveLength(2);
  });

  it('lets a revocation win over parallel updates from other clients', async () => {
    const keyPrefix = uniquePrefix();
    const stores = Array.from({ length: 4 }, () => newStore({ keyPrefix }).store);
    const key = record();
    await stores[0]!.create(key);
    const results = await Promise.all([
      stores[3]!.update(key.keyId, { kind: 'revoke', nowMs: 5_000 }),
      ...Array.from({ length: 40 }, (_, i) =>
        stores[i % 4]!.update(key.keyId, { kind: 'update', nowMs: 6_000 + i, ...(i % 2 ? { plan: 'pro' as const } : { name: `n${i}` }) }),
      ),
    ]);
    // Whatever ran before it, the record is from then on exactly what the revocation answered: the updates
    // after it changed nothing (and answered that record too).
    const revoked = results[0]!;
    expect(revoked).toMatchObject({ revokedAtMs: 5_000, updatedAtMs: 5_000 });
    expect(await stores[0]!.findByKeyId(key.keyId)).toEqual(revoked);
    const afterRevoke = results.slice(1).filter((result) => result!.revokedAtMs !== undefined);
    for (const result of afterRevoke) expect(result).toEqual(revoked);
    // The rest ran before it, on a record not yet revoked.
    const beforeRevoke = results.slice(1).filter((result) => result!.revokedAtMs === undefined);
    expect(beforeRevoke.length + afterRevoke.length).toBe(40);
  });

  it('lists in keyId order, a page at a time, per account or all, with next absent at the end', async () => {
    const { store } = newStore();
    const ids = Array.from({ length: 25 }, (_, i) => `key_${String.fromCharCode(65 + (i % 26))}${String(i).padStart(3, '0')}`);
    const shuffled = [...ids].sort(() => 0.5 - Math.random());
    await Promise.all(shuffled.map((keyId, i) => store.create(record({ keyId, accountId: i % 2 ? 'odd' : 'even' }))));
    const sorted = [...ids].sort();
    const pages: string[][] = [];
    let after: string | undefined;
    for (;;) {
      const page = await store.list({ limit: 10, ...(after === undefined ? {} : { after }) });
      pages.push(page.records.map((each) => each.keyId));
      if (page.next === undefined) break;
      expect(page.next).toBe(page.records.at(-1)!.keyId);
      after = page.next;
    }
    expect(pages.map((page) => page.length)).toEqual([10, 10, 5]);
    expect(pages.flat()).toEqual(sorted);
    // Exactly a full last page: no next, and no empty page after it.
    const evens = await store.list({ accountId: 'even', limit: 13 });
    expect(evens.records).toHaveLength(13);
    expect(evens.next).toBeUndefined();
    expect(evens.records.every((each) => each.accountId === 'even')).toBe(true);
    expect(evens.records.map((each) => each.keyId)).toEqual([...evens.records.map((each) => each.keyId)].sort());
    expect((await store.list()).records).toHaveLength(25);
    expect(await store.list({ accountId: 'nobody' })).toEqual({ records: [] });
    expect(await store.list({ after: sorted.at(-1)! })).toEqual({ records: [] });
    for (const limit of [0, 1001, 1.5]) await expect(store.list({ limit })).rejects.toThrow(TypeError);
    expect((await store.list({ limit: 1000 })).records).toHaveLength(25);
  });

  it('answers each call with one Redis command', async () => {
    const { client, store } = newStore();
    const key = record();
    await store.create(key); // the scripts are loaded
    await store.findByDigest(key.digest);
    await store.list();
    await store.update(key.keyId, { kind: 'update', nowMs: 2_000, name: 'warm' });
    const commands = await countCommands(client);
    await store.findByDigest(key.digest);
    expect(commands.count).toBe(1);
    await store.findByDigest(digest('unknown'));
    await store.findByKeyId(key.keyId);
    await store.list({ limit: 1000 });
    await store.update(key.keyId, { kind: 'update', nowMs: 3_000, plan: 'pro' });
    await store.create(record());
    expect(commands.count).toBe(6);
  });

  it('tells a watcher of another instance every change, with the digests it touched', async () => {
    const keyPrefix = uniquePrefix();
    const writer = newStore({ keyPrefix }).store;
    const reader = newStore({ keyPrefix }).store;
    const heard = recorder();
    const watch = await reader.watch(heard.listener);
    const key = record();
    await writer.create(key);
    expect(await heard.next()).toEqual({ kind: 'change', digests: [hexOf(key.digest)] });
    await writer.update(key.keyId, { kind: 'update', nowMs: 2_000, plan: 'pro' });
    expect(await heard.next()).toEqual({ kind: 'change', digests: [hexOf(key.digest)] });
    const second = digest('second');
    await writer.update(key.keyId, { kind: 'rotate', nowMs: 3_000, digest: second, previousValidUntilMs: 9_000 });
    expect(await heard.next()).toEqual({ kind: 'change', digests: [hexOf(key.digest), hexOf(second)].sort() });
    const third = digest('third');
    await writer.update(key.keyId, { kind: 'rotate', nowMs: 4_000, digest: third, previousValidUntilMs: 9_000 });
    expect(await heard.next()).toEqual({ kind: 'change', digests: [hexOf(key.digest), hexOf(second), hexOf(third)].sort() });
    await writer.update(key.keyId, { kind: 'revoke', nowMs: 5_000 });
    expect(await heard.next()).toEqual({ kind: 'change', digests: [hexOf(second), hexOf(third)].sort() });
    // A change that changes nothing (a revoked record) publishes nothing: the next message is the next create.
    await writer.update(key.keyId, { kind: 'update', nowMs: 6_000, plan: 'business' });
    const other = record();
    await writer.create(other);
    expect(await heard.next()).toEqual({ kind: 'change', digests: [hexOf(other.digest)] });
    await watch.close();
  });

  it('keeps stores of other prefixes (client-level ioredis keyPrefix included) off its channel', async () => {
    const keyPrefix = uniquePrefix();
    const reader = newStore({ keyPrefix }).store;
    const heard = recorder();
    await reader.watch(heard.listener);
    // Same store prefix behind another client-level prefix: other keys, other channel.
    const elsewhere = redisApiKeyRecordStore({ client: connect({ keyPrefix: `${keyPrefix}other:` }), keyPrefix, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    await elsewhere.create(record({ keyId: 'key_elsewhere' }));
    const mine = record();
    await newStore({ keyPrefix }).store.create(mine);
    expect(await heard.next()).toEqual({ kind: 'change', digests: [hexOf(mine.digest)] });
    expect(heard.events).toHaveLength(1);
  });

  it('tells onReconnect after its connection was cut and could not come back at once, then hears changes again', async () => {
    // The reader's connections log in as a user of their own. Disabling it keeps the open connections working but
    // refuses new logins: cutting the subscriber then keeps it away until the test enables the user again, so the
    // revocation made meanwhile is certainly lost — a real break, without waiting for any time.
    const admin = connect();
    const user = `apikeys-${randomUUID()}`;
    await admin.call('ACL', 'SETUSER', user, 'on', '>secret', '~*', '&*', '+@all');
    try {
      const keyPrefix = uniquePrefix();
      const name = `reader-${randomUUID()}`;
      const readerClient = connect({ username: user, password: 'secret', connectionName: name });
      const reader = newStore({ keyPrefix, client: readerClient }).store;
      const writer = newStore({ keyPrefix }).store;
      const heard = recorder();
      await reader.watch(heard.listener);
      const key = record();
      await writer.create(key);
      expect(await heard.next()).toEqual({ kind: 'change', digests: [hexOf(key.digest)] });

      const [subscriber] = await subscriberIds(admin, name);
      expect(subscriber).toBeDefined();
      await admin.call('ACL', 'SETUSER', user, 'off');
      await admin.call('CLIENT', 'KILL', 'ID', subscriber!);
      expect(await heard.next()).toEqual({ kind: 'disconnect' });
      expect(heard.errors[0]?.message).toMatch(/subscriber connection closed/);
      await writer.update(key.keyId, { kind: 'revoke', nowMs: 2_000 }); // published while nobody listens
      // The reader's own client stays logged in and reads the truth.
      expect(await reader.findByDigest(key.digest)).toMatchObject({ revokedAtMs: 2_000 });
      await admin.call('ACL', 'SETUSER', user, 'on');
      expect(await heard.next()).toEqual({ kind: 'reconnect' });
      const next = record();
      await writer.create(next);
      expect(await heard.next()).toEqual({ kind: 'change', digests: [hexOf(next.digest)] });
      // The lost revocation was never delivered; the break was told once, however often the login was refused.
      expect(heard.events.filter((event) => event.kind === 'change')).toHaveLength(2);
      expect(heard.events.filter((event) => event.kind === 'disconnect')).toHaveLength(1);
      expect(await subscriberIds(admin, name)).toHaveLength(1);
    } finally {
      await admin.call('ACL', 'DELUSER', user);
    }
  });

  it('keeps the process up when Redis refuses the subscription again after an ACL change: onDisconnect, retries, onReconnect once allowed', async () => {
    // A user of its own: taking its channels away disturbs no other test on this server.
    const admin = connect();
    const user = `apikeys-${randomUUID()}`;
    await admin.call('ACL', 'SETUSER', user, 'on', '>secret', '~*', '&*', '+@all');
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const keyPrefix = uniquePrefix();
      const name = `refused-${randomUUID()}`;
      const reader = newStore({ keyPrefix, client: connect({ username: user, password: 'secret', connectionName: name }) }).store;
      const writer = newStore({ keyPrefix }).store;
      const heard = recorder();
      const watch = await reader.watch(heard.listener);
      const [subscriber] = await subscriberIds(admin, name);
      expect(subscriber).toBeDefined();
      await admin.call('ACL', 'SETUSER', user, 'resetchannels');
      // Redis 7 drops a subscriber whose channels were taken away; the kill makes sure of it (0 if it was dropped).
      await admin.call('CLIENT', 'KILL', 'ID', subscriber!);
      expect(await heard.next()).toEqual({ kind: 'disconnect' });
      // The subscriber reconnects and its SUBSCRIBE is refused (NOPERM); it is asked again after backoff.
      await untilChannelRefused(admin, user, 1);
      await admin.call('ACL', 'SETUSER', user, 'allchannels');
      expect(await heard.next()).toEqual({ kind: 'reconnect' });
      const key = record();
      await writer.create(key);
      expect(await heard.next()).toEqual({ kind: 'change', digests: [hexOf(key.digest)] });
      expect(heard.events.map((event) => event.kind)).toEqual(['disconnect', 'reconnect', 'change']);
      await watch.close();
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await admin.call('ACL', 'DELUSER', user);
    }
  });

  it('notices a half-open subscriber connection by its heartbeat: onDisconnect, a new connection, onReconnect, changes again', async () => {
    const proxy = await freezableProxy();
    const keyPrefix = uniquePrefix();
    const reader = newStore({ keyPrefix, client: track(new Redis(proxy.url, { maxRetriesPerRequest: 1 })) }).store;
    const writer = newStore({ keyPrefix }).store;
    const heard = recorder();
    // Only timers are faked (the heartbeat, its deadline, the backoff); sockets stay real.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const watch = await reader.watch(heard.listener);
      const before = record();
      await writer.create(before);
      expect(await heard.next()).toEqual({ kind: 'change', digests: [hexOf(before.digest)] });
      proxy.freeze();
      await writer.create(record()); // never reaches the reader
      await vi.advanceTimersByTimeAsync(WATCH_HEARTBEAT_INTERVAL_MS); // a PING goes out, and is not answered …
      await vi.advanceTimersByTimeAsync(WATCH_HEARTBEAT_TIMEOUT_MS - 1);
      expect(heard.events).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(1); // … within the bound
      expect(await heard.next()).toEqual({ kind: 'disconnect' });
      expect(heard.errors[0]?.message).toBe(`The API-key record store's subscriber connection did not answer PING within ${WATCH_HEARTBEAT_TIMEOUT_MS} ms`);
      const accepted = proxy.connections;
      proxy.unfreeze();
      await vi.advanceTimersByTimeAsync(100); // the new connection's backoff
      expect(await heard.next()).toEqual({ kind: 'reconnect' });
      expect(proxy.connections).toBe(accepted + 1);
      const after = record();
      await writer.create(after);
      expect(await heard.next()).toEqual({ kind: 'change', digests: [hexOf(after.digest)] });
      expect(heard.events.map((event) => event.kind)).toEqual(['change', 'disconnect', 'reconnect', 'change']);
      await watch.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it('closes its watches: close() of a watch and of the store end their subscriber connections, one still starting too', async () => {
    const admin = connect();
    const name = `closing-${randomUUID()}`;
    const { store } = newStore({ client: connect({ connectionName: name }) });
    const first = await store.watch(recorder().listener);
    await store.watch(recorder().listener);
    expect(await subscriberIds(admin, name)).toHaveLength(2);
    await first.close();
    const starting = store.watch(recorder().listener); // closed as soon as it listens
    await store.close();
    await expect(starting).rejects.toThrow(/closed while watch\(\) started/);
    await expect(store.watch(recorder().listener)).rejects.toThrow(/closed/);
    // QUIT is answered before the server drops the connection: wait for the server to see them go.
    while ((await subscriberIds(admin, name)).length > 0) await new Promise((resolve) => setImmediate(resolve));
    expect(await subscriberIds(admin, name)).toEqual([]);
  });
});

describe('redisApiKeyRecordStore when Redis fails', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('throws service_unavailable with Retry-After from every call when Redis is unreachable', async () => {
    const client = track(new Redis({ port: await closedPort(), host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 0 }));
    const store: RedisApiKeyRecordStore = redisApiKeyRecordStore({ client, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const key = record();
    for (const call of [
      () => store.create(key),
      () => store.findByDigest(key.digest),
      () => store.findByKeyId(key.keyId),
      () => store.list(),
      () => store.update(key.keyId, { kind: 'revoke', nowMs: 1 }),
    ]) {
      const failure = await call().catch((error: unknown) => error);
      expect(isPetstoreError(failure) && [failure.code, failure.status, failure.retryAfterSeconds]).toEqual(['service_unavailable', 503, 5]);
      expect((failure as Error).message).toBe('The API-key record store is unavailable; retry later.');
      expect((failure as Error).cause).toBeInstanceOf(Error);
    }
  });

  it('rejects watch at callTimeoutMs when Redis does not answer, and leaves no connection trying', async () => {
    // A server that accepts connections and never answers: the subscriber never becomes ready.
    const sockets = new Set<Socket>();
    let connections = 0;
    const silent = createServer((socket) => {
      connections += 1;
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.resume(); // reads (and drops) what it is sent, so it sees the client's end
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const client = track(new Redis({ port: (silent.address() as AddressInfo).port, host: '127.0.0.1', lazyConnect: true }));
      const store = redisApiKeyRecordStore({ client, callTimeoutMs: 250 });
      const settled = vi.fn();
      const failure = store.watch(recorder().listener).catch((error: unknown) => error).finally(settled);
      await vi.advanceTimersByTimeAsync(249);
      expect(settled).not.toHaveBeenCalled();
      await vi.advanceTimersByTimeAsync(1);
      expect(isPetstoreError(await failure) && (await failure as { code: string }).code).toBe('service_unavailable');
      expect(((await failure) as Error).cause).toMatchObject({ name: 'RedisTimeoutError', callTimeoutMs: 250 });
      // The subscriber connection was closed (a real event: the server sees it go), and no other one is tried
      // however long ioredis's reconnection timers would have waited.
      while (sockets.size > 0 || connections === 0) await new Promise((resolve) => setImmediate(resolve));
      await vi.advanceTimersByTimeAsync(60_000);
      expect(connections).toBe(1);
      expect(sockets.size).toBe(0);
    } finally {
      vi.useRealTimers();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
