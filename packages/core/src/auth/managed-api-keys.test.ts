import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { testApiKeyRecordBackend, testApiKeyRecordStore, type TestApiKeyRecordStore } from '../../test-support/api-key-record-store.js';
import { isPetstoreError, PetstoreError } from '../errors.js';
import { fakeClock } from '../testing/fake-clock.js';
import { PETSTORE_API_KEY_WATCH_CHANNEL, type PetstoreApiKeyWatchMessage } from '../diagnostics.js';
import { hashApiKey, lookupKey } from './api-key.js';
import type { ApiKeyRecord, ApiKeyRecordStore, ApiKeyRecordWatcher } from './api-key-records.js';
import { DEFAULT_MANAGED_KEYS_CACHE, DEFAULT_ROTATION_GRACE_MS, managedApiKeys } from './managed-api-keys.js';
import { generateManagedKey, managedKeyPattern } from './managed-key-format.js';

const HOUR_MS = 3_600_000;

/** A manager on a fresh counting store, with a fake clock. */
function setup(options: { cache?: Parameters<typeof managedApiKeys>[0]['cache']; store?: TestApiKeyRecordStore } = {}) {
  const clock = fakeClock();
  const store = options.store ?? testApiKeyRecordStore();
  const keys = managedApiKeys({ store, clock, ...(options.cache ? { cache: options.cache } : {}) });
  return { clock, store, keys };
}

const rejectsWith = async (promise: Promise<unknown>, code: string, message?: RegExp) => {
  const error: unknown = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(isPetstoreError(error) ? error.code : error).toBe(code);
  if (message) expect((error as Error).message).toMatch(message);
};

afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

describe('managedApiKeys: issuing and looking up', () => {
  it('issues a key of the documented format whose digest alone is stored, and finds its principal', async () => {
    const { keys, store, clock } = setup();
    const issued = await keys.issue({ accountId: 'acct_42', plan: 'pro', name: 'CI', limits: { requestsPerMinute: 5, requestsPerDay: 50 } });
    expect(issued.key).toMatch(managedKeyPattern('pet_'));
    expect(issued.keyId).toMatch(/^key_[0-9A-Za-z]{22}$/);
    expect(keys.acceptsKey(issued.key)).toBe(true);
    expect(issued.record).toEqual({
      keyId: issued.keyId,
      accountId: 'acct_42',
      plan: 'pro',
      limits: { requestsPerMinute: 5, requestsPerDay: 50 },
      name: 'CI',
      status: 'active',
      createdAtMs: clock.now(),
      updatedAtMs: clock.now(),
    });
    expect(await keys.findPrincipal(hashApiKey(issued.key))).toEqual({
      keyId: issued.keyId,
      accountId: 'acct_42',
      plan: 'pro',
      limits: { requestsPerMinute: 5, requestsPerDay: 50 },
    });
    const stored = (await store.findByKeyId(issued.keyId)) as ApiKeyRecord;
    expect(Buffer.from(stored.digest).equals(hashApiKey(issued.key))).toBe(true);
    const everything = JSON.stringify({ ...stored, digest: Buffer.from(stored.digest).toString('base64') }) + JSON.stringify(await keys.list());
    expect(everything).not.toContain(issued.key);
    expect(everything).not.toContain(issued.key.slice(4, 36)); // not even the random part
  });

  it('never writes a key to the console, nor puts it in an error message', async () => {
    const spies = (['log', 'info', 'warn', 'error', 'debug'] as const).map((level) => vi.spyOn(console, level));
    const { keys } = setup();
    const issued = await keys.issue({ accountId: 'a', plan: 'free' });
    const rotated = await keys.rotate(issued.keyId, { graceMs: 0 });
    await keys.revoke(issued.keyId);
    const failures = await Promise.all([
      keys.rotate(issued.keyId).catch((error: Error) => error.message),
      keys.update(issued.keyId, { plan: 'pro' }).catch((error: Error) => error.message),
    ]);
    for (const spy of spies) expect(spy).not.toHaveBeenCalled();
    for (const message of failures) {
      expect(message).not.toContain(issued.key);
      expect(message).not.toContain(rotated.key);
    }
  });

  it('refuses keys of another format before any lookup, and unknown well-formed keys after one', async () => {
    const { keys, store } = setup();
    expect(keys.acceptsKey('pet_abc')).toBe(false);
    expect(keys.acceptsKey(generateManagedKey('acme_'))).toBe(false);
    expect(keys.acceptsKey(generateManagedKey('pet_'))).toBe(true);
    expect(await keys.findPrincipal(hashApiKey(generateManagedKey('pet_')))).toBeUndefined();
    expect(store.digestLookups).toBe(1);
    expect(await keys.findPrincipal(new Uint8Array(31))).toBeUndefined();
    expect(store.digestLookups).toBe(1);
    expect(managedApiKeys({ store, prefix: 'acme_' }).acceptsKey(generateManagedKey('acme_'))).toBe(true);
  });

  it('answers from the cache: a known key and an unknown key cost one lookup each until their TTL', async () => {
    const { keys, store, clock } = setup();
    const { key } = await keys.issue({ accountId: 'a', plan: 'free' });
    const stranger = hashApiKey(generateManagedKey('pet_'));
    for (let i = 0; i < 100; i++) {
      expect(await keys.findPrincipal(hashApiKey(key))).toBeDefined();
      expect(await keys.findPrincipal(stranger)).toBeUndefined();
    }
    expect(store.digestLookups).toBe(2);
    clock.advance(DEFAULT_MANAGED_KEYS_CACHE.unknownTtlMs);
    await keys.findPrincipal(stranger);
    expect(store.digestLookups).toBe(2);
    clock.advance(1); // past the unknown key's 10 s, within the known key's 30 s
    await keys.findPrincipal(stranger);
    await keys.findPrincipal(hashApiKey(key));
    expect(store.digestLookups).toBe(3);
    clock.advance(DEFAULT_MANAGED_KEYS_CACHE.ttlMs - DEFAULT_MANAGED_KEYS_CACHE.unknownTtlMs);
    expect(await keys.findPrincipal(hashApiKey(key))).toBeDefined();
    expect(store.digestLookups).toBe(4);
  });

  it('bounds both caches: past maxKeys and maxUnknownKeys the least recently used entry is looked up again', async () => {
    const { keys, store } = setup({ cache: { maxKeys: 3, maxUnknownKeys: 2 } });
    const issued = await Promise.all(Array.from({ length: 4 }, () => keys.issue({ accountId: 'a', plan: 'free' })));
    for (const { key } of issued) await keys.findPrincipal(hashApiKey(key));
    expect(store.digestLookups).toBe(4);
    for (const { key } of issued.slice(1)) await keys.findPrincipal(hashApiKey(key));
    expect(store.digestLookups).toBe(4); // the last three are held
    await keys.findPrincipal(hashApiKey((issued[0] as { key: string }).key));
    expect(store.digestLookups).toBe(5); // the first was evicted
    const strangers = Array.from({ length: 3 }, () => hashApiKey(generateManagedKey('pet_')));
    for (const digest of strangers) await keys.findPrincipal(digest);
    await keys.findPrincipal(strangers[2] as Uint8Array);
    await keys.findPrincipal(strangers[1] as Uint8Array);
    expect(store.digestLookups).toBe(8);
    await keys.findPrincipal(strangers[0] as Uint8Array);
    expect(store.digestLookups).toBe(9);
  });

  it('shares one store lookup among concurrent misses of one digest', async () => {
    const inner = testApiKeyRecordStore();
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const slow: ApiKeyRecordStore = { ...inner, findByDigest: async (digest) => held.then(() => inner.findByDigest(digest)) };
    const keys = managedApiKeys({ store: slow, clock: fakeClock() });
    const { key } = await keys.issue({ accountId: 'a', plan: 'free' });
    const stranger = hashApiKey(generateManagedKey('pet_'));
    const answers = Promise.all([
      ...Array.from({ length: 100 }, () => keys.findPrincipal(hashApiKey(key))),
      ...Array.from({ length: 100 }, () => keys.findPrincipal(stranger)),
    ]);
    release();
    const found = await answers;
    expect(found.slice(0, 100).every((principal) => principal?.accountId === 'a')).toBe(true);
    expect(found.slice(100).every((principal) => principal === undefined)).toBe(true);
    expect(inner.digestLookups).toBe(2);
  });

  it('with cachedOnly, answers cached keys and does not look up the others', async () => {
    const { keys, store } = setup();
    const cached = await keys.issue({ accountId: 'a', plan: 'free' });
    const uncached = await keys.issue({ accountId: 'b', plan: 'free' });
    await keys.findPrincipal(hashApiKey(cached.key));
    expect(store.digestLookups).toBe(1);
    expect((await keys.findPrincipal(hashApiKey(cached.key), { cachedOnly: true }))?.accountId).toBe('a');
    expect(await keys.findPrincipal(hashApiKey(uncached.key), { cachedOnly: true })).toBeUndefined();
    expect(await keys.findPrincipal(hashApiKey(generateManagedKey('pet_')), { cachedOnly: true })).toBeUndefined();
    expect(store.digestLookups).toBe(1);
    expect((await keys.findPrincipal(hashApiKey(uncached.key)))?.accountId).toBe('b');
    expect(store.digestLookups).toBe(2);
  });

  it('rejects with 503 service_unavailable when the store fails, and caches nothing of the failure', async () => {
    const inner = testApiKeyRecordStore();
    let failing = true;
    const flaky: ApiKeyRecordStore = {
      ...inner,
      findByDigest: async (digest) => {
        if (failing) throw new Error('connection refused');
        return inner.findByDigest(digest);
      },
    };
    const keys = managedApiKeys({ store: flaky, clock: fakeClock() });
    const { key } = await keys.issue({ accountId: 'a', plan: 'free' });
    const error: unknown = await keys.findPrincipal(hashApiKey(key)).catch((reason: unknown) => reason);
    expect(isPetstoreError(error) && { code: error.code, status: error.status, retryAfterSeconds: error.retryAfterSeconds }).toEqual({
      code: 'service_unavailable',
      status: 503,
      retryAfterSeconds: 5,
    });
    expect((error as Error).cause).toEqual(new Error('connection refused'));
    failing = false;
    expect((await keys.findPrincipal(hashApiKey(key)))?.accountId).toBe('a');
    // A PetstoreError of the store (e.g. its own 503 with its Retry-After) is passed on as it is.
    const own = new PetstoreError('service_unavailable', 'The Redis store is unavailable; retry later.', { retryAfterSeconds: 9 });
    const keys2 = managedApiKeys({ store: { ...inner, findByDigest: () => Promise.reject(own) } });
    await expect(keys2.findPrincipal(hashApiKey(generateManagedKey('pet_')))).rejects.toBe(own);
  });
});

describe('managedApiKeys: validity judged at each use', () => {
  it('refuses a key from its expiresAtMs on, without a lookup, and reports it expired', async () => {
    const { keys, store, clock } = setup();
    const { key, keyId, record } = await keys.issue({ accountId: 'a', plan: 'free', expiresInMs: 60_000 });
    expect(record.expiresAtMs).toBe(clock.now() + 60_000);
    clock.advance(59_999);
    expect(await keys.findPrincipal(hashApiKey(key))).toBeDefined();
    clock.advance(1);
    expect(await keys.findPrincipal(hashApiKey(key))).toBeUndefined();
    expect(store.digestLookups).toBe(1);
    expect((await keys.get(keyId))?.status).toBe('expired');
    const atTime = await keys.issue({ accountId: 'a', plan: 'free', expiresAtMs: clock.now() + 1 });
    expect(atTime.record.expiresAtMs).toBe(clock.now() + 1);
  });

  it('rotates: the new key works at once, the old one until the grace period ends, then 401', async () => {
    const { keys, clock } = setup();
    const issued = await keys.issue({ accountId: 'a', plan: 'pro' });
    await keys.findPrincipal(hashApiKey(issued.key)); // cached before the rotation
    const rotated = await keys.rotate(issued.keyId, { graceMs: HOUR_MS });
    expect(rotated.keyId).toBe(issued.keyId);
    expect(rotated.key).not.toBe(issued.key);
    expect(rotated.key).toMatch(managedKeyPattern());
    expect(rotated.record).toMatchObject({ status: 'active', previousKeyValidUntilMs: clock.now() + HOUR_MS, updatedAtMs: clock.now() });
    expect((await keys.findPrincipal(hashApiKey(rotated.key)))?.keyId).toBe(issued.keyId);
    expect((await keys.findPrincipal(hashApiKey(issued.key)))?.keyId).toBe(issued.keyId);
    clock.advance(HOUR_MS - 1);
    expect(await keys.findPrincipal(hashApiKey(issued.key))).toBeDefined();
    clock.advance(1);
    expect(await keys.findPrincipal(hashApiKey(issued.key))).toBeUndefined();
    expect(await keys.findPrincipal(hashApiKey(rotated.key))).toBeDefined();
    expect('previousKeyValidUntilMs' in ((await keys.get(issued.keyId)) as object)).toBe(false);
  });

  it('rotates with a grace of 24 hours unless told, 0 refusing the old key at once; a second rotation ends the first grace', async () => {
    const { keys, clock } = setup();
    const issued = await keys.issue({ accountId: 'a', plan: 'pro' });
    const first = await keys.rotate(issued.keyId);
    expect(first.record.previousKeyValidUntilMs).toBe(clock.now() + DEFAULT_ROTATION_GRACE_MS);
    expect(DEFAULT_ROTATION_GRACE_MS).toBe(24 * HOUR_MS);
    const second = await keys.rotate(issued.keyId, { graceMs: 10 * 60_000 });
    expect(await keys.findPrincipal(hashApiKey(issued.key))).toBeUndefined(); // its grace ended with the second rotation
    expect(await keys.findPrincipal(hashApiKey(first.key))).toBeDefined();
    expect(await keys.findPrincipal(hashApiKey(second.key))).toBeDefined();
    const third = await keys.rotate(issued.keyId, { graceMs: 0 });
    expect(await keys.findPrincipal(hashApiKey(second.key))).toBeUndefined();
    expect(await keys.findPrincipal(hashApiKey(third.key))).toBeDefined();
  });

  it('revokes: refused at once though cached, the replaced key too; a second revocation keeps the first time', async () => {
    const { keys, clock } = setup();
    const issued = await keys.issue({ accountId: 'a', plan: 'pro' });
    const rotated = await keys.rotate(issued.keyId, { graceMs: HOUR_MS });
    expect(await keys.findPrincipal(hashApiKey(issued.key))).toBeDefined();
    expect(await keys.findPrincipal(hashApiKey(rotated.key))).toBeDefined();
    const revoked = await keys.revoke(issued.keyId);
    expect(revoked).toMatchObject({ status: 'revoked', revokedAtMs: clock.now() });
    expect(await keys.findPrincipal(hashApiKey(rotated.key))).toBeUndefined();
    expect(await keys.findPrincipal(hashApiKey(issued.key))).toBeUndefined();
    clock.advance(1_000);
    expect((await keys.revoke(issued.keyId)).revokedAtMs).toBe(revoked.revokedAtMs);
    await rejectsWith(keys.rotate(issued.keyId), 'gone', /was revoked at 2026-01-01T00:00:00.000Z; issue a new key/);
    await rejectsWith(keys.update(issued.keyId, { plan: 'business' }), 'gone', /was revoked/);
    expect((await keys.get(issued.keyId))?.plan).toBe('pro');
  });

  it('refuses to rotate an expired key, and still updates it', async () => {
    const { keys, clock } = setup();
    const { keyId } = await keys.issue({ accountId: 'a', plan: 'pro', expiresInMs: 1_000 });
    clock.advance(1_000);
    await rejectsWith(keys.rotate(keyId), 'gone', /expired at 2026-01-01T00:00:01.000Z; issue a new key/);
    expect((await keys.update(keyId, { name: 'old' })).status).toBe('expired');
  });

  it('updates plan, limits and name, obeyed at once; null clears; unknown key ids are not_found', async () => {
    const { keys, clock } = setup();
    const { key, keyId } = await keys.issue({ accountId: 'a', plan: 'pro', name: 'first', limits: { requestsPerMinute: 1, requestsPerDay: 2 } });
    expect((await keys.findPrincipal(hashApiKey(key)))?.plan).toBe('pro');
    clock.advance(5);
    const updated = await keys.update(keyId, { plan: 'enterprise', limits: { requestsPerMinute: 9_000, requestsPerDay: 900_000 } });
    expect(updated).toMatchObject({ plan: 'enterprise', name: 'first', updatedAtMs: clock.now(), limits: { requestsPerMinute: 9_000, requestsPerDay: 900_000 } });
    expect(await keys.findPrincipal(hashApiKey(key))).toEqual({ keyId, accountId: 'a', plan: 'enterprise', limits: { requestsPerMinute: 9_000, requestsPerDay: 900_000 } });
    const cleared = await keys.update(keyId, { limits: null, name: null });
    expect('limits' in cleared || 'name' in cleared).toBe(false);
    expect(await keys.findPrincipal(hashApiKey(key))).toEqual({ keyId, accountId: 'a', plan: 'enterprise' });
    expect(await keys.get('key_unknown')).toBeUndefined();
    await rejectsWith(keys.update('key_unknown', { plan: 'free' }), 'not_found', /No API key has the keyId "key_unknown"/);
    await rejectsWith(keys.rotate('key_unknown'), 'not_found');
    await rejectsWith(keys.revoke('key_unknown'), 'not_found');
    expect(await keys.findByKeyId(keyId)).toEqual({ keyId, accountId: 'a', plan: 'enterprise' });
    expect(await keys.findByKeyId('key_unknown')).toBeUndefined();
  });

  it('lists keys of an account a page at a time, with their status and without digests', async () => {
    const { keys, clock } = setup();
    const mine = await Promise.all(Array.from({ length: 5 }, () => keys.issue({ accountId: 'mine', plan: 'free' })));
    await keys.issue({ accountId: 'other', plan: 'free' });
    await keys.revoke((mine[0] as { keyId: string }).keyId);
    clock.advance(1);
    const first = await keys.list({ accountId: 'mine', limit: 3 });
    const second = await keys.list({ accountId: 'mine', after: first.next as string });
    const listed = [...first.keys, ...second.keys];
    expect(listed.map((info) => info.keyId)).toEqual(mine.map((issued) => issued.keyId).sort());
    expect('next' in second).toBe(false);
    expect(listed.filter((info) => info.status === 'revoked').map((info) => info.keyId)).toEqual([(mine[0] as { keyId: string }).keyId]);
    for (const info of listed) expect(Object.keys(info).some((field) => /digest/i.test(field))).toBe(false);
    expect((await keys.list()).keys).toHaveLength(6);
  });
});

describe('managedApiKeys: several instances', () => {
  it('obeys a revocation, rotation or plan change made by another instance once it is heard', async () => {
    const backend = testApiKeyRecordBackend();
    const clock = fakeClock();
    const here = managedApiKeys({ store: backend.instance(), clock });
    const there = managedApiKeys({ store: backend.instance(), clock });
    await Promise.all([here.ready(), there.ready()]);
    const a = await there.issue({ accountId: 'a', plan: 'free' });
    const b = await there.issue({ accountId: 'b', plan: 'free' });
    expect(await here.findPrincipal(hashApiKey(a.key))).toBeDefined();
    expect((await here.findPrincipal(hashApiKey(b.key)))?.plan).toBe('free');
    await there.revoke(a.keyId);
    await there.update(b.keyId, { plan: 'business' });
    expect(await here.findPrincipal(hashApiKey(a.key))).toBeUndefined();
    expect((await here.findPrincipal(hashApiKey(b.key)))?.plan).toBe('business');
    await there.rotate(b.keyId, { graceMs: 0 });
    expect(await here.findPrincipal(hashApiKey(b.key))).toBeUndefined();
    await Promise.all([here.close(), there.close()]);
  });

  it('without notifications, obeys another instance\'s revocation once the cache TTL has passed', async () => {
    const backend = testApiKeyRecordBackend();
    const { watch: _watch, ...deaf } = backend.instance();
    const clock = fakeClock();
    const here = managedApiKeys({ store: deaf, clock, cache: { ttlMs: 5_000 } });
    const there = managedApiKeys({ store: backend.instance(), clock });
    const issued = await there.issue({ accountId: 'a', plan: 'free' });
    expect(await here.findPrincipal(hashApiKey(issued.key))).toBeDefined();
    await there.revoke(issued.keyId);
    clock.advance(5_000);
    expect(await here.findPrincipal(hashApiKey(issued.key))).toBeDefined(); // stale, within the TTL
    clock.advance(1);
    expect(await here.findPrincipal(hashApiKey(issued.key))).toBeUndefined();
    // Its own changes it obeys at once, notifications or not.
    const own = await here.issue({ accountId: 'b', plan: 'free' });
    expect((await here.findPrincipal(hashApiKey(own.key)))?.plan).toBe('free');
    await here.update(own.keyId, { plan: 'pro' });
    expect((await here.findPrincipal(hashApiKey(own.key)))?.plan).toBe('pro');
    const rotated = await here.rotate(own.keyId, { graceMs: 0 });
    expect(await here.findPrincipal(hashApiKey(own.key))).toBeUndefined();
    expect(await here.findPrincipal(hashApiKey(rotated.key))).toBeDefined();
    await here.revoke(own.keyId);
    expect(await here.findPrincipal(hashApiKey(rotated.key))).toBeUndefined();
  });

  it('drops every cached entry when the store reports a reconnection (changes may have been lost)', async () => {
    const backend = testApiKeyRecordBackend();
    const store = backend.instance();
    const here = managedApiKeys({ store, clock: fakeClock() });
    await here.ready();
    const issued = await here.issue({ accountId: 'a', plan: 'free' });
    await here.findPrincipal(hashApiKey(issued.key));
    await here.findPrincipal(hashApiKey(issued.key));
    expect(store.digestLookups).toBe(1);
    await backend.breakNotifications();
    // While notifications are down, another instance revokes: the change is never told.
    await managedApiKeys({ store: backend.instance() }).revoke(issued.keyId);
    expect(await here.findPrincipal(hashApiKey(issued.key))).toBeDefined(); // not told yet: cached
    await new Promise<void>((resolve) => setImmediate(resolve)); // the test backend reconnects a tick later
    expect(await here.findPrincipal(hashApiKey(issued.key))).toBeUndefined();
    expect(store.digestLookups).toBe(2);
  });

  it('does not cache what a lookup read before a change it overlapped', async () => {
    const backend = testApiKeyRecordBackend();
    const inner = backend.instance();
    let release: () => void = () => undefined;
    let hold = false;
    const store: ApiKeyRecordStore = {
      ...inner,
      findByDigest: async (digest) => {
        const record = await inner.findByDigest(digest); // read now …
        if (hold) await new Promise<void>((resolve) => (release = resolve)); // … answered later
        return record;
      },
    };
    const here = managedApiKeys({ store, clock: fakeClock() });
    await here.ready();
    const issued = await managedApiKeys({ store: backend.instance() }).issue({ accountId: 'a', plan: 'free' });
    hold = true;
    const lookup = here.findPrincipal(hashApiKey(issued.key));
    await new Promise<void>((resolve) => setImmediate(resolve));
    await managedApiKeys({ store: backend.instance() }).revoke(issued.keyId); // heard while the lookup is held
    hold = false;
    release();
    expect(await lookup).toBeDefined(); // answered as read: the request came before the revocation
    expect(await here.findPrincipal(hashApiKey(issued.key))).toBeUndefined(); // not served from a stale cache
  });

  it('watches again after a failed start, with backoff, and close() stops watching', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const backend = testApiKeyRecordBackend();
    const inner = backend.instance();
    let attempts = 0;
    const store: ApiKeyRecordStore = {
      ...inner,
      watch: async (listener) => {
        attempts++;
        if (attempts < 3) throw new Error('subscriber connection refused');
        return inner.watch(listener);
      },
    };
    const clock = fakeClock();
    const here = managedApiKeys({ store, clock });
    await expect(here.ready()).rejects.toMatchObject({ code: 'service_unavailable' });
    expect(attempts).toBe(1);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(attempts).toBe(2);
    await vi.advanceTimersByTimeAsync(1_999);
    expect(attempts).toBe(2);
    await vi.advanceTimersByTimeAsync(1); // 2 s after the second attempt
    expect(attempts).toBe(3);
    const there = managedApiKeys({ store: backend.instance(), clock });
    const issued = await there.issue({ accountId: 'a', plan: 'free' });
    expect(await here.findPrincipal(hashApiKey(issued.key))).toBeDefined();
    await there.revoke(issued.keyId);
    expect(await here.findPrincipal(hashApiKey(issued.key))).toBeUndefined(); // heard: watching now
    await here.close();
    const other = await there.issue({ accountId: 'b', plan: 'free' });
    expect(await here.findPrincipal(hashApiKey(other.key))).toBeDefined();
    await there.revoke(other.keyId);
    expect(await here.findPrincipal(hashApiKey(other.key))).toBeDefined(); // closed: no longer told
  });
});

describe('managedApiKeys: the full digest decides', () => {
  it('never answers a cached key, known or unknown, for another digest with the same 48-bit lookup key', async () => {
    const { keys, store } = setup();
    const { key, keyId } = await keys.issue({ accountId: 'a', plan: 'pro' });
    const digest = hashApiKey(key);
    const twin = new Uint8Array(digest);
    twin[31] = (twin[31] as number) ^ 1;
    const other = new Uint8Array(digest);
    other[30] = (other[30] as number) ^ 1;
    expect([lookupKey(twin), lookupKey(other)]).toEqual([lookupKey(digest), lookupKey(digest)]);
    expect(await keys.findPrincipal(twin)).toBeUndefined(); // unknown, and cached as unknown
    expect((await keys.findPrincipal(digest))?.keyId).toBe(keyId); // not hidden by its unknown twin
    expect(await keys.findPrincipal(twin)).toBeUndefined(); // nor does the known key answer for it
    expect(store.digestLookups).toBe(2);
    // An accepted digest lets a refused caller look it up again; a digest that only shares its lookup key does not.
    expect(await keys.findPrincipal(other, { cachedOnly: true })).toBeUndefined();
    expect(store.digestLookups).toBe(2);
    await keys.revoke(keyId);
    expect(await keys.findPrincipal(digest)).toBeUndefined();
    expect([keys.refusalReason(digest), keys.refusalReason(twin)]).toEqual(['revoked', undefined]);
  });
});

describe('managedApiKeys: keys accepted before, for callers that may not spend lookups', () => {
  it('looks up a key it accepted before past the TTL (cachedOnly or a refused turn), never a digest it did not accept', async () => {
    const { keys, store, clock } = setup();
    const { key, keyId } = await keys.issue({ accountId: 'a', plan: 'pro' });
    const digest = hashApiKey(key);
    const stranger = hashApiKey(generateManagedKey('pet_'));
    const refused = { reserveLookup: vi.fn(async () => false) };
    expect(await keys.findPrincipal(digest)).toBeDefined();
    expect(store.digestLookups).toBe(1);
    for (let n = 1; n <= 4; n++) {
      clock.advance(DEFAULT_MANAGED_KEYS_CACHE.ttlMs + 1); // each time past the cache's lifetime
      expect(await keys.findPrincipal(digest, { cachedOnly: true })).toBeDefined();
      expect(await keys.findPrincipal(digest, refused)).toBeDefined(); // cached again: no lookup
      expect(store.digestLookups).toBe(1 + n);
    }
    expect(refused.reserveLookup).not.toHaveBeenCalled();
    expect(await keys.findPrincipal(stranger, { cachedOnly: true })).toBeUndefined();
    expect(await keys.findPrincipal(stranger, refused)).toBeUndefined();
    expect(refused.reserveLookup).toHaveBeenCalledTimes(1);
    expect(store.digestLookups).toBe(5);
    // Once refused at a lookup, the key is no longer one accepted before.
    await store.update(keyId, { kind: 'revoke', nowMs: clock.now() }); // heard: forgotten by the cache
    expect(await keys.findPrincipal(digest, { cachedOnly: true })).toBeUndefined();
    expect(store.digestLookups).toBe(6);
    clock.advance(DEFAULT_MANAGED_KEYS_CACHE.ttlMs + 1);
    expect(await keys.findPrincipal(digest, { cachedOnly: true })).toBeUndefined();
    expect(store.digestLookups).toBe(6);
  });

  it('looks a digest up once its turn is granted, and answers from the cache what was looked up meanwhile', async () => {
    const { keys, store } = setup();
    const { key } = await keys.issue({ accountId: 'a', plan: 'pro' });
    let grant: (granted: boolean) => void = () => undefined;
    const waiting = { reserveLookup: vi.fn(() => new Promise<boolean>((resolve) => (grant = resolve))) };
    const answer = keys.findPrincipal(hashApiKey(key), waiting);
    await keys.findPrincipal(hashApiKey(key)); // another caller, free to look up
    grant(true);
    expect((await answer)?.accountId).toBe('a');
    expect(store.digestLookups).toBe(1);
  });
});

describe('managedApiKeys: a broken watch', () => {
  /** The watch-state messages of one backend name while `run` runs. */
  async function watchMessages(backend: string, run: () => Promise<void>): Promise<PetstoreApiKeyWatchMessage[]> {
    const messages: PetstoreApiKeyWatchMessage[] = [];
    const listener = (message: unknown) => {
      if ((message as PetstoreApiKeyWatchMessage).backend === backend) messages.push(message as PetstoreApiKeyWatchMessage);
    };
    subscribe(PETSTORE_API_KEY_WATCH_CHANNEL, listener);
    try {
      await run();
    } finally {
      unsubscribe(PETSTORE_API_KEY_WATCH_CHANNEL, listener);
    }
    return messages;
  }

  it('checks every accepted key at the store from the break until the watch is back, telling each change once', async () => {
    const backend = testApiKeyRecordBackend();
    const inner = backend.instance();
    let watcher: ApiKeyRecordWatcher | undefined;
    const store: ApiKeyRecordStore = {
      ...inner,
      backend: 'test-broken-watch',
      watch: (listener) => {
        watcher = listener;
        return inner.watch(listener);
      },
    };
    const clock = fakeClock();
    const here = managedApiKeys({ store, clock });
    const lost = new Error('watch heartbeat unanswered');
    const messages = await watchMessages('test-broken-watch', async () => {
      expect(here.watchState).toBe('connecting');
      await here.ready();
      expect(here.watchState).toBe('watching');
      const doomed = await here.issue({ accountId: 'a', plan: 'pro' });
      const kept = await here.issue({ accountId: 'b', plan: 'pro' });
      for (const { key } of [doomed, kept, doomed, kept]) expect(await here.findPrincipal(hashApiKey(key))).toBeDefined();
      expect(inner.digestLookups).toBe(2);

      backend.disconnect(lost);
      watcher?.onDisconnect(new Error('connection closed')); // the same break, reported twice
      expect(here.watchState).toBe('disconnected');
      // Revoked on the backend directly: no notification reaches this instance.
      await backend.instance().update(doomed.keyId, { kind: 'revoke', nowMs: clock.now() });
      expect(await here.findPrincipal(hashApiKey(doomed.key))).toBeUndefined(); // the next request
      expect(inner.digestLookups).toBe(3);
      expect(await here.findPrincipal(hashApiKey(doomed.key))).toBeUndefined(); // a refusal stands: no lookup
      expect(inner.digestLookups).toBe(3);
      const answers = await Promise.all(Array.from({ length: 10 }, () => here.findPrincipal(hashApiKey(kept.key))));
      expect(answers.every((principal) => principal?.accountId === 'b')).toBe(true);
      expect(inner.digestLookups).toBe(4); // concurrent lookups of one digest share one
      expect(await here.findPrincipal(hashApiKey(kept.key))).toBeDefined();
      expect(inner.digestLookups).toBe(5); // and each use asks the store again

      backend.reconnect();
      expect(here.watchState).toBe('watching');
      expect(await here.findPrincipal(hashApiKey(kept.key))).toBeDefined();
      expect(await here.findPrincipal(hashApiKey(kept.key))).toBeDefined();
      expect(inner.digestLookups).toBe(6); // cached again
      await here.close();
      expect(here.watchState).toBe('unwatched');
    });
    expect(messages).toEqual([
      { backend: 'test-broken-watch', state: 'watching', previousState: 'connecting' },
      { backend: 'test-broken-watch', state: 'disconnected', previousState: 'watching', error: lost },
      { backend: 'test-broken-watch', state: 'watching', previousState: 'disconnected' },
      { backend: 'test-broken-watch', state: 'unwatched', previousState: 'watching' },
    ]);
  });

  it('counts a watch that failed to start as disconnected, and forgets what it cached once a retry starts it', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const backend = testApiKeyRecordBackend();
    const inner = backend.instance();
    const refused = new Error('subscriber connection refused');
    let failing = true;
    const store: ApiKeyRecordStore = {
      ...inner,
      backend: 'test-late-watch',
      watch: async (listener) => {
        if (failing) throw refused;
        return inner.watch(listener);
      },
    };
    const clock = fakeClock();
    const here = managedApiKeys({ store, clock });
    const messages = await watchMessages('test-late-watch', async () => {
      await expect(here.ready()).rejects.toMatchObject({ code: 'service_unavailable' });
      expect(here.watchState).toBe('disconnected');
      const issued = await here.issue({ accountId: 'a', plan: 'free' });
      expect(await here.findPrincipal(hashApiKey(issued.key))).toBeDefined(); // cached, not trusted yet
      await vi.advanceTimersByTimeAsync(1_000); // the retry fails too
      expect(here.watchState).toBe('disconnected');
      // Revoked on the backend while this instance does not watch: never told.
      await backend.instance().update(issued.keyId, { kind: 'revoke', nowMs: clock.now() });
      failing = false;
      await vi.advanceTimersByTimeAsync(2_000);
      expect(here.watchState).toBe('watching');
      expect(await here.findPrincipal(hashApiKey(issued.key))).toBeUndefined(); // at once, not after the TTL
      await here.close();
    });
    expect(messages).toEqual([
      { backend: 'test-late-watch', state: 'disconnected', previousState: 'connecting', error: refused },
      { backend: 'test-late-watch', state: 'watching', previousState: 'disconnected' },
      { backend: 'test-late-watch', state: 'unwatched', previousState: 'watching' },
    ]);
  });

  it('is unwatched on a store without watch, and then forgets at once what its own revocation touched', async () => {
    const { watch: _watch, ...deaf } = testApiKeyRecordStore();
    const clock = fakeClock();
    const here = managedApiKeys({ store: deaf, clock });
    expect(here.watchState).toBe('unwatched');
    const issued = await here.issue({ accountId: 'a', plan: 'pro' });
    const rotated = await here.rotate(issued.keyId, { graceMs: HOUR_MS });
    expect(await here.findPrincipal(hashApiKey(issued.key))).toBeDefined(); // the replaced key, in its grace, cached
    expect(await here.findPrincipal(hashApiKey(rotated.key))).toBeDefined();
    await here.revoke(issued.keyId);
    expect(await here.findPrincipal(hashApiKey(issued.key))).toBeUndefined();
    expect(await here.findPrincipal(hashApiKey(rotated.key))).toBeUndefined();
  });
});

describe('managedApiKeys: inputs', () => {
  const { keys, clock } = setup();

  it('refuses wrong options, naming them', () => {
    const store = testApiKeyRecordStore();
    expect(() => managedApiKeys({ store, prefix: 'PET_' })).toThrow(/^managedApiKeys: prefix must be 1–16 characters \[a-z\]\[a-z0-9\]\* followed by "_"/);
    expect(() => managedApiKeys({ store, cache: { maxKeys: 0 } })).toThrow(new TypeError('managedApiKeys: cache.maxKeys must be at least 1 (got 0)'));
    expect(() => managedApiKeys({ store, cache: { ttlMs: 1.5 } })).toThrow(/cache.ttlMs must be a whole number/);
    expect(() => managedApiKeys({ store, cache: { maxUnknown: 5 } as never })).toThrow(/cache.maxUnknown is not a field/);
    expect(() => managedApiKeys({ store: { findPrincipal: () => undefined } as never })).toThrow(/managedApiKeys: store.create is required: it must be a function/);
    expect(() => managedApiKeys({} as never)).toThrow(/store is required: it must be an ApiKeyRecordStore/);
    expect(() => managedApiKeys({ store, ttlMs: 5 } as never)).toThrow(/ttlMs is not an option/);
  });

  it('refuses a wrong issue input with a TypeError naming the field', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ plan: 'free' }, /^managedApiKeys.issue: accountId is required/],
      [{ accountId: '', plan: 'free' }, /accountId must not be empty/],
      [{ accountId: 'x'.repeat(201), plan: 'free' }, /accountId must be at most 200 characters/],
      [{ accountId: 'a\nb', plan: 'free' }, /accountId must not contain control characters/],
      [{ accountId: 'a\uD800', plan: 'free' }, /accountId must not contain unpaired surrogates/],
      [{ accountId: 'a', plan: 'gold' }, /plan must be one of free, pro, business, enterprise \(got "gold"\)/],
      [{ accountId: 'a', plan: 'free', limits: { requestsPerMinute: -1, requestsPerDay: 1 } }, /limits.requestsPerMinute must be at least 0/],
      [{ accountId: 'a', plan: 'free', limits: { requestsPerMinute: 1 } }, /limits.requestsPerDay is required/],
      [{ accountId: 'a', plan: 'free', name: '' }, /name must not be empty/],
      [{ accountId: 'a', plan: 'free', expiresInMs: 0 }, /expiresInMs must be at least 1/],
      [{ accountId: 'a', plan: 'free', expiresInMs: 1, expiresAtMs: clock.now() + 5 }, /give expiresAtMs or expiresInMs, not both/],
      [{ accountId: 'a', plan: 'free', expiresAtMs: clock.now() }, /expiresAtMs must be in the future/],
      [{ accountId: 'a', plan: 'free', key: 'pet_mine' }, /key is not a field/],
      ['acct', /must be \{ accountId, plan/],
    ];
    for (const [input, message] of cases) {
      const error: unknown = await keys.issue(input as never).catch((reason: unknown) => reason);
      expect(error, JSON.stringify(input)).toBeInstanceOf(TypeError);
      expect((error as Error).message, JSON.stringify(input)).toMatch(message);
    }
  });

  it('refuses wrong update, rotate, list and key id inputs with a TypeError naming the field', async () => {
    const { keyId } = await keys.issue({ accountId: 'a', plan: 'free' });
    const cases: Array<[() => Promise<unknown>, RegExp]> = [
      [() => keys.update(keyId, { plan: 'gold' as never }), /^managedApiKeys.update: plan must be one of/],
      [() => keys.update(keyId, { name: 'x'.repeat(201) }), /name must be at most 200 characters/],
      [() => keys.update(keyId, { accountId: 'b' } as never), /accountId is not a field/],
      [() => keys.rotate(keyId, { graceMs: -1 }), /^managedApiKeys.rotate: graceMs must be at least 0/],
      [() => keys.rotate(keyId, { graceMs: 1.5 }), /graceMs must be a whole number/],
      [() => keys.list({ limit: 0 }), /^managedApiKeys.list: limit must be at least 1/],
      [() => keys.list({ limit: 1001 }), /limit must be at most 1000/],
      [() => keys.get(42 as never), /^managedApiKeys.get: keyId must be a string \(got 42\)/],
      [() => keys.revoke(''), /^managedApiKeys.revoke: keyId must not be empty/],
    ];
    for (const [call, message] of cases) {
      const error: unknown = await call().catch((reason: unknown) => reason);
      expect(error, String(message)).toBeInstanceOf(TypeError);
      expect((error as Error).message).toMatch(message);
    }
    expect((await keys.get(keyId))?.plan).toBe('free'); // nothing changed
  });
});
