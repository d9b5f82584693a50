/**
 * An operator's reset with the Redis block cache on (the default): two app instances (Fastify and Express) on
 * one Redis, a key banned on both, each answering it from its own memory; `petstore.rateLimits.reset` through
 * one of them is obeyed by that one at once and by the other within `blockCache.maxAgeMs` (1 s): its cache asks
 * Redis again once its answer is a second old. Time: Redis's clock decides, the instances' clock (`Date`, which
 * the cache counts its second on) is moved by fake timers.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { GUARD_CALL_TIMEOUT_MS, call, startInstance, type Answer, type Instance } from './instances.js';

const redisUrl = inject('redisUrl');
const API_KEY = `operator-reset-key-${randomUUID()}`;
const ACCOUNT = 'operator-reset-account';

describe.skipIf(redisUrl === null)('an operator reset with the block cache on, two instances on one Redis', () => {
  const instances: Array<Awaited<ReturnType<typeof startInstance>>> = [];
  beforeAll(async () => {
    const keyPrefix = `petstore-test:${randomUUID()}:`;
    for (const framework of ['fastify', 'express'] as const) {
      instances.push(await startInstance({ framework, redisUrl: redisUrl as string, keyPrefix, apiKeys: [{ key: API_KEY, plan: 'free', accountId: ACCOUNT }], callTimeoutMs: GUARD_CALL_TIMEOUT_MS }));
    }
  });
  afterAll(async () => {
    await Promise.all(instances.map((instance) => instance.close()));
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const code = (answer: Answer) => (answer.status === 200 ? 200 : (answer.body as { code: string }).code);
  const get = (instance: Instance) => call(instance, '/v1/categories', { apiKey: API_KEY });

  it('is obeyed by the instance it went through at once, and by the other within one second', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const [one, two] = instances as [(typeof instances)[number], (typeof instances)[number]];
    // Free: 60 a minute, then the default ban at the 20th rejection. Both instances take turns until each has
    // answered "banned" (the one that started the ban learned it from Redis; the other's first answer asks Redis).
    const seen = [new Set<unknown>(), new Set<unknown>()];
    for (let i = 0; i < 400 && !(seen[0]!.has('temporarily_banned') && seen[1]!.has('temporarily_banned')); i++) {
      seen[i % 2]!.add(code(await get(i % 2 === 0 ? one : two)));
    }
    expect([seen[0]!.has('temporarily_banned'), seen[1]!.has('temporarily_banned')]).toEqual([true, true]);
    // Banned on both, from memory now; the operator sees the ban from either instance.
    expect([code(await get(one)), code(await get(two))]).toEqual(['temporarily_banned', 'temporarily_banned']);
    const peeked = await two.petstore.rateLimits.peek({ accountId: ACCOUNT });
    expect(peeked.bans).toHaveLength(1);
    expect(peeked.bans[0]!.bannedUntilMs).toBeGreaterThan(peeked.nowMs);

    await one.petstore.rateLimits.reset({ accountId: ACCOUNT });
    expect(await two.petstore.rateLimits.peek({ accountId: ACCOUNT })).toMatchObject({ bans: [], windows: [] });
    expect(code(await get(one))).toBe(200); // the instance the reset went through forgot the ban with it
    // The other still answers the ban it knows, for at most a second after its last answer from Redis…
    vi.advanceTimersByTime(999);
    expect(code(await get(two))).toBe('temporarily_banned');
    // …then asks Redis again: admitted, a second after the reset at most.
    vi.advanceTimersByTime(1);
    expect(code(await get(two))).toBe(200);
    expect((await one.petstore.rateLimits.peek({ accountId: ACCOUNT })).bans).toEqual([]);
  });
});
