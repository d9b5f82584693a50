/**
 * Several API-key stores in one petstore, the format check before any hashing or lookup, and the lookups a
 * flood costs: random tokens none, well-formed unknown keys from one address only until the address is refused.
 */
import { describe, expect, it } from 'vitest';
import { testApiKeyRecordStore } from '../../test-support/api-key-record-store.js';
import { testRateLimitStore } from '../../test-support/rate-limit-store.js';
import { CLIENT_ADDRESS, FREE_KEY, expectError, keyIdOf, testPetstore } from '../../test-support/petstore.js';
import { staticApiKeys, type ApiKeyStore } from '../auth/api-key.js';
import { managedApiKeys } from '../auth/managed-api-keys.js';
import { generateManagedKey } from '../auth/managed-key-format.js';
import type { Principal } from '../auth/principal.js';
import { DEFAULT_ANONYMOUS_LIMITS } from '../rate-limit/plans.js';
import { fakeClock } from '../testing/fake-clock.js';
import { seededRandom } from '../testing/seeded-random.js';
import type { PetstoreRequest } from './types.js';

const get = (key: string, clientAddress = CLIENT_ADDRESS): PetstoreRequest => ({
  method: 'GET',
  path: '/categories',
  headers: { authorization: `Bearer ${key}` },
  clientAddress,
});


/** Managed keys over a counting record store, beside the static keys of the test petstore, on one fake clock. */
function managedPetstore() {
  const clock = fakeClock();
  const records = testApiKeyRecordStore();
  const managed = managedApiKeys({ store: records, clock });
  const demo = staticApiKeys([{ key: FREE_KEY, plan: 'free' }]);
  const test = testPetstore({ apiKeys: [managed, demo], clock });
  return { ...test, clock, records, managed };
}

/** A store that counts its calls and answers a fixed principal (or none). */
function countingStore(principal: Principal | undefined, acceptsKey?: (key: string) => boolean) {
  const calls = { findPrincipal: 0, acceptsKey: 0 };
  const store: ApiKeyStore = {
    findPrincipal: async () => {
      calls.findPrincipal++;
      return principal;
    },
    findByKeyId: async (keyId) => (principal?.keyId === keyId ? principal : undefined),
    ...(acceptsKey && {
      acceptsKey: (key: string) => {
        calls.acceptsKey++;
        return acceptsKey(key);
      },
    }),
  };
  return { store, calls };
}

describe('several API-key stores', () => {
  it('serves managed and static keys side by side', async () => {
    const { petstore, managed } = managedPetstore();
    const issued = await managed.issue({ accountId: 'acme', plan: 'pro' });
    expect((await petstore.handle(get(issued.key))).status).toBe(200);
    expect((await petstore.handle(get(FREE_KEY))).status).toBe(200);
    const guarded = await petstore.guard(get(issued.key));
    expect(guarded.allowed && guarded.principal).toEqual({ keyId: issued.keyId, accountId: 'acme', plan: 'pro' });
    expect((await petstore.rateLimits.peek({ keyId: issued.keyId })).windows.map((window) => window.used)).toEqual([2, 2]);
    expect((await petstore.rateLimits.peek({ keyId: keyIdOf(FREE_KEY) })).windows.map((window) => window.used)).toEqual([1, 1]);
  });

  it('asks only the stores that accept the key, in order; the first principal wins; no store accepting means no hashing', async () => {
    const first = countingStore({ keyId: 'k1', accountId: 'first', plan: 'pro' }, (key) => key.startsWith('one_'));
    const second = countingStore({ keyId: 'k2', accountId: 'second', plan: 'free' });
    const third = countingStore({ keyId: 'k3', accountId: 'third', plan: 'free' });
    const { petstore } = testPetstore({ apiKeys: [first.store, second.store, third.store] });
    const one = await petstore.guard(get('one_key'));
    expect(one.allowed && one.principal.accountId).toBe('first');
    expect([first.calls.findPrincipal, second.calls.findPrincipal, third.calls.findPrincipal]).toEqual([1, 0, 0]);
    const other = await petstore.guard(get('other_key'));
    expect(other.allowed && other.principal.accountId).toBe('second'); // the first store refused the format
    expect([first.calls.findPrincipal, second.calls.findPrincipal, third.calls.findPrincipal]).toEqual([1, 1, 0]);

    const picky = countingStore({ keyId: 'k', accountId: 'a', plan: 'free' }, () => false);
    const { petstore: strict } = testPetstore({ apiKeys: [picky.store] });
    expectError(await strict.handle(get('whatever')), 401, 'unauthorized');
    expect(picky.calls).toEqual({ acceptsKey: 1, findPrincipal: 0 });
  });

  it('finds a keyId through the stores in order for petstore.rateLimits, and says not_found when none knows it', async () => {
    const first = countingStore(undefined);
    const second = countingStore({ keyId: 'k2', accountId: 'second', plan: 'free' });
    const { petstore } = testPetstore({ apiKeys: [first.store, second.store] });
    await petstore.guard(get('any'));
    expect((await petstore.rateLimits.peek({ keyId: 'k2' })).windows.map((window) => window.used)).toEqual([1, 1]);
    expect(first.calls.findPrincipal).toBe(1);
    await expect(petstore.rateLimits.peek({ keyId: 'nope' })).rejects.toMatchObject({ code: 'not_found' });
  });

  it('answers 503 with Retry-After when the managed key store fails, never 500', async () => {
    const records = testApiKeyRecordStore();
    const managed = managedApiKeys({ store: { ...records, findByDigest: () => Promise.reject(new Error('ECONNREFUSED')) } });
    const { petstore, internalErrors } = testPetstore({ apiKeys: [managed] });
    const response = await petstore.handle(get(generateManagedKey('pet_')));
    expectError(response, 503, 'service_unavailable');
    expect(response.headers['retry-after']).toBe('5');
    expect(internalErrors).toEqual([]);
  });
});

describe('managed keys through the pipeline', () => {
  it('401 after revocation, after expiry, and for a rotated key after its grace period; one quota per account', async () => {
    const { petstore, managed, clock } = managedPetstore();
    const first = await managed.issue({ accountId: 'acme', plan: 'free', expiresInMs: 3_600_000 });
    const second = await managed.issue({ accountId: 'acme', plan: 'free' });
    expect((await petstore.handle(get(first.key))).status).toBe(200);
    const answer = await petstore.handle(get(second.key));
    expect(answer.headers['x-ratelimit-remaining']).toBe('58'); // one quota for both keys of the account
    const rotated = await managed.rotate(second.keyId, { graceMs: 60_000 });
    expect((await petstore.handle(get(rotated.key))).headers['x-ratelimit-remaining']).toBe('57');
    expect((await petstore.handle(get(second.key))).headers['x-ratelimit-remaining']).toBe('56'); // in grace, same quota
    clock.advance(60_000);
    expectError(await petstore.handle(get(second.key)), 401, 'unauthorized');
    expect((await petstore.handle(get(rotated.key))).status).toBe(200);
    await managed.revoke(second.keyId);
    expectError(await petstore.handle(get(rotated.key)), 401, 'unauthorized');
    expect((await petstore.handle(get(first.key))).status).toBe(200);
    clock.advance(3_540_000); // an hour after issue
    expectError(await petstore.handle(get(first.key)), 401, 'unauthorized');
  });
});

describe('cached-only lookups while a caller is refused', () => {
  it('tell callers apart by the host\'s anonymousKey when it has one', async () => {
    const clock = fakeClock();
    const records = testApiKeyRecordStore();
    const managed = managedApiKeys({ store: records, clock });
    const { petstore } = testPetstore({
      apiKeys: [managed],
      clock,
      rateLimit: {
        store: testRateLimitStore(),
        anonymous: { requestsPerMinute: 2, requestsPerDay: 100 },
        anonymousKey: (request) => request.headers['x-session'] as string | undefined,
      },
    });
    const valid = await managed.issue({ accountId: 'acme', plan: 'pro' });
    const from = (session: string, key: string): PetstoreRequest => ({ ...get(key), headers: { ...get(key).headers, 'x-session': session } });
    for (let n = 0; n < 3; n++) await petstore.handle(from('flooder', generateManagedKey('pet_')));
    expect(records.digestLookups).toBe(3); // 2 admitted as anonymous, then the one refused
    for (let n = 0; n < 10; n++) expect((await petstore.handle(from('flooder', generateManagedKey('pet_')))).status).toBe(429);
    expectError(await petstore.handle(from('flooder', valid.key)), 429, 'rate_limited'); // uncached: not looked up
    expect(records.digestLookups).toBe(3);
    expect((await petstore.handle(from('someone-else', valid.key))).status).toBe(200); // same address, other session
    expect(records.digestLookups).toBe(4);
    expect((await petstore.handle(from('flooder', valid.key))).status).toBe(200); // cached now: served
  });

  it('keep serving a key accepted before from an address banned for its neighbour\'s flood, past the cache\'s lifetime', async () => {
    const { petstore, records, managed, clock } = managedPetstore();
    const pro = await managed.issue({ accountId: 'customer', plan: 'pro' });
    const noKey = (): PetstoreRequest => ({ method: 'GET', path: '/categories', headers: {}, clientAddress: CLIENT_ADDRESS });
    expect((await petstore.handle(get(pro.key))).status).toBe(200); // accepted once, from the shared address
    // The neighbour behind the same address floods without a key: limited, then banned for 15 minutes.
    for (let n = 0; n < 60; n++) await petstore.handle(noKey());
    expectError(await petstore.handle(noKey()), 429, 'temporarily_banned');
    const lookupsBefore = records.digestLookups;
    // The customer goes on every 5 s for 2 minutes (four times the cache's 30 s), the neighbour flooding on.
    for (let second = 5; second <= 120; second += 5) {
      clock.advance(5_000);
      for (let n = 0; n < 5; n++) expectError(await petstore.handle(noKey()), 429, 'temporarily_banned');
      expect((await petstore.handle(get(pro.key))).status, `at ${second} s`).toBe(200);
    }
    // Looked up again once its cache entry is past its 30 s (at 35, 70 and 105 s), not at every request.
    expect(records.digestLookups - lookupsBefore).toBe(3);
    // A key this instance never accepted is still not looked up from the banned address.
    const other = await managed.issue({ accountId: 'stranger', plan: 'pro' });
    expectError(await petstore.handle(get(other.key)), 429, 'temporarily_banned');
    expect(records.digestLookups - lookupsBefore).toBe(3);
  });
});

// 10,000 requests each (the bench's Backends section runs the same floods with 100,000 on Redis and PostgreSQL);
// nothing here depends on time passing.
const FLOOD = 10_000;
const FLOOD_TIMEOUT_MS = 60_000;

describe('lookups under a flood', () => {
  it('costs no managed-store lookup for 10,000 random tokens', async () => {
    const { petstore, records } = managedPetstore();
    const { random } = seededRandom(7);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~';
    const statuses = new Set<number>();
    for (let n = 0; n < FLOOD; n++) {
      // A third shaped like managed keys (prefix and length), the rest of any length up to 60.
      const length = n % 3 === 0 ? 38 : 1 + Math.floor(random() * 60);
      let token = n % 3 === 0 ? 'pet_' : '';
      for (let i = 0; i < length; i++) token += alphabet[Math.floor(random() * (n % 3 === 0 ? 62 : alphabet.length))];
      const address = `198.51.${(n >> 8) & 255}.${n & 255}`; // many addresses: the anonymous limit never steps in
      statuses.add((await petstore.handle(get(token, address))).status);
    }
    expect(records.digestLookups).toBe(0);
    expect([...statuses]).toEqual([401]);
  }, FLOOD_TIMEOUT_MS);

  it('stops looking up well-formed unknown keys from one address once the address is refused', async () => {
    const { petstore, records, managed, clock } = managedPetstore();
    const cached = await managed.issue({ accountId: 'acme', plan: 'pro' });
    const uncached = await managed.issue({ accountId: 'other', plan: 'pro' });
    expect((await petstore.handle(get(cached.key))).status).toBe(200); // cached before the flood
    const before = records.digestLookups;
    const statuses = new Map<number, number>();
    for (let n = 0; n < FLOOD; n++) {
      const status = (await petstore.handle(get(generateManagedKey('pet_')))).status;
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    }
    const lookups = records.digestLookups - before;
    // The anonymous quota's worth of 401s, each after one lookup, then the request that is refused (looked up
    // before the refusal was known): then none.
    expect(lookups).toBe(DEFAULT_ANONYMOUS_LIMITS.requestsPerMinute + 1);
    expect(statuses.get(401)).toBe(DEFAULT_ANONYMOUS_LIMITS.requestsPerMinute);
    expect(statuses.get(429)).toBe(FLOOD - DEFAULT_ANONYMOUS_LIMITS.requestsPerMinute);
    // A cached key still works from the flooding address; an uncached valid one is refused there (the
    // documented trade-off) and works from another address.
    expect((await petstore.handle(get(cached.key))).status).toBe(200);
    expectError(await petstore.handle(get(uncached.key)), 429, 'temporarily_banned');
    expect((await petstore.handle(get(uncached.key, '192.0.2.99'))).status).toBe(200);
    expect(records.digestLookups - before).toBe(lookups + 1);
    // Once the address's refusal (a 15-minute ban) has ended, its keys are looked up again.
    clock.advance(15 * 60_000);
    const fresh = await managed.issue({ accountId: 'late', plan: 'pro' });
    expect((await petstore.handle(get(fresh.key))).status).toBe(200);
  }, FLOOD_TIMEOUT_MS);

  it('holds the same bound when 2,000 well-formed unknown keys from one address arrive at once', async () => {
    const { petstore, records, managed } = managedPetstore();
    const cached = await managed.issue({ accountId: 'acme', plan: 'pro' });
    expect((await petstore.handle(get(cached.key))).status).toBe(200);
    const before = records.digestLookups;
    const answers = await Promise.all([
      ...Array.from({ length: 2_000 }, () => petstore.handle(get(generateManagedKey('pet_')))),
      petstore.handle(get(cached.key)), // a cached key does not wait behind the burst
    ]);
    const statuses = answers.map((answer) => answer.status);
    // As one at a time: the anonymous quota's worth of 401s, each after one lookup, then the request refused.
    expect(records.digestLookups - before).toBe(DEFAULT_ANONYMOUS_LIMITS.requestsPerMinute + 1);
    expect(statuses.filter((status) => status === 401)).toHaveLength(DEFAULT_ANONYMOUS_LIMITS.requestsPerMinute);
    expect(statuses.filter((status) => status === 429)).toHaveLength(2_000 - DEFAULT_ANONYMOUS_LIMITS.requestsPerMinute);
    expect(statuses.at(-1)).toBe(200);
    // Other addresses are not held up by that one's queue.
    const elsewhere = await managed.issue({ accountId: 'elsewhere', plan: 'pro' });
    expect((await petstore.handle(get(elsewhere.key, '192.0.2.99'))).status).toBe(200);
  });
});
